"""The executor contract: one job, from launch to its final state.

``JobExecutor.process`` is a template method, as jupyter-scheduler's
``ExecutionManager.process``: ``before_start`` → ``execute`` → ``on_complete``
(or ``on_failure`` when the job could not be run at all). ``resume`` is its
twin after a restart of the job service: ``reattach`` → ``on_complete``.

Subclasses implement where the runner runs (:meth:`execute`, :meth:`reattach`,
:meth:`stop`); what a finished run *means* (:func:`final_state`) is shared, so
local and Kubernetes jobs fail, stop and time out with the same sentences.
"""

from __future__ import annotations

import time
from abc import ABCMeta, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from traitlets import Float, MetaHasTraits
from traitlets.config import LoggingConfigurable

from gpuspawner.core.cgroups import ResourceLimits, format_bytes
from gpuspawner.core.grant import Grant

from ..logs import LogStore
from ..models import JobErrorInfo, JobStatus
from ..runfiles import JobFiles, RunnerStatus, read_status
from ..store import ACTIVE, JobRow, JobStore, utcnow


class StopReason(StrEnum):
    REQUEST = "request"
    DEADLINE = "deadline"


@dataclass(frozen=True)
class JobOutcome:
    """How the job's process ended, as the executor saw it."""

    status: RunnerStatus | None
    """The runner's last report (final when the runner finished on its own terms)."""
    exit_code: int | None = None
    """The process's exit code (negative: killed by that signal); None when unknown."""
    stop_reason: StopReason | None = None
    forced: bool = False
    """The process did not stop within the grace period and was killed."""
    vanished: bool = False
    """The process was gone when the job service came back after a restart."""
    last_cell: int | None = None
    """The cell the executor last saw running (the runner clears it when it ends)."""
    oom_killed: bool = False
    """The kernel killed a process of the job for passing the job's memory limit."""
    memory_limit: int | None = None
    """That limit in bytes, when known."""


@dataclass(frozen=True)
class FinalState:
    status: JobStatus
    message: str
    error: JobErrorInfo | None = None
    exit_code: int | None = None


def _cell(outcome: JobOutcome) -> int | None:
    """The cell that was running when the job ended."""
    if outcome.status is not None and outcome.status.current_cell is not None:
        return outcome.status.current_cell
    return outcome.last_cell


def _progress(status: RunnerStatus | None) -> str:
    if status is None or status.cells_total is None:
        return "before any cell ran"
    return f"after {status.cells_completed} of {status.cells_total} code cells"


