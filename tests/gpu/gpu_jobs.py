"""What the real-GPU scenarios share: notebooks that use the GPU, reading what a job
printed, and the frameworks they need."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, DescribeJob

from ..support.job_managers import finished
from ..support.notebooks import notebook

REPO = Path(__file__).resolve().parents[2]
"""The checkout: jobs find the project's packages on PYTHONPATH, as on the workstation."""

HANG_GUARD = 300
"""How long a scenario waits for a job or a reading: a bound for a broken test, never a
timing assertion."""

LEDGER = "gpu-allocations.json"
"""The allocation ledger's file in a scenario's folder (``gpu_manager(ledger=True)``)."""

needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="needs PyTorch with CUDA in the Python that runs the jobs (pip install torch)",
)


def busy_until(stop: Path) -> str:
    """Cell source: matrix products on the GPU until ``stop`` exists; prints ``ready`` once
    the GPU is busy."""
    return (
        "import os, torch\n"
        "a = torch.randn(8192, 8192, device='cuda')\n"
        "b = a @ a\n"
        "torch.cuda.synchronize()\n"
        "print('ready', flush=True)\n"
        f"while not os.path.exists({str(stop)!r}):\n"
        "    for _ in range(20):\n"
        "        b = a @ a\n"
        "    torch.cuda.synchronize()\n"
        "print('stopped')"
    )


def idle_until(stop: Path, gib: int = 1) -> str:
    """Cell source: holds ``gib`` GiB on the GPU and runs no kernel until ``stop`` exists;
    prints ``ready`` once the memory is held."""
    return (
        "import os, time, torch\n"
        f"held = torch.empty({gib} * 2**30, dtype=torch.uint8, device='cuda')\n"
        "torch.cuda.synchronize()\n"
        "print('ready', flush=True)\n"
        f"while not os.path.exists({str(stop)!r}):\n"
        "    time.sleep(0.1)\n"
        "print('stopped')"
    )


async def start_job(
    manager: JobManager, owner: str, *cells: str, flavor: str = "quarter"
) -> DescribeJob:
    """Submit ``cells`` as ``owner``'s job on ``flavor``; the job as created."""
    created = await manager.create(
        owner,
        CreateJob(input_path=f"{owner}.ipynb", flavor=flavor, output_formats=["ipynb"]),
        notebook=notebook(*cells),
    )
    return created.job


async def run_job(
    manager: JobManager, owner: str, *cells: str, flavor: str = "quarter"
) -> tuple[DescribeJob, str]:
    """Run ``cells`` as ``owner``'s job on ``flavor`` to its end: the job and its log."""
    job = await start_job(manager, owner, *cells, flavor=flavor)
    done = await finished(manager, job.job_id, timeout=HANG_GUARD)
    return done, log_of(manager, job.job_id)


def log_of(manager: JobManager, job_id: str) -> str:
    return manager.read_log(job_id).data


def printed(log: str, cell: int = 0) -> dict[str, str]:
    """What a cell printed as ``key value`` lines, from the job's log."""
    seen = {}
    prefix = f"[cell {cell}] "
    for line in log.splitlines():
        if line.startswith(prefix):
            key, _, value = line.removeprefix(prefix).partition(" ")
            seen[key] = value
    return seen
