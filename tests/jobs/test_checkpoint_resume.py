"""Scenario: a job with a checkpoint folder is killed from outside and starts again from its
checkpoint; a job that fails by itself, or that its owner stops, is not started again."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from pydantic import ValidationError

from jupyter_to_job.errors import InvalidJobRequest
from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, JobCheckpoint, JobStatus
from jupyter_to_job.runfiles import read_status
from tests.support import eventually
from tests.support.checkpoint_training import (
    attempt_noting_cell,
    take_away_two_attempts,
    training_cell,
)
from tests.support.job_managers import ManagerFactory, finished

from ..support.notebooks import notebook, wait_for_file

SEPARATOR = (
    "[job] ---- attempt {n} of {m}: the runner was killed (signal 9); "
    "starting again from its checkpoint ----"
)


def request(name: str, retries: int, folder: str = "checkpoints/train") -> CreateJob:
    return CreateJob(
        input_path=f"{name}.ipynb",
        output_formats=["ipynb"],
        checkpoint=JobCheckpoint(folder=folder, retries=retries),
    )


async def kill_runner_and_kernel(manager: JobManager, job_id: str) -> None:
    """SIGKILL the job's runner and its kernel, as the kernel's OOM killer or a crash would."""
    status = read_status(manager.job_files(job_id))
    assert status is not None and status.runner_pid and status.kernel_pid
    os.kill(status.runner_pid, signal.SIGKILL)
    os.kill(status.kernel_pid, signal.SIGKILL)


async def test_a_job_killed_mid_run_resumes_from_its_checkpoint_and_completes(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given a job that checkpoints every step, with two retries, in its notebook's folder
    manager = await make_manager()
    work = tmp_path / "home" / "project"
    work.mkdir(parents=True)
    created = await manager.create(
        "alice",
        request("train", retries=2),
        notebook=notebook(training_cell(hold_at=7)),
        working_dir=work,
    )
    job_id = created.job_id
    folder = work / "checkpoints" / "train"
    assert created.job.max_attempts == 3 and created.job.attempt == 1
    assert created.job.checkpoint_folder == "checkpoints/train"

    # When its runner and kernel are killed after step 7
    await eventually(lambda: (folder / "held-1").exists(), what="the first attempt at step 7")
    await eventually(
        lambda: "attempt 1 starts after step 0" in manager.read_log(job_id).data,
        what="the first attempt's output in the log",
    )
    await kill_runner_and_kernel(manager, job_id)

    # Then it starts again, from its checkpoint, and completes
    job = await finished(manager, job_id)
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert (job.attempt, job.max_attempts) == (2, 3)
    # every step ran exactly once over both attempts: 1 + 2 + … + 20
    assert (folder / "steps.txt").read_text().split() == [str(n) for n in range(1, 21)]
    log = manager.read_log(job_id).data
    assert "total 210" in log
    assert "attempt 2 starts after step 7" in log
    assert SEPARATOR.format(n=2, m=3) in log
    assert log.index("attempt 1 starts after step 0") < log.index(SEPARATOR.format(n=2, m=3))
    assert manager.store.job_attempts(job_id).history[0]["reason"] == (
        "the runner was killed (signal 9)"
    )


async def test_a_job_that_fails_by_itself_is_not_started_again(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    manager = await make_manager()
    created = await manager.create(
        "alice",
        request("broken", retries=2),
        notebook=notebook("x = 1", "raise ValueError('the data is bad')"),
        working_dir=tmp_path,
    )

    job = await finished(manager, created.job_id)

    assert job.status is JobStatus.FAILED
    assert job.error is not None and job.error.ename == "ValueError"
    assert (job.attempt, job.max_attempts) == (1, 3)
    assert "---- attempt" not in manager.read_log(created.job_id).data
    # its checkpoint folder was made for it all the same
    assert (tmp_path / "checkpoints" / "train").is_dir()


async def test_a_job_its_owner_stops_is_not_started_again(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    manager = await make_manager()
    gate = tmp_path / "never"
    created = await manager.create(
        "alice",
        request("waiting", retries=2),
        notebook=notebook(wait_for_file(gate)),
        working_dir=tmp_path,
    )
    await eventually(
        lambda: manager.describe(created.job_id).current_cell == 0, what="the job to run"
    )

    await manager.stop(created.job_id, owner="alice")
    job = await finished(manager, created.job_id)

    assert job.status is JobStatus.STOPPED
    assert job.attempt == 1
    assert "---- attempt" not in manager.read_log(created.job_id).data


async def test_retries_used_up_end_failed_with_a_sentence(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given a job with one retry that holds on each attempt until it is killed
    manager = await make_manager()
    created = await manager.create(
        "alice",
        request("doomed", retries=1, folder="ckpt"),
        notebook=notebook(attempt_noting_cell(tmp_path / "never")),
        working_dir=tmp_path,
    )
    job_id = created.job_id

    # When it is killed on its first attempt and again on its second
    await take_away_two_attempts(
        tmp_path / "ckpt" / "held.txt", lambda: kill_runner_and_kernel(manager, job_id)
    )
    job = await finished(manager, job_id)

    # Then it fails, saying it was killed and that its retries are used up
    assert job.status is JobStatus.FAILED
    assert (job.attempt, job.max_attempts) == (2, 2)
    assert job.status_message is not None
    assert "killed by signal 9" in job.status_message
    assert job.status_message.endswith(
        "It was started 2 times, as many as its retries allow; run it again to continue "
        "from its checkpoint."
    )
    log = manager.read_log(job_id).data
    assert log.count("---- attempt") == 1
    assert SEPARATOR.format(n=2, m=2) in log


async def test_a_job_whose_runner_was_gone_after_a_restart_starts_again(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given a running job with a checkpoint, and a job service that goes away
    root = tmp_path / "root"
    before = await make_manager(root=root)
    created = await before.create(
        "alice",
        request("train", retries=1),
        notebook=notebook(training_cell(hold_at=5)),
        working_dir=tmp_path,
    )
    job_id = created.job_id
    folder = tmp_path / "checkpoints" / "train"
    await eventually(lambda: (folder / "held-1").exists(), what="the first attempt to hold")
    await before.shutdown()

    # When its processes die while the service is down (a reboot), and the service comes back
    status = read_status(before.job_files(job_id))
    assert status is not None and status.runner_pid and status.kernel_pid
    os.killpg(status.runner_pid, signal.SIGKILL)
    os.killpg(status.kernel_pid, signal.SIGKILL)
    after = await make_manager(root=root)

    # Then the job starts again from its checkpoint and completes
    job = await finished(after, job_id)
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert job.attempt == 2
    log = after.read_log(job_id).data
    assert (
        "[job] ---- attempt 2 of 2: the job service restarted and the runner was gone; "
        "starting again from its checkpoint ----"
    ) in log
    assert "attempt 2 starts after step 5" in log and "total 210" in log


async def test_a_checkpoint_asks_for_a_folder_below_the_notebook_and_few_enough_retries(
    make_manager: ManagerFactory,
) -> None:
    for folder, problem in (
        ("../elsewhere", "must not contain '..'"),
        ("/abs/path", "must be relative to the notebook's folder"),
        ("", "is empty"),
    ):
        with pytest.raises(ValidationError, match=problem):
            JobCheckpoint(folder=folder, retries=1)
    with pytest.raises(ValidationError):
        JobCheckpoint(folder="ckpt", retries=-1)

    manager = await make_manager(max_job_retries=2)
    with pytest.raises(InvalidJobRequest) as refused:
        await manager.create("alice", request("greedy", retries=5), notebook=notebook("1"))
    assert str(refused.value) == (
        "A job may be retried at most 2 times here, not 5; ask for fewer retries."
    )