def final_state(outcome: JobOutcome, *, deadline_seconds: int | None, grace: float) -> FinalState:
    """What the job's owner is told, from how its process ended. Pure; see tests/jobs."""
    status = outcome.status
    reported = status is not None and status.final
    exit_code = outcome.exit_code
    if exit_code is None and status is not None:
        exit_code = status.exit_code
    # A runner that finished on its own (completed, or failed in a cell) before the
    # deadline's SIGTERM reached it keeps its own result.
    ended_alone = reported and status is not None and status.state is not JobStatus.STOPPED
    if outcome.oom_killed and not (
        reported and status is not None and status.state is JobStatus.COMPLETED
    ):
        limit = (
            f"its memory limit of {format_bytes(outcome.memory_limit)}"
            if outcome.memory_limit
            else "its memory limit"
        )
        return FinalState(
            JobStatus.FAILED,
            f"The job ran out of memory: it needed more than {limit} and was stopped "
            f"{_progress(status)}. The log keeps everything it printed until then; use less "
            "memory or choose a flavor with more.",
            JobErrorInfo(
                cell_index=_cell(outcome),
                ename="OutOfMemory",
                evalue=f"out of memory: more than {limit}",
            ),
            exit_code,
        )
    if outcome.stop_reason is StopReason.DEADLINE and not ended_alone:
        evalue = f"deadline of {deadline_seconds} s exceeded"
        return FinalState(
            JobStatus.FAILED,
            f"The job ran past its deadline of {deadline_seconds} s and was stopped "
            f"{_progress(status)}; the output notebook keeps the cells that ran.",
            JobErrorInfo(
                cell_index=_cell(outcome),
                ename="DeadlineExceeded",
                evalue=evalue,
            ),
            exit_code,
        )
    if reported and status is not None:
        if outcome.stop_reason is StopReason.REQUEST and status.state is JobStatus.STOPPED:
            return FinalState(
                JobStatus.STOPPED,
                f"Stopped on request {_progress(status)}; the output notebook keeps them.",
                None,
                exit_code,
            )
        return FinalState(status.state, status.message or "", status.error, exit_code)
    if outcome.stop_reason is StopReason.REQUEST:
        how = f" (it did not stop within {grace:g} s and was killed)" if outcome.forced else ""
        return FinalState(
            JobStatus.STOPPED,
            f"Stopped on request {_progress(status)}{how}.",
            None,
            exit_code,
        )
    if outcome.vanished:
        return FinalState(
            JobStatus.FAILED,
            "The job service restarted and the job's process was gone; the output notebook "
            f"keeps the cells that ran ({_progress(status)}). Run the job again.",
            JobErrorInfo(ename="JobLost", evalue="the job's process was gone after a restart"),
            exit_code,
        )
    if exit_code is not None and exit_code < 0:
        signal_number = -exit_code
        hint = " (out of memory?)" if signal_number == 9 else ""
        return FinalState(
            JobStatus.FAILED,
            f"The job's process was killed by signal {signal_number}{hint} "
            f"{_progress(status)}; see the log.",
            JobErrorInfo(
                cell_index=_cell(outcome),
                ename="ProcessKilled",
                evalue=f"killed by signal {signal_number}{hint}",
            ),
            exit_code,
        )
    return FinalState(
        JobStatus.FAILED,
        f"The job's process ended (exit code {exit_code}) without reporting a result "
        f"{_progress(status)}; see the log.",
        JobErrorInfo(ename="RunnerFailed", evalue=f"exit code {exit_code}"),
        exit_code,
    )


class _AbstractConfigurable(MetaHasTraits, ABCMeta):
    """Traitlets' metaclass with abstract methods: an executor missing one cannot be made."""


