"""The job manager: create, queue, run, stop, delete and reconcile jobs.

One manager owns one store and one folder of job data. The REST service and the
server extension (standalone mode) both sit on top of it and call the methods
below; they map :mod:`jupyter_to_job.errors` to HTTP statuses.

Lifecycle: ``create`` snapshots the notebook into the job's folder (later edits
do not change the job) and queues it (each person may have at most
``max_queued_jobs_per_user`` queued; more is a 429). The queue is fair among
people: when fewer than ``max_running_jobs`` run, the next slot goes to the owner
with the fewest running jobs; among equals, to the one whose last job started
longest ago (since this manager started), then to the oldest job; each owner's own
jobs go first in, first out (``job_start_order`` in the policy). The capacity hook must
grant the job its GPU share; otherwise it waits with a visible position and a
reason. A job that waits on its owner's own limit (``max_running_per_user`` of
its flavor) is passed over, so it never holds back other people's jobs; one that
waits for shared GPU capacity keeps the next GPU for itself, and the jobs after it
wait too, so a large share is never overtaken for good by smaller ones. A queued
job's position is its place in that order. An executor (``executor_class``) runs
it and records the result.

``start`` reconciles before anything else: a job that was running when the
service stopped is watched again if its very process still runs, takes the
runner's final status if it finished meanwhile, and fails with a clear message
if its process is gone; queued jobs keep their places. A job is started only by
a conditional QUEUED → RUNNING update, so none runs twice.

Checkpoint and automatic resume: a job created with ``checkpoint`` (a folder relative to
the notebook's folder, and up to ``max_job_retries`` retries) that is killed from outside
goes back to QUEUED for its next attempt (same snapshot, same folder) instead of failing;
a job that failed by itself or was stopped is not retried, nor one that ran out of memory
unless its flavor sets ``oom_retry_memory`` (then its next attempts get that memory, once
the queue admits it again as any job). "Killed from
outside" means: its runner ended without writing a final status (a signal it could not
handle, or a process found gone after a restart of the job service, here in ``reconcile``),
or it reported STOPPED although no stop was asked of the service. The decision is
:func:`jupyter_to_job.retries.retry_reason`; the executor applies it when the attempt ends
(``LocalExecutor.on_complete``), so a job queued again is started by the queue as any other,
admitted again for its GPU share. The store keeps ``attempt``/``max_attempts`` and a short
history (``job_attempts``); the log keeps every attempt with a separator line.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from jupyter_core.paths import jupyter_data_dir
from traitlets import Float, Instance, Integer, Type, Unicode, default, validate
from traitlets.config import LoggingConfigurable

from gpuspawner.core.cgroups import ResourceLimits
from gpuspawner.core.grant import Grant
from gpuspawner.policy.admission import job_start_order

from .describe import describe_job, job_outputs
from .errors import (
    InvalidJobRequest,
    JobNotDeletable,
    JobNotFound,
    JobNotStoppable,
    JobQueueFull,
    JobRefused,
    OutputNotFound,
)
from .executors import JobExecutor, LocalExecutor, StopReason
from .executors.warm_pool import WarmRunnerPool
from .job_admission import JobAdmission, JobTicket, JobWaits
from .logs import LogStore, check_job_id
from .models import (
    CreateJob,
    CreateJobResponse,
    DescribeJob,
    JobErrorInfo,
    JobLogChunk,
    JobStatus,
    ListJobsQuery,
    ListJobsResponse,
)
from .notifications import JobNotifier
from .runfiles import JobFiles, RunnerSpec, write_model
from .snapshot import notebook_snapshot
from .store import ACTIVE, DuplicateToken, JobAttemptsRow, JobRow, JobStore, utcnow


@dataclass
class ReconcileReport:
    """What ``reconcile`` found after a restart (job ids)."""

    adopted: list[str] = field(default_factory=list)
    """Still running: watched again."""
    ended: list[str] = field(default_factory=list)
    """Running before, gone now: finished with the runner's result, or failed as lost."""
    requeued: list[str] = field(default_factory=list)
    """Caught half-created: queued now."""
    failed: list[str] = field(default_factory=list)
    """Caught half-created without their notebook: failed."""
    queued: int = 0


