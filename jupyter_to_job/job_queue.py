"""The job queue: which queued job starts next (fair among people), starting it through an
executor with its admission's grant, and following it to its end. The JobManager subclasses
it; docs/jobs-manager.md tells the order and why."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuspawner.core.cgroups import ResourceLimits
from gpuspawner.core.grant import Grant
from gpuspawner.policy.admission import job_start_order

from .errors import JobQueueFull, JobRefused
from .executors import JobExecutor, LocalExecutor
from .executors.warm_pool import WarmRunnerPool
from .job_admission import JobTicket, JobWaits
from .logs import LogStore, check_job_id
from .manager_settings import JobManagerSettings
from .models import JobErrorInfo, JobStatus
from .notifications import JobNotifier
from .runfiles import JobFiles
from .store import ACTIVE, JobRow, JobStore, utcnow


class JobQueue(JobManagerSettings):
    """Queues jobs and starts them in the fair order while slots and GPU capacity allow."""

    store: JobStore
    log_store: LogStore
    notifier: JobNotifier
    warm_pool: WarmRunnerPool | None

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._executors: dict[str, JobExecutor] = {}
        self._tasks: dict[str, asyncio.Future[None]] = {}
        self._dispatch_lock = asyncio.Lock()
        self._queue_task: asyncio.Future[None] | None = None
        self._follow_ups: set[asyncio.Future[None]] = set()
        self._closing = False
        # When each owner's last job started (time.monotonic), for the fair order.
        self._last_started: dict[str, float] = {}
        self._end_listeners: list[Callable[[JobRow], None]] = []

    def add_end_listener(self, listener: Callable[[JobRow], None]) -> None:
        """Call ``listener(row)`` each time a job of this manager becomes final (its stored
        row, final status included). It runs on the event loop and must not block; what it
        raises is logged. The pipelines follow their jobs with this."""
        self._end_listeners.append(listener)

    def _ended(self, job_id: str) -> None:
        """A job became final: tell its owner (the notifier) and the listeners."""
        self.notifier.job_ended(job_id)
        if not self._end_listeners:
            return
        row = self.store.get(job_id)
        if row is None:
            return
        for listener in self._end_listeners:
            try:
                listener(row)
            except Exception:
                self.log.exception("A listener of job ends failed on job %s", job_id)

    def job_files(self, job_id: str) -> JobFiles:
        return JobFiles(Path(self.root_dir) / "jobs" / check_job_id(job_id))

    def _queue_positions(self) -> dict[str, int]:
        """Each queued job's place in the order the dispatcher starts jobs in (from 1)."""
        queued = self.store.with_status(JobStatus.QUEUED)
        if not queued:
            return {}
        order = self._start_order(queued, self.store.with_status(*ACTIVE))
        return {row.job_id: position for position, row in enumerate(order, start=1)}

    # -- the queue --------------------------------------------------------------------------

    def _check_queue_room(self, owner: str) -> None:
        queued = sum(1 for row in self.store.with_status(JobStatus.QUEUED) if row.owner == owner)
        if queued >= self.max_queued_jobs_per_user:
            jobs = "job" if queued == 1 else "jobs"
            raise JobQueueFull(
                f"You already have {queued} {jobs} waiting in the queue, and each person may "
                f"have {self.max_queued_jobs_per_user} queued at a time. Submit this job again "
                "when one of them has started, or stop a queued job you no longer need."
            )

    def _start_order(self, queued: list[JobRow], active: list[JobRow]) -> list[JobRow]:
        """The queued jobs in the order the dispatcher starts them (docs/jobs-manager.md)."""
        rows = {row.job_id: row for row in queued}
        running = Counter(row.owner for row in active)
        order = job_start_order(
            [(row.job_id, row.owner) for row in queued], running, self._last_started
        )
        return [rows[job_id] for job_id in order]

    async def dispatch(self) -> None:
        """Start queued jobs in the fair order while slots and GPU capacity allow.

        A job waiting on its owner's own limit is passed over; a job waiting for shared
        capacity, or for a slot, holds back the jobs after it (docs/jobs-manager.md).
        The service may call this when capacity frees up (a server stopped).
        """
        if self._closing:
            return
        async with self._dispatch_lock:
            queued = self.store.with_status(JobStatus.QUEUED)
            if not queued:
                return
            active = self.store.with_status(*ACTIVE)
            running = len(active)
            reasons: dict[str, str] = {}
            held_back: list[JobRow] = []  # behind a full slot count or full GPUs, in order
            why_held = ""
            # Owners (and flavors) at their own limit: the same answer for their later jobs.
            own_limits: dict[tuple[str, str | None], str] = {}
            for row in self._start_order(queued, active):
                own_limit = own_limits.get((row.owner, row.flavor))
                if own_limit is not None:
                    reasons[row.job_id] = own_limit
                    continue
                if held_back:
                    held_back.append(row)
                    continue
                if running >= self.max_running_jobs:
                    jobs = "job is" if running == 1 else "jobs are"
                    why_held = (
                        f"Waiting for a free job slot: {running} {jobs} running, and at "
                        f"most {self.max_running_jobs} run at a time."
                    )
                    held_back.append(row)
                    continue
                ticket = JobTicket(row.job_id, row.owner, row.flavor)
                try:
                    decision = self.capacity.acquire(ticket)
                except JobRefused as refusal:
                    self._fail_queued(row, refusal.message)
                    continue
                if isinstance(decision, JobWaits):
                    if decision.own_limit:  # others' jobs may start meanwhile
                        reasons[row.job_id] = decision.reason
                        own_limits[row.owner, row.flavor] = decision.reason
                    else:
                        why_held = f"Waiting for GPU capacity: {decision.reason}"
                        held_back.append(row)
                    continue
                if not self.store.transition(
                    row.job_id,
                    (JobStatus.QUEUED,),
                    JobStatus.RUNNING,
                    start_time=utcnow(),
                    gpu=decision.gpu,
                    status_message=None,
                ):
                    self.capacity.release(ticket)  # stopped or taken meanwhile
                    continue
                started = self.store.get(row.job_id)
                assert started is not None
                try:
                    executor = self._make_executor(
                        started,
                        {**(started.environment or {}), **decision.environment},
                        limits=decision.limits,
                        grant=decision.grant,
                    )
                except Exception as error:
                    self.capacity.release(ticket)
                    self.store.transition(
                        row.job_id,
                        ACTIVE,
                        JobStatus.FAILED,
                        status_message=f"The job could not be started: {error}.",
                        end_time=utcnow(),
                    )
                    continue
                self._watch(executor, executor.process())
                self._last_started[row.owner] = time.monotonic()
                running += 1
            for position, row in enumerate(held_back):
                reasons[row.job_id] = (
                    why_held if position == 0 else "Waiting for the jobs ahead of it to start."
                )
            self._waiting(queued, reasons)

    def _waiting(self, queued: list[JobRow], reasons: dict[str, str]) -> None:
        """Tell each job still waiting why it waits."""
        for row in queued:
            message = reasons.get(row.job_id)
            if message is not None and row.status_message != message:
                self.store.update(row.job_id, status_message=message)

    def _fail_queued(self, row: JobRow, message: str) -> None:
        if self.store.transition(
            row.job_id,
            (JobStatus.QUEUED,),
            JobStatus.FAILED,
            status_message=message,
            error=JobErrorInfo(ename="JobRefused", evalue=message).model_dump(),
            end_time=utcnow(),
        ):
            self.log_store.append_line(row.job_id, f"[job] failed: {message}")
            self._ended(row.job_id)

    async def _queue_loop(self) -> None:
        while not self._closing:
            await asyncio.sleep(self.queue_poll_interval)
            try:
                await self.dispatch()
            except Exception:  # a database hiccup must not end the queue for good
                self.log.exception("Could not start queued jobs")

    def prewarm(
        self,
        owner: str,
        flavor: str | None = None,
        *,
        environment: dict[str, str] | None = None,
        limits: ResourceLimits | None = None,
    ) -> int:
        """Have ``owner``'s next job of ``flavor`` start warm: start runners ahead for them
        (``c.LocalExecutor.warm_pool_size``), as them, in ``limits``, their kernel with
        ``environment`` (the GPU share a job of theirs is expected to get; a job granted
        another keeps the warm runner but starts its own kernel). Returns how many runners
        were started; 0 where jobs do not run locally or warm starts are off.

        Call it when the person shows they may submit a job soon (the job service calls
        it when their Run as Job dialog asks for the flavors). Never fails a request: a
        runner that cannot be started is logged and the job starts cold.
        """
        if self.warm_pool is None or self._closing or self._queue_task is None:
            return 0  # no local jobs, or this manager is not running (start, shutdown)
        row = JobRow(job_id=f"warm-{uuid.uuid4().hex[:12]}", owner=owner, flavor=flavor)
        try:
            launcher = self._make_executor(row, environment or {}, limits=limits)
            assert isinstance(launcher, LocalExecutor)
            return launcher.prewarm()
        except Exception as error:
            self.log.warning("Could not start a warm runner for %s: %s", owner, error)
            return 0

    def _make_executor(
        self,
        row: JobRow,
        environment: dict[str, str],
        *,
        limits: ResourceLimits | None = None,
        grant: Grant | None = None,
    ) -> JobExecutor:
        local: dict[str, Any] = {}
        if self.warm_pool is not None:
            local["warm_pool"] = self.warm_pool
        return self.executor_class(
            parent=self,
            job=row,
            files=self.job_files(row.job_id),
            store=self.store,
            log_store=self.log_store,
            environment=environment,
            on_process_started=lambda pid, start_time: self._process_started(
                JobTicket(row.job_id, row.owner, row.flavor), pid, start_time
            ),
            limits=limits,
            grant=grant,
            **local,
        )

    def _process_started(self, ticket: JobTicket, pid: int, start_time: float) -> None:
        """The job's process runs: from now on it, not this manager, holds the job's slice."""
        try:
            self.capacity.hold(ticket, pid, start_time)
        except Exception:  # the job runs anyway; its slice stays with this service
            self.log.exception(
                "Could not record process %d as the holder of job %s's GPU slice",
                pid,
                ticket.job_id,
            )

    def _hand_over(self, row: JobRow) -> None:
        """Give a running job's slice to its process, when the store knows that process."""
        if row.pid is not None and row.process_start_time is not None:
            ticket = JobTicket(row.job_id, row.owner, row.flavor)
            self._process_started(ticket, row.pid, row.process_start_time)

    def _watch(self, executor: JobExecutor, run: Any) -> None:
        job_id = executor.job_id
        task = asyncio.ensure_future(run)
        self._executors[job_id] = executor
        self._tasks[job_id] = task
        task.add_done_callback(lambda done: self._job_ended(executor, done))

    def _job_ended(self, executor: JobExecutor, task: asyncio.Future[None]) -> None:
        job_id = executor.job_id
        if self._tasks.get(job_id) is task:
            del self._tasks[job_id]
            self._executors.pop(job_id, None)
        if task.cancelled():  # the manager shut down; the job runs on, unwatched
            return
        if task.exception() is not None:
            self.log.error("Watching job %s failed", job_id, exc_info=task.exception())
        self.capacity.release(JobTicket(job_id, executor.job.owner, executor.job.flavor))
        if self._closing:
            return
        row = self.store.get(job_id)
        if row is not None and row.job_status is JobStatus.QUEUED:
            pass  # killed from outside: queued again for its next attempt
        elif row is not None and not row.job_status.is_final:
            self.log.error("Job %s ended without a final state", job_id)
        elif row is not None:
            self._ended(job_id)
        # Keep a reference: the event loop holds tasks only weakly.
        follow_up = asyncio.ensure_future(self.dispatch())
        self._follow_ups.add(follow_up)
        follow_up.add_done_callback(self._follow_ups.discard)
