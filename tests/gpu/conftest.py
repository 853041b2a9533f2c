"""Fixtures for the tests that need a real NVIDIA GPU (every test here is marked ``gpu``).

The jobs run through the project's own job manager and GPU admission, over the GPUs NVML
reports, exactly as the workstation's job service runs them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from gpuspawner.core.inventory import discover_nvml_gpus
from gpuspawner.policy import GPUDevice
from jupyter_to_job.manager import JobManager

from ..support.job_capacity import catalog_capacity
from ..support.job_managers import shut_down
from ..support.job_processes import kill_leftovers
from .gpu_jobs import HANG_GUARD, LEDGER, REPO

GPU_CATALOG = """
flavors:
  - {id: quarter, title: A quarter of a GPU, gpu: {fraction: 1/4}, access: {everyone: true}}
  - {id: whole, title: One GPU, gpu: {count: 1}, access: {everyone: true}}
  - {id: all, title: Every GPU of one machine, gpu: {count: %(count)d}, access: {everyone: true}}
"""


HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A conftest hook sees the whole session's items: mark this folder's only.
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.gpu)


@pytest.fixture
def gpus() -> list[GPUDevice]:
    """The GPUs NVML reports on this machine (the suite skips ``gpu`` tests without one)."""
    found = discover_nvml_gpus()
    if not found:
        pytest.skip("needs a real NVIDIA GPU (NVML found none)")
    return found


@pytest.fixture
async def gpu_manager(tmp_path: Path, gpus: list[GPUDevice]) -> AsyncIterator[Callable[..., Any]]:
    """``await gpu_manager(devices=..., ledger=..., **local_executor_settings)``: a job
    manager admitting jobs by ``GPU_CATALOG`` over this machine's real GPUs (or the
    ``devices`` given, a few of them), with the one-machine allocation ledger at
    ``tmp_path/gpu-allocations.json`` when ``ledger`` (the ledger records each job's
    runner as its slice's holder, as on the workstation)."""
    managers: list[JobManager] = []

    async def make(
        *, devices: list[GPUDevice] | None = None, ledger: bool = False, **executor: Any
    ) -> JobManager:
        config = Config()
        config.LocalExecutor.extra_environment = {"PYTHONPATH": str(REPO)}
        config.LocalExecutor.poll_interval = 0.1
        config.JobManager.max_running_jobs = 8
        for name, value in executor.items():
            setattr(config.LocalExecutor, name, value)
        manager = JobManager(root_dir=str(tmp_path / "root"), config=config)
        inventory = list(devices if devices is not None else gpus)
        capacity = catalog_capacity(
            tmp_path,
            GPU_CATALOG % {"count": len(inventory)},
            ["alice", "bob", "carol", "dave", "erin"],
            devices=inventory,
        )
        if ledger:
            capacity.ledger_path = str(tmp_path / LEDGER)
        manager.capacity = capacity
        await manager.start()
        managers.append(manager)
        return manager

    yield make
    await shut_down(managers, timeout=HANG_GUARD)
    kill_leftovers(tmp_path / "root")