class JobExecutor(LoggingConfigurable, metaclass=_AbstractConfigurable):
    """Runs one job; the manager makes one per job it starts or re-adopts."""

    stop_grace_seconds = Float(
        10.0,
        help="""Seconds a stopping job gets to finish its current cell and save, before it is
        killed: ``c.JobExecutor.stop_grace_seconds = 30``.""",
    ).tag(config=True)

    poll_interval = Float(
        0.5,
        help="Seconds between looks at a running job's process and progress.",
    ).tag(config=True)

    def __init__(
        self,
        *,
        job: JobRow,
        files: JobFiles,
        store: JobStore,
        log_store: LogStore,
        environment: dict[str, str] | None = None,
        on_process_started: Callable[[int, float], None] | None = None,
        limits: ResourceLimits | None = None,
        grant: Grant | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self._on_process_started = on_process_started
        self.grant = grant
        """What the job service's admission granted (None: standalone, no decision):
        applied as it is, never decided again here."""
        self.limits = limits or ResourceLimits()
        self.job = job
        self.job_id = job.job_id
        self.files = files
        self.store = store
        self.log_store = log_store
        self.environment = dict(environment or {})
        self.stop_reason: StopReason | None = None
        self.last_cell: int | None = None
        self._reported: tuple[Any, ...] | None = None

    # -- the template ---------------------------------------------------------------------

    async def process(self) -> None:
        """Run the job to its end and record the result."""
        try:
            await self.before_start()
            outcome = await self.execute()
        except Exception as error:
            await self.on_failure(error)
        else:
            await self.on_complete(outcome)

    async def resume(self) -> None:
        """Take a job started before a restart back under watch, to its end."""
        try:
            outcome = await self.reattach()
        except Exception as error:
            await self.on_failure(error)
        else:
            await self.on_complete(outcome)

    async def before_start(self) -> None:
        gpu = (self.job.gpu or {}).get("description")
        self.log_line(f"starting with {gpu}" if gpu else "starting")

    @abstractmethod
    async def execute(self) -> JobOutcome:
        """Launch the runner and wait for it to end (deadline and stop requests included)."""

    @abstractmethod
    async def reattach(self) -> JobOutcome:
        """Watch a job launched before a restart; a vanished one ends at once."""

    @abstractmethod
    async def still_running(self) -> bool:
        """After a restart: does the job's process (or pod) still run?"""

    @abstractmethod
    async def stop(self, reason: StopReason = StopReason.REQUEST) -> None:
        """Ask the job to stop after its current cell; kill it after the grace period."""

    async def on_failure(self, error: Exception) -> None:
        self.log.exception("Job %s could not be run", self.job_id)
        message = f"The job could not be started: {error}. Tell the hub admins if this persists."
        self.log_line(f"failed: {message}")
        self.store.transition(
            self.job_id,
            (JobStatus.CREATED, JobStatus.QUEUED, *ACTIVE),
            JobStatus.FAILED,
            status_message=message,
            error={"cell_index": None, "ename": type(error).__name__, "evalue": str(error)},
            current_cell=None,
            end_time=utcnow(),
        )

    async def on_complete(self, outcome: JobOutcome) -> None:
        self.report_progress(outcome.status)
        final = final_state(
            outcome, deadline_seconds=self.job.deadline_seconds, grace=self.stop_grace_seconds
        )
        # The log's last line comes before the state change: a follower that sees the
        # job final has already read it. (The runner wrote it already when its own
        # result stands.)
        runner_said = outcome.status.message if outcome.status and outcome.status.final else None
        if final.message != runner_said:
            self.log_line(f"{final.status.value.lower()}: {final.message}")
        self.store.transition(
            self.job_id,
            ACTIVE,
            final.status,
            status_message=final.message,
            error=final.error.model_dump() if final.error else None,
            exit_code=final.exit_code,
            current_cell=None,
            end_time=utcnow(),
        )

    # -- helpers for subclasses -----------------------------------------------------------

    def process_started(self, pid: int, start_time: float) -> None:
        """Tell the manager the job's own process runs now: ``pid``, started at
        ``start_time`` (seconds since the epoch, as ``psutil.Process.create_time``).

        Executors whose jobs are local processes call this right after launching the
        runner, so the job's GPU slice in a shared ledger is held by the runner itself and
        survives a crash of the job service or the hub.
        """
        if self._on_process_started is not None:
            self._on_process_started(pid, start_time)

    def log_line(self, text: str) -> None:
        self.log_store.append_line(self.job_id, f"[job] {text}")

    def stop_requested_elsewhere(self) -> bool:
        """True when the store says STOPPING (a stop asked of another manager instance)."""
        row = self.store.get(self.job_id)
        return row is not None and row.status == JobStatus.STOPPING.value

    def read_status(self) -> RunnerStatus | None:
        return read_status(self.files)

    def report_progress(self, status: RunnerStatus | None) -> None:
        """Copy the runner's progress into the store when it changed."""
        if status is None:
            return
        if status.current_cell is not None:
            self.last_cell = status.current_cell
        progress = (status.cells_completed, status.cells_total, status.current_cell)
        if progress == self._reported:
            return
        self._reported = progress
        self.store.update(
            self.job_id,
            cells_completed=status.cells_completed,
            cells_total=status.cells_total,
            current_cell=status.current_cell,
        )

    def seconds_left(self) -> float | None:
        """Until the whole-job deadline (negative once past); None without a deadline."""
        if not self.job.deadline_seconds:
            return None
        started: datetime = self.job.start_time or utcnow()
        elapsed = time.time() - started.timestamp()
        return self.job.deadline_seconds - elapsed
