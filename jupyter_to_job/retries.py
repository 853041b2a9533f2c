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
  or a job already STOPPING in the store), its deadline, and a runner that exited with an
  error code of its own without a status (a broken runner, not a disruption).
- An out-of-memory kill (the flavor's control group locally, ``OOMKilled`` on Kubernetes)
  is started again only when the job's flavor sets ``oom_retry_memory`` and the attempt ran
  with less: :func:`oom_retry` says so, with that memory, and the retry is counted against
  the job's retries like any other. The memory is kept with the attempt (the history entry's
  ``memory_bytes``), so every later attempt of the job gets it too (:func:`attempt_memory`);
  the next attempt is queued and admitted again as any job is. Without the setting, or when
  the larger memory ran out as well, the job ends FAILED as out of memory, and
  :func:`no_more_memory` tells its owner what to do.

Each new attempt is logged with a separator line and the reason, counted in the store
(``job_attempts``: attempt, max_attempts, history) and shown as "attempt 2 of 3". When the
retries are used up the job ends FAILED as any killed job does, with a sentence saying so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuspawner.policy.units import format_bytes

from .models import JobStatus

if TYPE_CHECKING:
    from .executors.base import JobOutcome


@dataclass(frozen=True)
class OomRetry:
    """Start a job that ran out of memory again, with ``memory_bytes``, for ``reason``."""

    reason: str
    memory_bytes: int


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


def oom_retry(outcome: JobOutcome, retry_memory: int | None) -> OomRetry | None:
    """Whether a job killed for running out of memory starts again with ``retry_memory``
    (its flavor's ``oom_retry_memory``, in bytes): only when the attempt ran with less and
    did not complete nor was stopped or past its deadline. None otherwise."""
    if not outcome.oom_killed or outcome.stop_reason is not None:
        return None
    status = outcome.status
    if status is not None and status.final and status.state is JobStatus.COMPLETED:
        return None
    limit = outcome.memory_limit
    if retry_memory is None or limit is None or retry_memory <= limit:
        return None
    return OomRetry(f"the job ran out of its {format_bytes(limit)} of memory", retry_memory)


def attempt_memory(history: Iterable[Mapping[str, Any]]) -> int | None:
    """The memory, in bytes, that a job's attempts get from now on: the largest an
    out-of-memory retry recorded in its attempt ``history`` (None: the flavor's own)."""
    memories = [int(entry["memory_bytes"]) for entry in history if entry.get("memory_bytes")]
    return max(memories, default=None)


def no_more_memory(retry_memory: int | None) -> str:
    """The sentence added to the message of a job with a checkpoint that ran out of memory
    and is not started again."""
    if retry_memory is None:
        return (
            "Its flavor does not start a job again with more memory; choose a flavor with "
            "more memory and run it again to continue from its checkpoint."
        )
    return (
        f"It ran out of the {format_bytes(retry_memory)} its flavor allows for a retry too; "
        "choose a flavor with more memory and run it again to continue from its checkpoint."
    )


def separator(attempt: int, max_attempts: int, reason: str, memory_bytes: int | None = None) -> str:
    """The log line that opens a new attempt (``memory_bytes``: it gets that much memory)."""
    more = f" with {format_bytes(memory_bytes)}" if memory_bytes else ""
    return (
        f"---- attempt {attempt} of {max_attempts}: {reason}; "
        f"starting again{more} from its checkpoint ----"
    )


def exhausted(max_attempts: int) -> str:
    """The sentence added to a killed job's message when no retry is left."""
    return (
        f"It was started {max_attempts} times, as many as its retries allow; "
        "run it again to continue from its checkpoint."
    )