class JobManager(LoggingConfigurable):
    """Creates, queues, runs, stops and deletes jobs; one per store."""

    root_dir = Unicode(
        help="""Folder for job data: ``jobs/<id>/`` (notebook snapshot, outputs, status),
        ``logs/<id>.log`` and, by default, the SQLite database.

        Example: ``c.JobManager.root_dir = "/srv/jupyter-to-job"``.
        """,
    ).tag(config=True)

    @default("root_dir")
    def _default_root_dir(self) -> str:
        return os.path.join(jupyter_data_dir(), "jupyter_to_job")

    db_url = Unicode(
        help="""SQLAlchemy URL of the job store; SQLite and PostgreSQL are supported.

        Example: ``c.JobManager.db_url = "postgresql+psycopg://jobs@db/jobs"``.
        Defaults to ``sqlite:///<root_dir>/jobs.sqlite``.
        """,
    ).tag(config=True)

    @default("db_url")
    def _default_db_url(self) -> str:
        return f"sqlite:///{os.path.join(self.root_dir, 'jobs.sqlite')}"

    executor_class = Type(
        default_value=LocalExecutor,
        klass=JobExecutor,
        help="""Where jobs run: ``c.JobManager.executor_class =
        "jupyter_to_job.executors.LocalExecutor"`` (local processes, the default).""",
    ).tag(config=True)

    store_class = Type(
        default_value=JobStore,
        klass=JobStore,
        help="The job store: ``c.JobManager.store_class = 'jupyter_to_job.store.JobStore'``.",
    ).tag(config=True)

    log_store_class = Type(
        default_value=LogStore,
        klass=LogStore,
        help="The log store: ``c.JobManager.log_store_class = 'jupyter_to_job.logs.LogStore'``.",
    ).tag(config=True)

    max_running_jobs = Integer(
        4,
        help="""Jobs that may run at once (over all users, in the job service; in one
        server, standalone); later ones queue, the next free slot going to the person with
        the fewest running jobs (first in, first out among one's own).

        Example: ``c.JobManager.max_running_jobs = 8``. GPU capacity can hold jobs back
        further (see ``capacity``).
        """,
    ).tag(config=True)

    @validate("max_running_jobs")
    def _at_least_one(self, proposal: Any) -> int:
        if proposal["value"] < 1:
            raise ValueError("max_running_jobs must be at least 1")
        return int(proposal["value"])

    max_queued_jobs_per_user = Integer(
        10,
        help="""Queued jobs one person may have at a time; a job past it is refused with
        HTTP 429 and a sentence (running jobs do not count).

        Example: ``c.JobManager.max_queued_jobs_per_user = 20``. It keeps one person from
        filling the queue; fairness among people does the rest.
        """,
    ).tag(config=True)

    @validate("max_queued_jobs_per_user")
    def _queue_at_least_one(self, proposal: Any) -> int:
        if proposal["value"] < 1:
            raise ValueError("max_queued_jobs_per_user must be at least 1")
        return int(proposal["value"])

    queue_poll_interval = Float(
        5.0,
        help="""Seconds between retries of a queue waiting for GPU capacity (servers that
        stop free capacity without telling the manager): ``c.JobManager.queue_poll_interval
        = 10``.""",
    ).tag(config=True)

    max_notebook_bytes = Integer(
        64 * 1024 * 1024,
        help="The largest notebook a job takes: ``c.JobManager.max_notebook_bytes = 67108864``.",
    ).tag(config=True)

    kernel_startup_timeout = Integer(
        60,
        help="Seconds a job's kernel may take to start (large images are slow): ``= 300``.",
    ).tag(config=True)

    autosave_seconds = Float(
        30.0,
        help="Save a job's output notebook this often during a long cell (0: between cells only).",
    ).tag(config=True)

    max_log_bytes = Integer(
        256 * 1024 * 1024,
        help="Cell output kept in a job's log; the output notebook keeps everything.",
    ).tag(config=True)

    max_job_retries = Integer(
        3,
        help="""The most retries a job may ask for with its checkpoint (``CreateJob.checkpoint``):
        a job killed from outside (its runner killed, the machine or job service restarted)
        is started again from its checkpoint folder up to that many times; more is refused
        with a sentence. 0 turns automatic resume off.

        Example: ``c.JobManager.max_job_retries = 5``.
        """,
    ).tag(config=True)

    @validate("max_job_retries")
    def _retries_not_negative(self, proposal: Any) -> int:
        if proposal["value"] < 0:
            raise ValueError("max_job_retries cannot be negative")
        return int(proposal["value"])

    capacity = Instance(
        JobAdmission,
        help="""The capacity hook: may a job start now, and with which GPU environment.

        The job service sets a ``FlavorAdmission``, asking the same admission as the hub's
        spawners; the default lets every job start at once, as its host is.
        """,
    )

    @default("capacity")
    def _default_capacity(self) -> JobAdmission:
        return JobAdmission()

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        Path(self.root_dir).mkdir(parents=True, exist_ok=True)
        self.store: JobStore = self.store_class(self.db_url)
        self.log_store: LogStore = self.log_store_class(parent=self)
        if not self.log_store.root:
            self.log_store.root = os.path.join(self.root_dir, "logs")
        self.notifier = JobNotifier(parent=self, store=self.store, log_store=self.log_store)
        """Tells owners that their jobs ended (``c.JobNotifier``)."""
        self._executors: dict[str, JobExecutor] = {}
        self._tasks: dict[str, asyncio.Future[None]] = {}
        self._dispatch_lock = asyncio.Lock()
        self._queue_task: asyncio.Future[None] | None = None
        self._follow_ups: set[asyncio.Future[None]] = set()
        self._closing = False
        # When each owner's last job started (time.monotonic), for the fair order.
        self._last_started: dict[str, float] = {}
        self._end_listeners: list[Callable[[JobRow], None]] = []
        self.reconcile_report: ReconcileReport | None = None
        """What the last ``reconcile`` found."""
        self.warm_pool: WarmRunnerPool | None = None
        """Runners started ahead of their jobs (local jobs only; see ``prewarm``)."""
        if issubclass(self.executor_class, LocalExecutor):
            self.warm_pool = WarmRunnerPool(Path(self.root_dir) / "warm", log=self.log)

    # -- lifecycle of the manager -----------------------------------------------------------

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

    @property
    def closed(self) -> bool:
        """True once ``shutdown`` has begun."""
        return self._closing

    async def start(self) -> ReconcileReport:
        """Create the tables, reconcile with the processes out there, and start the queue."""
        self.store.create_tables()
        report = await self.reconcile()
        self._queue_task = asyncio.ensure_future(self._queue_loop())
        return report

    async def shutdown(self, *, stop_jobs: bool = False) -> None:
        """Stop managing. Running jobs keep running (the next ``start`` adopts them),
        unless ``stop_jobs``: then they are stopped and their results recorded."""
        self._closing = True
        if self._queue_task is not None:
            self._queue_task.cancel()
        if self.warm_pool is not None:
            await self.warm_pool.close()
        if stop_jobs:
            for executor in list(self._executors.values()):
                await executor.stop(StopReason.REQUEST)
            tasks = list(self._tasks.values())
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
        else:
            # The jobs run on without this manager: their processes hold what they hold.
            for job_id in list(self._executors):
                row = self.store.get(job_id)
                if row is not None and not row.job_status.is_final:
                    self._hand_over(row)
        for task in list(self._tasks.values()):
            task.cancel()
        self._executors.clear()
        self._tasks.clear()
        await self.notifier.drain()  # mails and webhooks under way (bounded by their timeouts)
        self.store.close()

    async def reconcile(self) -> ReconcileReport:
        """Bring the store in line with reality after a restart (see the module docstring)."""
        report = ReconcileReport()
        for row in self.store.with_status(JobStatus.CREATED):
            files = self.job_files(row.job_id)
            if files.spec.exists() and files.input_notebook.exists():
                if self.store.transition(
                    row.job_id, (JobStatus.CREATED,), JobStatus.QUEUED, queue_time=utcnow()
                ):
                    report.requeued.append(row.job_id)
            elif self.store.transition(
                row.job_id,
                (JobStatus.CREATED,),
                JobStatus.FAILED,
                status_message="The job service restarted while this job was being created; "
                "create it again.",
                end_time=utcnow(),
            ):
                report.failed.append(row.job_id)
        for row in self.store.with_status(*ACTIVE):
            if row.job_id in self._executors:
                continue
            ticket = JobTicket(row.job_id, row.owner, row.flavor)
            executor = self._make_executor(row, {})
            if await executor.still_running():
                self.capacity.restore(ticket, row.gpu)
                self._hand_over(row)
                self._watch(executor, executor.resume())
                report.adopted.append(row.job_id)
            else:
                await executor.resume()  # ends at once: the runner's result, or lost
                self.capacity.release(ticket)
                report.ended.append(row.job_id)
                self._ended(row.job_id)
        self.capacity.reconciled()
        report.queued = self.store.count(JobStatus.QUEUED)
        self.reconcile_report = report
        if any((report.adopted, report.ended, report.requeued, report.failed)):
            self.log.info(
                "Reconciled jobs: %d adopted, %d ended while the service was down, "
                "%d requeued, %d failed; %d queued",
                len(report.adopted),
                len(report.ended),
                len(report.requeued),
                len(report.failed),
                report.queued,
            )
        await self.dispatch()
        return report

    # -- create -----------------------------------------------------------------------------

    async def create(
        self,
        owner: str,
        request: CreateJob,
        *,
        notebook: dict[str, Any] | str | bytes | None = None,
        source_root: str | os.PathLike[str] | None = None,
        working_dir: str | os.PathLike[str] | None = None,
        pipeline_id: str | None = None,
        schedule_id: str | None = None,
        environment: dict[str, str] | None = None,
    ) -> CreateJobResponse:
        """Create and queue a job for ``owner``.

        The notebook is ``notebook`` (its content, as the server extension sends it)
        or else read from ``source_root/request.input_path``; either way it is copied
        into the job, so later edits do not change it. ``working_dir`` is the kernel's
        folder (default: a ``work`` folder of the job's own).

        ``pipeline_id`` / ``schedule_id``: the pipeline or schedule that makes the job (shown
        with it); ``environment``: variables its runner gets besides its GPU share (a
        pipeline's shared folder), kept with the job so a restart starts it the same way.

        A repeated ``idempotency_token`` returns the first job with ``created=False``.
        Raises :class:`InvalidJobRequest`, :class:`JobRefused` or :class:`JobQueueFull`.
        """
        if not owner or len(owner) > 255:
            raise InvalidJobRequest("A job needs an owner: the name of the user it runs for.")
        if request.idempotency_token is not None:
            existing = self.store.find_by_token(owner, request.idempotency_token)
            if existing is not None:
                return CreateJobResponse(
                    job_id=existing.job_id, created=False, job=self._describe(existing)
                )
        self._check_queue_room(owner)
        self._check_retries(request)
        job_id = str(uuid.uuid4())
        self.capacity.validate(JobTicket(job_id, owner, request.flavor))
        content = notebook_snapshot(
            request.input_path, notebook, source_root, max_bytes=self.max_notebook_bytes
        )
        now = utcnow()
        row = JobRow(
            job_id=job_id,
            owner=owner,
            name=request.name or PurePosixPath(request.input_path).stem,
            flavor=request.flavor,
            status=JobStatus.CREATED.value,
            input_path=request.input_path,
            parameters=request.parameters,
            output_formats=list(request.output_formats),
            kernel_name=request.kernel_name,
            deadline_seconds=request.deadline_seconds,
            cell_timeout_seconds=request.cell_timeout_seconds,
            idempotency_token=request.idempotency_token,
            create_time=now,
            cells_completed=0,
            pipeline_id=pipeline_id,
            schedule_id=schedule_id,
            environment=dict(environment) if environment else None,
            rerun_of=request.rerun_of,
        )
        try:
            self.store.add(row)
        except DuplicateToken as duplicate:  # the same token, created a moment ago
            return CreateJobResponse(
                job_id=duplicate.existing.job_id,
                created=False,
                job=self._describe(duplicate.existing),
            )
        if request.notify is not None:
            self.store.set_job_notify(job_id, request.notify.model_dump(mode="json"))
        files = self.job_files(job_id)
        if request.checkpoint is not None:
            base = Path(working_dir) if working_dir is not None else files.work
            self.store.set_job_checkpoint(
                job_id,
                request.checkpoint.folder,
                os.fspath(base.joinpath(*PurePosixPath(request.checkpoint.folder).parts)),
                max_attempts=1 + request.checkpoint.retries,
            )
        try:
            files.directory.mkdir(parents=True)
            files.input_notebook.write_bytes(content)
            write_model(
                files.spec,
                RunnerSpec(
                    job_id=job_id,
                    parameters=request.parameters,
                    kernel_name=request.kernel_name,
                    cell_timeout_seconds=request.cell_timeout_seconds,
                    output_formats=list(request.output_formats),
                    working_dir=os.fspath(working_dir) if working_dir is not None else None,
                    kernel_startup_timeout=self.kernel_startup_timeout,
                    autosave_seconds=self.autosave_seconds,
                    max_log_bytes=self.max_log_bytes,
                ),
            )
            self.log_store.create(job_id)
        except OSError as error:
            message = (
                f"The job's files could not be written ({error.strerror}); tell the hub admins."
            )
            self.store.transition(
                job_id, (JobStatus.CREATED,), JobStatus.FAILED, status_message=message
            )
            raise InvalidJobRequest(message) from None
        self.log_store.append_line(job_id, f"[job] created by {owner} from {request.input_path}")
        self.store.transition(job_id, (JobStatus.CREATED,), JobStatus.QUEUED, queue_time=utcnow())
        await self.dispatch()
        return CreateJobResponse(job_id=job_id, created=True, job=self.describe(job_id))

    def _check_retries(self, request: CreateJob) -> None:
        if request.checkpoint is None or request.checkpoint.retries <= self.max_job_retries:
            return
        if self.max_job_retries == 0:
            raise InvalidJobRequest(
                "Jobs are not started again automatically here; ask for 0 retries."
            )
        raise InvalidJobRequest(
            f"A job may be retried at most {self.max_job_retries} times here, not "
            f"{request.checkpoint.retries}; ask for fewer retries."
        )

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
        """The queued jobs in the order the dispatcher starts them (see the module docstring)."""
        rows = {row.job_id: row for row in queued}
        running = Counter(row.owner for row in active)
        order = job_start_order(
            [(row.job_id, row.owner) for row in queued], running, self._last_started
        )
        return [rows[job_id] for job_id in order]

    async def dispatch(self) -> None:
        """Start queued jobs in the fair order while slots and GPU capacity allow.

        A job waiting on its owner's own limit is passed over; a job waiting for shared
        capacity, or for a slot, holds back the jobs after it (see the module docstring).
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

    # -- read -------------------------------------------------------------------------------

    def job_files(self, job_id: str) -> JobFiles:
        return JobFiles(Path(self.root_dir) / "jobs" / check_job_id(job_id))

    def _get(self, job_id: str, owner: str | None) -> JobRow:
        try:
            check_job_id(job_id)
        except ValueError:
            raise JobNotFound(str(job_id)) from None
        row = self.store.get(job_id)
        if row is None or (owner is not None and row.owner != owner):
            raise JobNotFound(job_id)
        return row

    def describe(self, job_id: str, *, owner: str | None = None) -> DescribeJob:
        """The job ``job_id``; with ``owner``, only if it is theirs (else JobNotFound)."""
        return self._describe(self._get(job_id, owner))

    def list_jobs(
        self, query: ListJobsQuery, *, owners: Collection[str] | None = None
    ) -> ListJobsResponse:
        """A page of jobs; pass ``next_token`` from the answer to get the next page.

        ``owners``: only these users' jobs (None: everyone's, subject to ``query.owner``).
        """
        page = self.store.list(query, owners=owners)
        positions = self._queue_positions()
        attempts = self.store.jobs_attempts([row.job_id for row in page.rows])
        return ListJobsResponse(
            jobs=[self._describe(row, positions, attempts.get(row.job_id)) for row in page.rows],
            next_token=page.next_token,
            total_count=page.total_count,
        )

    def _queue_positions(self) -> dict[str, int]:
        """Each queued job's place in the order the dispatcher starts jobs in (from 1)."""
        queued = self.store.with_status(JobStatus.QUEUED)
        if not queued:
            return {}
        order = self._start_order(queued, self.store.with_status(*ACTIVE))
        return {row.job_id: position for position, row in enumerate(order, start=1)}

    def _describe(
        self,
        row: JobRow,
        positions: dict[str, int] | None = None,
        attempts: JobAttemptsRow | None = None,
    ) -> DescribeJob:
        if row.job_status is JobStatus.QUEUED and positions is None:
            positions = self._queue_positions()
        if attempts is None:
            attempts = self.store.job_attempts(row.job_id)
        return describe_job(
            row,
            self.job_files(row.job_id),
            log_size=self.log_store.size(row.job_id),
            queue_position=(positions or {}).get(row.job_id),
            attempts=attempts,
        )

    def output_path(self, job_id: str, fmt: str, *, owner: str | None = None) -> Path:
        """The file of output ``fmt`` (``ipynb`` or ``html``); raises OutputNotFound."""
        row = self._get(job_id, owner)
        for output, path in job_outputs(row, self.job_files(job_id)):
            if output.format == fmt:
                return path
        raise OutputNotFound(
            f"The job {row.name!r} has no {fmt} output"
            + (" yet." if not row.job_status.is_final else ".")
        )

    async def wait(self, job_id: str, *, poll_interval: float = 0.1) -> DescribeJob:
        """Wait until the job is final (callers bound it with ``asyncio.wait_for``)."""
        while True:
            job = self.describe(job_id)
            if job.status.is_final:
                return job
            await asyncio.sleep(poll_interval)

    # -- stop and delete --------------------------------------------------------------------

    async def stop(self, job_id: str, *, owner: str | None = None) -> DescribeJob:
        """Stop a job: a queued one at once; a running one after its current cell.

        Returns the job as it is now (STOPPING while the runner wraps up). Raises
        :class:`JobNotStoppable` for a job that has already finished.
        """
        row = self._get(job_id, owner)
        if row.job_status in (JobStatus.CREATED, JobStatus.QUEUED):
            if self.store.transition(
                job_id,
                (JobStatus.CREATED, JobStatus.QUEUED),
                JobStatus.STOPPED,
                status_message="Stopped before it started.",
                end_time=utcnow(),
            ):
                self.log_store.append_line(job_id, "[job] stopped before it started")
                self._ended(job_id)
                await self.dispatch()
                return self.describe(job_id)
            row = self._get(job_id, owner)  # it started meanwhile
        if row.job_status is JobStatus.RUNNING:
            self.store.transition(
                job_id,
                (JobStatus.RUNNING,),
                JobStatus.STOPPING,
                status_message="Stopping: the running cell is interrupted, then the job ends.",
            )
            self.log_store.append_line(job_id, "[job] stop requested")
            executor = self._executors.get(job_id)
            if executor is not None:
                await executor.stop(StopReason.REQUEST)
            return self.describe(job_id)
        if row.job_status is JobStatus.STOPPING:
            return self._describe(row)
        raise JobNotStoppable(
            f"The job {row.name!r} has already finished ({row.job_status.value.lower()}); "
            "there is nothing to stop."
        )

    async def delete(self, job_id: str, *, owner: str | None = None) -> None:
        """Delete a finished job with its files and log; raises JobNotDeletable otherwise."""
        row = self._get(job_id, owner)
        if not row.job_status.is_final:
            raise JobNotDeletable(
                f"The job {row.name!r} is still {row.job_status.value.lower()}; "
                "stop it first, then delete it."
            )
        self.store.delete(job_id)
        shutil.rmtree(self.job_files(job_id).directory, ignore_errors=True)
        self.log_store.delete(job_id)

    # -- logs -------------------------------------------------------------------------------

    def read_log(
        self, job_id: str, *, offset: int = 0, limit: int | None = None, owner: str | None = None
    ) -> JobLogChunk:
        """Bytes ``offset`` onwards of the job's log (at most ``limit``)."""
        row = self._get(job_id, owner)
        if offset < 0:
            raise InvalidJobRequest("A log offset cannot be negative.")
        final = row.job_status.is_final
        piece = self.log_store.read(job_id, offset, limit)
        return self._chunk(job_id, piece, final)

    def tail_log(self, job_id: str, *, lines: int = 100, owner: str | None = None) -> JobLogChunk:
        """The last ``lines`` lines of the job's log."""
        row = self._get(job_id, owner)
        final = row.job_status.is_final
        return self._chunk(job_id, self.log_store.tail(job_id, lines), final)

    async def follow_log(
        self, job_id: str, *, offset: int = 0, owner: str | None = None
    ) -> AsyncIterator[JobLogChunk]:
        """Log data from ``offset`` as it is written, until the job is final and all read.

        The last chunk always has ``complete=True`` (with empty ``data`` when the job
        became final after its last output), so a follower knows it missed nothing.
        """
        self._get(job_id, owner)

        def is_final() -> bool:
            row = self.store.get(job_id)
            return row is None or row.job_status.is_final

        last = None
        async for piece in self.log_store.follow(job_id, offset, is_final=is_final):
            last = self._chunk(job_id, piece, is_final())
            yield last
        if last is None or not last.complete:
            end = last.next_offset if last is not None else offset
            size = self.log_store.size(job_id)
            yield JobLogChunk(
                job_id=job_id, offset=end, next_offset=end, size=size, data="", complete=True
            )

    @staticmethod
    def _chunk(job_id: str, piece: Any, final: bool) -> JobLogChunk:
        return JobLogChunk(
            job_id=job_id,
            offset=piece.offset,
            next_offset=piece.next_offset,
            size=piece.size,
            data=piece.data,
            complete=final and piece.next_offset >= piece.size,
        )
