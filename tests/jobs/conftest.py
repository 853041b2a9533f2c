"""Fixtures for the job tests: job managers on a temporary root, gates, real kernels.

Every process a test starts is stopped at teardown: managers stop their jobs,
and any runner or kernel still alive after that is killed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_to_job.manager import JobManager

from ..support.job_managers import ManagerFactory, shut_down
from ..support.job_processes import kill_leftovers
from ..support.postgres import postgres_url_fixture

REPO = Path(__file__).resolve().parents[2]

postgres_url = postgres_url_fixture()

# A generous bound so a broken test fails instead of hanging; never a timing assertion.
HANG_GUARD = 90


def job_config(executor: dict[str, Any] | None = None, **traits: Any) -> Config:
    """Manager configuration for tests: fast polling, the runner on our path."""
    config = Config()
    # The runner must import this checkout's jupyter_to_job, installed or not.
    config.LocalExecutor.extra_environment = {"PYTHONPATH": str(REPO)}
    config.LocalExecutor.poll_interval = 0.1
    config.LocalExecutor.stop_grace_seconds = 10.0
    config.JobManager.queue_poll_interval = 0.2
    config.LogStore.follow_interval = 0.05
    for name, value in traits.items():
        setattr(config.JobManager, name, value)
    for name, value in (executor or {}).items():
        setattr(config.LocalExecutor, name, value)
    return config


@pytest.fixture
async def make_manager(tmp_path: Path) -> AsyncIterator[ManagerFactory]:
    """``await make_manager(max_running_jobs=1, root=..., executor={...})``: a started manager."""
    managers: list[JobManager] = []
    roots: set[Path] = set()

    async def make(*, root: Path | None = None, **traits: Any) -> JobManager:
        root = root or tmp_path / "root"
        capacity = traits.pop("capacity", None)
        manager = JobManager(root_dir=str(root), config=job_config(**traits))
        if capacity is not None:
            manager.capacity = capacity
        await manager.start()
        managers.append(manager)
        roots.add(root)
        return manager

    yield make
    await shut_down(managers, timeout=HANG_GUARD)
    for root in roots:
        kill_leftovers(root)
