"""A warm runner on a shared machine runs as the person it waits for, as a cold one would.

Needs root (it creates a system account); the job manager runs here, in the test process,
as a job service running as root does, with ``c.LocalExecutor.run_as = "owner"``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nbformat
import psutil
import pytest
from traitlets.config import Config

from gpuspawner.core.accounts import UserAccount, ensure_account
from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, JobStatus

from ..support import WAIT
from ..support.hubprocess import REPO_ROOT
from ..support.notebooks import notebook
from .conftest import _account_exists, crossable_by_everyone, needs_root

OWNER = "warmjob1"


@pytest.fixture
def owner() -> Iterator[UserAccount]:
    """The system account of the job's owner, made for the test and removed after."""
    needs_root()
    existed = _account_exists(OWNER)
    try:
        yield ensure_account(OWNER)
    finally:
        if not existed:
            subprocess.run(["userdel", "--remove", OWNER], capture_output=True, check=False)


@pytest.fixture
async def manager(tmp_path: Path, owner: UserAccount) -> AsyncIterator[JobManager]:
    """A job manager running jobs as their owners, its folders crossable by them."""
    needed = [tmp_path, Path(sys.executable).resolve().parent, Path(sys.prefix), REPO_ROOT]
    with crossable_by_everyone(needed):
        config = Config()
        config.LocalExecutor.run_as = "owner"
        config.LocalExecutor.extra_environment = {"PYTHONPATH": str(REPO_ROOT)}
        config.LocalExecutor.poll_interval = 0.1
        manager = JobManager(root_dir=str(tmp_path / "service"), config=config)
        await manager.start()
        try:
            yield manager
        finally:
            await asyncio.wait_for(manager.shutdown(stop_jobs=True), WAIT)


async def test_a_warm_runner_and_its_kernel_run_as_their_owner(
    manager: JobManager, owner: UserAccount, tmp_path: Path
) -> None:
    # Given the job service (root) started a runner ahead for the student
    assert manager.prewarm(OWNER) == 1
    assert manager.warm_pool is not None
    assert await manager.warm_pool.wait_ready(OWNER, None) == 1
    (runner,) = manager.warm_pool.runners(OWNER, None)

    # Then it, and the kernel it started, run as the student, not as root
    process = psutil.Process(runner.pid)
    assert process.uids().real == owner.uid and process.uids().effective == owner.uid
    kernels = process.children(recursive=True)
    assert kernels and all(k.uids().effective == owner.uid for k in kernels)

    # When the student submits a notebook
    home = tmp_path / "home"
    home.mkdir()
    nbformat.write(notebook("import os\nprint('uid', os.getuid())"), home / "job.ipynb")
    created = await manager.create(OWNER, CreateJob(input_path="job.ipynb"), source_root=home)
    job = await asyncio.wait_for(manager.wait(created.job_id), WAIT)

    # Then that runner ran it, as the student, and the job's folder is theirs alone
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert manager.store.get(created.job_id).pid == runner.pid
    log = manager.log_store.path(created.job_id).read_text()
    assert f"[cell 0] uid {owner.uid}" in log
    assert "a warm start" in log
    folder = manager.job_files(created.job_id).directory
    assert folder.stat().st_uid == owner.uid and folder.stat().st_mode & 0o077 == 0
