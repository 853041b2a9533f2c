"""The job manager: create, queue, run, stop, delete and reconcile jobs.

One manager owns one store and one folder of job data; the job service and the server
extension (standalone mode) sit on top of it. Its settings are in ``manager_settings``, its
queue in ``job_queue``; docs/jobs-manager.md tells the lifecycle, the fair order, the
reconciliation after a restart and the automatic resume.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from .describe import describe_job, job_outputs
from .errors import (
    InvalidJobRequest,
    JobNotDeletable,
    JobNotFound,
    JobNotStoppable,
    OutputNotFound,
)
from .executors import LocalExecutor, StopReason
from .executors.warm_pool import WarmRunnerPool
from .job_admission import JobTicket
from .job_queue import JobQueue
from .logs import LogStore, check_job_id
from .models import (
    CreateJob,
    CreateJobResponse,
    DescribeJob,
    JobLogChunk,
    JobStatus,
    ListJobsQuery,
    ListJobsResponse,
)
from .notifications import JobNotifier
from .runfiles import RunnerSpec, write_model
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


class JobManager(JobQueue):
    """Creates, queues, runs, stops and deletes jobs; one per store."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        Path(self.root_dir).mkdir(parents=True, exist_ok=True)
        self.store: JobStore = self.store_class(self.db_url)
        self.log_store: LogStore = self.log_store_class(parent=self)
        if not self.log_store.root:
            self.log_store.root = os.path.join(self.root_dir, "logs")
        self.notifier = JobNotifier(parent=self, store=self.store, log_store=self.log_store)
        """Tells owners that their jobs ended (``c.JobNotifier``)."""
        self.reconcile_report: ReconcileReport | None = None
        """What the last ``reconcile`` found."""
        self.warm_pool: WarmRunnerPool | None = None
        """Runners started ahead of their jobs (local jobs only; see ``prewarm``)."""
        if issubclass(self.executor_class, LocalExecutor):
            self.warm_pool = WarmRunnerPool(Path(self.root_dir) / "warm", log=self.log)

    # -- lifecycle of the manager -----------------------------------------------------------

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
        """Bring the store in line with reality after a restart (docs/jobs-manager.md)."""
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

    # -- read -------------------------------------------------------------------------------

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
