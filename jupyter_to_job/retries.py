"""When a job that ended is started again: the retry decision, pure.

Design notes: docs/design/jobs.md, "jupyter_to_job.retries".
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
