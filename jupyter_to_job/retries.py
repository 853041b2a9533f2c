"""When a job that ended is started again: the retry decision, pure.

A job asks for it with ``CreateJob.checkpoint`` (a folder and a number of retries). It is
started again (QUEUED once more, then a new attempt of the same notebook snapshot with the
same checkpoint folder) only when it was killed from outside, never when it failed by itself
or was stopped. The two are told apart by the runner's final status file:

- The runner writes ``status.json`` with a final state whenever it ends on its own terms:
  completed, failed in a cell (an exception, a dead kernel, a cell timeout), or stopped
  after a SIGTERM or SIGINT. A runner killed by a signal it cannot handle (SIGKILL from
  outside, a crash of the machine) writes none.
- So a job is *killed from outside* when its runner ended **without** a final status and
  either a signal ended it (a negative exit code: ``the runner was killed (signal 9)``) or
  the job service came back after a restart and found its process gone. A runner that
  reported STOPPED although nobody asked the job service to stop it (a SIGTERM sent by the
  machine shutting down) is killed from outside too.
- Never started again: a final COMPLETED or FAILED status (its own result, however it
  ended), a stop by its owner or an admin (the manager's stop: ``StopReason.REQUEST``,
  or a job already STOPPING in the store), its deadline, an out-of-memory kill by the
  flavor's control group (the same flavor would run out again), and a runner that exited
  with an error code of its own without a status (a broken runner, not a disruption).

Each new attempt is logged with a separator line and the reason, counted in the store
(``job_attempts``: attempt, max_attempts, history) and shown as "attempt 2 of 3". When the
retries are used up the job ends FAILED as any killed job does, with a sentence saying so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .models import JobStatus

if TYPE_CHECKING:
    from .executors.base import JobOutcome


def retry_reason(outcome: JobOutcome) -> str | None:
    """Why the job was killed from outside, in words; None when it must not start again."""
    status = outcome.status
    if outcome.stop_reason is not None or outcome.oom_killed:
        return None
    if status is not None and status.final:
        if status.state is JobStatus.STOPPED:
            return "the runner was stopped by a signal nobody asked the job service for"
        return None
    if outcome.vanished:
        return "the job service restarted and the runner was gone"
    if outcome.exit_code is not None and outcome.exit_code < 0:
        return f"the runner was killed (signal {-outcome.exit_code})"
    return None


def separator(attempt: int, max_attempts: int, reason: str) -> str:
    """The log line that opens a new attempt."""
    return (
        f"---- attempt {attempt} of {max_attempts}: {reason}; "
        "starting again from its checkpoint ----"
    )


def exhausted(max_attempts: int) -> str:
    """The sentence added to a killed job's message when no retry is left."""
    return (
        f"It was started {max_attempts} times, as many as its retries allow; "
        "run it again to continue from its checkpoint."
    )
