"""What a job's owner is told at the end, from how its process ended (a pure function)."""

from __future__ import annotations

from jupyter_to_job.executors import JobOutcome, StopReason, final_state
from jupyter_to_job.models import JobErrorInfo, JobStatus
from jupyter_to_job.runfiles import RunnerStatus


def runner(state: JobStatus, **fields) -> RunnerStatus:  # type: ignore[no-untyped-def]
    return RunnerStatus(job_id="j", state=state, cells_total=5, **fields)


def test_the_runners_own_result_stands() -> None:
    error = JobErrorInfo(cell_index=3, ename="ValueError", evalue="bad")
    status = runner(
        JobStatus.FAILED, cells_completed=3, message="Cell 3 raised ValueError: bad", error=error
    )

    final = final_state(JobOutcome(status, exit_code=1), deadline_seconds=None, grace=10)

    assert final.status is JobStatus.FAILED
    assert final.message == "Cell 3 raised ValueError: bad"
    assert (final.error, final.exit_code) == (error, 1)


def test_a_deadline_fails_the_job_and_says_which_deadline() -> None:
    status = runner(JobStatus.STOPPED, cells_completed=2, current_cell=None, exit_code=143)

    final = final_state(
        JobOutcome(status, exit_code=143, stop_reason=StopReason.DEADLINE, last_cell=2),
        deadline_seconds=60,
        grace=10,
    )

    assert final.status is JobStatus.FAILED
    assert final.message == (
        "The job ran past its deadline of 60 s and was stopped after 2 of 5 code cells; "
        "the output notebook keeps the cells that ran."
    )
    assert final.error is not None and final.error.evalue == "deadline of 60 s exceeded"
    assert final.error.cell_index == 2  # the cell that was running, as last seen


def test_a_job_that_completed_just_as_its_deadline_passed_is_completed() -> None:
    status = runner(JobStatus.COMPLETED, cells_completed=5, message="All 5 code cells ran.")

    final = final_state(
        JobOutcome(status, exit_code=0, stop_reason=StopReason.DEADLINE),
        deadline_seconds=60,
        grace=10,
    )

    assert final.status is JobStatus.COMPLETED


def test_a_stop_request_that_had_to_kill_says_so() -> None:
    status = runner(JobStatus.RUNNING, cells_completed=1, current_cell=2)

    final = final_state(
        JobOutcome(status, exit_code=-9, stop_reason=StopReason.REQUEST, forced=True),
        deadline_seconds=None,
        grace=10,
    )

    assert final.status is JobStatus.STOPPED
    assert final.message == (
        "Stopped on request after 1 of 5 code cells (it did not stop within 10 s and was killed)."
    )


def test_a_process_gone_after_a_restart_is_lost() -> None:
    final = final_state(
        JobOutcome(runner(JobStatus.RUNNING, cells_completed=4), vanished=True),
        deadline_seconds=None,
        grace=10,
    )

    assert final.status is JobStatus.FAILED
    assert final.message.startswith("The job service restarted and the job's process was gone")


def test_a_runner_killed_by_sigkill_hints_at_memory() -> None:
    final = final_state(
        JobOutcome(runner(JobStatus.RUNNING, cells_completed=2, current_cell=3), exit_code=-9),
        deadline_seconds=None,
        grace=10,
    )

    assert final.status is JobStatus.FAILED
    assert "killed by signal 9 (out of memory?) after 2 of 5 code cells" in final.message
    assert final.error is not None and final.error.cell_index == 3


def test_a_runner_that_could_not_start_points_to_the_log() -> None:
    final = final_state(JobOutcome(None, exit_code=1), deadline_seconds=None, grace=10)

    assert final.message == (
        "The job's process ended (exit code 1) without reporting a result before any cell ran; "
        "see the log."
    )
