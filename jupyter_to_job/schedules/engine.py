"""The scheduler: :class:`Scheduler` keeps schedules and, one round at a time, submits each
due slot's job or pipeline through the job manager (how and why: docs/jobs-schedules.md)."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any

from sqlalchemy.exc import IntegrityError
from traitlets import Float, Instance
from traitlets.config import LoggingConfigurable

from ..errors import InvalidJobRequest, JobError, JobRefused
from ..manager import JobManager
from ..models import CreateJob, JobStatus
from ..pipelines import Pipelines
from ..snapshot import notebook_snapshot
from ..store import utcnow
from .describe import describe_schedule
from .models import CreateSchedule, Schedule, ScheduleStatus
from .slots import latest_due_slot, next_slot
from .store import ScheduleRow, ScheduleRunRow, ScheduleStore, SlotTaken

Clock = Callable[[], datetime]


class Scheduler(LoggingConfigurable):
    """Keeps schedules and runs their jobs through the job manager (docs/jobs-schedules.md)."""

    tick_seconds = Float(
        15.0,
        help="""Seconds between two rounds of the scheduler (a run starts at most this late).

        Example: ``c.Scheduler.tick_seconds = 15``.
        """,
    ).tag(config=True)

    manager = Instance(JobManager)

    def __init__(
        self,
        *,
        manager: JobManager,
        clock: Clock | None = None,
        pipelines: Pipelines | None = None,
        **kwargs: Any,
    ):
        super().__init__(manager=manager, **kwargs)
        self.clock: Clock = clock or utcnow
        self.pipelines = pipelines
        """Where pipeline schedules start their runs (None: pipeline schedules are refused)."""
        self.store = ScheduleStore(manager.store.engine)
        self._task: asyncio.Future[None] | None = None
        self._lock = asyncio.Lock()
        self.folder = Path(manager.root_dir) / "schedules"

    # -- lifecycle ------------------------------------------------------------------------

    def create_tables(self) -> None:
        self.store.create_tables(ScheduleRunRow.__table__)  # type: ignore[arg-type]

    def start(self) -> None:
        """Create the tables and start the loop (one round every ``tick_seconds``)."""
        self.create_tables()
        self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:  # a database hiccup must not end the schedules for good
                self.log.exception("The scheduler's round failed; the next round tries again")
            await asyncio.sleep(self.tick_seconds)

    # -- schedules ------------------------------------------------------------------------

    def _notebook_path(self, schedule_id: str) -> Path:
        return self.folder / f"{schedule_id}.ipynb"

    def _notebooks_path(self, schedule_id: str) -> Path:
        """A pipeline schedule's notebooks: a JSON object by ``input_path``."""
        return self.folder / f"{schedule_id}.notebooks.json"

    def create(
        self,
        owner: str,
        request: CreateSchedule,
        *,
        notebook: dict[str, Any] | str | bytes | None = None,
        notebooks: Mapping[str, dict[str, Any] | str | bytes] | None = None,
        source_root: str | os.PathLike[str] | None = None,
        working_dir: str | os.PathLike[str] | None = None,
    ) -> Schedule:
        """Save a schedule for ``owner`` with a snapshot of its notebook (``notebook``, or
        the file ``source_root/request.job.input_path``); a pipeline schedule with a
        snapshot of each of its notebooks (``notebooks`` by input path, or read from
        ``source_root``), its jobs running beside their notebooks under ``working_dir`` (the
        owner's root folder)."""
        if request.pipeline is not None and self.pipelines is None:
            raise InvalidJobRequest("This job service runs no pipelines, so none can be scheduled.")
        now = self.clock()
        schedule_id = str(uuid.uuid4())
        self.folder.mkdir(parents=True, exist_ok=True)
        if request.job is not None:
            content = notebook_snapshot(
                request.job.input_path,
                notebook,
                source_root,
                max_bytes=self.manager.max_notebook_bytes,
            )
            self._notebook_path(schedule_id).write_bytes(content)
        else:
            assert request.pipeline is not None
            snapshots = {
                job.input_path: notebook_snapshot(
                    job.input_path,
                    (notebooks or {}).get(job.input_path),
                    source_root,
                    max_bytes=self.manager.max_notebook_bytes,
                ).decode()
                for stage in request.pipeline.stages
                for job in stage.jobs
            }
            self._notebooks_path(schedule_id).write_text(json.dumps(snapshots))
        anchor = request.start_time or now
        row = ScheduleRow(
            schedule_id=schedule_id,
            owner=owner,
            status=ScheduleStatus.ACTIVE.value,
            spec=request.model_dump(mode="json"),
            working_dir=os.fspath(working_dir) if working_dir is not None else None,
            runs=0,
            failures_in_a_row=0,
            next_slot_time=next_slot(request, now - timedelta(microseconds=1), anchor),
            create_time=now,
            update_time=now,
        )
        if row.next_slot_time is None:
            row.status = ScheduleStatus.ENDED.value
            row.status_message = "This schedule has no time left to run: its end date is past."
        self.store.add(row)
        return self.describe(schedule_id)

    def _model(self, row: ScheduleRow) -> Schedule:
        return describe_schedule(row, self.store.recent_runs(row.schedule_id))

    def describe(self, schedule_id: str, *, owner: str | None = None) -> Schedule:
        return self._model(self.store.get(schedule_id, owner))

    def list_schedules(self, owner: str) -> list[Schedule]:
        return [self._model(row) for row in self.store.of_owner(owner)]

    def runs_of(self, schedule_id: str) -> list[ScheduleRunRow]:
        """The slots handled, oldest first, each with its job."""
        return self.store.runs(schedule_id)

    def schedule_of(self, job_id: str) -> str | None:
        """The schedule whose run created the job ``job_id``; None for a one-off job."""
        return self.store.schedule_of(job_id)

    def set_status(
        self, schedule_id: str, status: ScheduleStatus, *, owner: str | None = None
    ) -> Schedule:
        """Pause or resume. A resumed schedule goes on from its next slot after now."""
        row = self.store.get(schedule_id, owner)
        if row.status == ScheduleStatus.ENDED.value:
            raise InvalidJobRequest(
                f"This schedule has ended ({row.status_message}) and cannot be paused or "
                "resumed; create a new one."
            )
        now = self.clock()
        values: dict[str, Any] = {"status": status.value, "update_time": now}
        if status is ScheduleStatus.PAUSED:
            values["status_message"] = "Paused by its owner; resume it to run again."
        elif row.status == ScheduleStatus.PAUSED.value:
            spec = CreateSchedule.model_validate(row.spec)
            values["status_message"] = None
            values["next_slot_time"] = next_slot(
                spec, now - timedelta(microseconds=1), self._anchor(row, spec)
            )
        self.store.update(schedule_id, **values)
        if values.get("next_slot_time", row.next_slot_time) is None:
            self._end(schedule_id, "This schedule has no time left to run: its end date is past.")
        return self.describe(schedule_id)

    def delete(self, schedule_id: str, *, owner: str | None = None) -> None:
        """Delete the schedule; the jobs it started stay (and keep running)."""
        self.store.get(schedule_id, owner)
        self.store.delete(schedule_id)
        self._notebook_path(schedule_id).unlink(missing_ok=True)
        self._notebooks_path(schedule_id).unlink(missing_ok=True)

    def _end(self, schedule_id: str, message: str) -> None:
        self.store.update(
            schedule_id,
            status=ScheduleStatus.ENDED.value,
            status_message=message,
            next_slot_time=None,
            update_time=self.clock(),
        )
        self.log.info("Schedule %s ended: %s", schedule_id, message)

    @staticmethod
    def _anchor(row: ScheduleRow, spec: CreateSchedule) -> datetime:
        return spec.start_time or row.create_time

    # -- one round ------------------------------------------------------------------------

    async def tick(self, now: datetime | None = None) -> None:
        """One round: record how earlier runs ended, then submit each due slot."""
        async with self._lock:
            now = now or self.clock()
            for row in self.store.unfinished():
                try:
                    await self._round(row, now)
                except Exception:
                    self.log.exception("Schedule %s: this round failed", row.schedule_id)
            # An ended schedule's last runs: their outcomes are still recorded.
            for row in self.store.ended_with_open_runs():
                try:
                    self._settle(row, CreateSchedule.model_validate(row.spec))
                except Exception:
                    self.log.exception(
                        "Schedule %s: its runs could not be settled", row.schedule_id
                    )

    def _settle(self, row: ScheduleRow, spec: CreateSchedule) -> bool:
        """Record the outcome of runs whose jobs have ended; False when that ends it (an
        ended schedule only gets its outcomes recorded)."""
        over = row.status == ScheduleStatus.ENDED.value
        pending = self.store.open_runs(row.schedule_id)
        failures = row.failures_in_a_row
        for run in pending:
            job = self.manager.store.get(run.job_id) if run.job_id else None
            message: str | None
            if spec.pipeline is not None:
                settled = self._pipeline_outcome(run)
                if settled is None:
                    continue
                outcome, message, refusal = settled
                self.store.record_outcome(run.id, outcome, message)
                if refusal is not None and not over:
                    self.store.update(row.schedule_id, failures_in_a_row=failures + 1)
                    self._end(row.schedule_id, self._refused_sentence(refusal))
                    return False
                if outcome == JobStatus.COMPLETED.value:
                    failures = 0
                elif outcome == JobStatus.FAILED.value:
                    failures += 1
                continue
            if run.job_id is None:
                outcome = JobStatus.STOPPED.value
                message = "The job service stopped before this run's job was created."
            elif job is None:
                outcome, message = JobStatus.STOPPED.value, "Its job was deleted."
            elif not job.job_status.is_final:
                continue
            else:
                outcome, message = job.status, job.status_message
            self.store.record_outcome(run.id, outcome, message)
            if (
                job is not None
                and job.error
                and job.error.get("ename") == "JobRefused"
                and not over
            ):
                self.store.update(row.schedule_id, failures_in_a_row=failures + 1)
                self._end(row.schedule_id, self._refused_sentence(job.error.get("evalue", "")))
                return False
            if outcome == JobStatus.COMPLETED.value:
                failures = 0
            elif outcome == JobStatus.FAILED.value:
                failures += 1
        if failures != row.failures_in_a_row:
            self.store.update(row.schedule_id, failures_in_a_row=failures)
            row.failures_in_a_row = failures
        limit = spec.max_failures_in_a_row
        if limit is not None and failures >= limit and not over:
            runs = "run" if limit == 1 else "runs"
            self._end(
                row.schedule_id,
                f"Its last {failures} {runs} failed in a row, and it allows {limit}; read the "
                "failed jobs' logs, fix the notebook, and create the schedule again.",
            )
            return False
        return True

    def _pipeline_outcome(self, run: ScheduleRunRow) -> tuple[str, str | None, str | None] | None:
        """How a pipeline run ended: (outcome, message, refusal); None while it runs."""
        if run.pipeline_id is None:
            return (
                JobStatus.STOPPED.value,
                "The job service stopped before this run's pipeline was created.",
                None,
            )
        assert self.pipelines is not None
        try:
            pipeline = self.pipelines.describe(run.pipeline_id)
        except JobError:
            return JobStatus.STOPPED.value, "Its pipeline was deleted.", None
        if not pipeline.status.is_final:
            return None
        return (
            pipeline.status.value,
            pipeline.status_message,
            self.pipelines.refusal(run.pipeline_id),
        )

    @staticmethod
    def _refused_sentence(reason: str) -> str:
        return f"A run was refused, so the schedule stopped: {reason}"

    async def _round(self, row: ScheduleRow, now: datetime) -> None:
        spec = CreateSchedule.model_validate(row.spec)
        if not self._settle(row, spec):
            return
        if row.status != ScheduleStatus.ACTIVE.value:
            return
        if row.next_slot_time is None or row.next_slot_time > now:
            return
        anchor = self._anchor(row, spec)
        slot = latest_due_slot(spec, row.next_slot_time, now, anchor)
        following = next_slot(spec, max(slot, now), anchor)
        try:
            self.store.claim(row, slot, following, now)
        except (SlotTaken, IntegrityError):  # this slot was handled already: roll back
            return
        await self._submit(row, spec, slot)
        runs = row.runs + 1
        current = self.store.get(row.schedule_id, None)
        if current.status == ScheduleStatus.ENDED.value:
            return
        if spec.max_runs is not None and runs >= spec.max_runs:
            self._end(
                row.schedule_id,
                f"It ran {runs} {'time' if runs == 1 else 'times'}, as many as it was set to.",
            )
        elif following is None:
            self._end(row.schedule_id, "It reached its end date.")

    async def _submit(self, row: ScheduleRow, spec: CreateSchedule, slot: datetime) -> None:
        if spec.pipeline is not None:
            await self._submit_pipeline(row, spec, slot)
            return
        assert spec.job is not None
        request = spec.job.model_copy(
            update={
                "name": spec.job.name or spec.name,
                "idempotency_token": f"schedule:{row.schedule_id}:{slot.isoformat()}",
            }
        )
        job_id: str | None = None
        outcome: str | None = None
        message: str | None = None
        try:
            created = await self.manager.create(
                row.owner,
                request,
                notebook=self._notebook_path(row.schedule_id).read_bytes(),
                working_dir=row.working_dir,
                schedule_id=row.schedule_id,
            )
            job_id = created.job_id
        except JobRefused as refusal:
            outcome, message = JobStatus.FAILED.value, refusal.message
            self._record_run(row.schedule_id, slot, job_id, outcome, message)
            self._end(row.schedule_id, self._refused_sentence(refusal.message))
            return
        except (JobError, OSError) as error:
            outcome = JobStatus.FAILED.value
            message = getattr(error, "message", None) or str(error)
            self.log.warning(
                "Schedule %s: the run of %s failed: %s", row.schedule_id, slot, message
            )
        self._record_run(row.schedule_id, slot, job_id, outcome, message)
        if outcome == JobStatus.FAILED.value:
            self.store.update(row.schedule_id, failures_in_a_row=ScheduleRow.failures_in_a_row + 1)
        else:
            # A refusal at dispatch fails the job at once: end the schedule in this round.
            self._settle(self.store.get(row.schedule_id, None), spec)

    async def _submit_pipeline(
        self, row: ScheduleRow, spec: CreateSchedule, slot: datetime
    ) -> None:
        """Start the slot's pipeline; its jobs are admitted as each stage starts."""
        assert spec.pipeline is not None and self.pipelines is not None
        root = row.working_dir

        def beside(job: CreateJob, stage: int, index: int) -> tuple[CreateJob, str | None]:
            if not root:
                return job, None
            return job, os.path.join(root, *PurePosixPath(job.input_path).parent.parts)

        pipeline_id: str | None = None
        outcome: str | None = None
        message: str | None = None
        try:
            notebooks = json.loads(self._notebooks_path(row.schedule_id).read_text())
            created = await self.pipelines.create(
                row.owner,
                spec.pipeline,
                notebooks=notebooks,
                admit=beside,
                schedule_id=row.schedule_id,
            )
            pipeline_id = created.pipeline_id
        except JobRefused as refusal:
            self._record_run(row.schedule_id, slot, None, JobStatus.FAILED.value, refusal.message)
            self._end(row.schedule_id, self._refused_sentence(refusal.message))
            return
        except (JobError, OSError, ValueError) as error:
            outcome = JobStatus.FAILED.value
            message = getattr(error, "message", None) or str(error)
            self.log.warning(
                "Schedule %s: the run of %s failed: %s", row.schedule_id, slot, message
            )
        self.store.record_run(
            row.schedule_id, slot, pipeline_id=pipeline_id, outcome=outcome, message=message
        )
        if outcome == JobStatus.FAILED.value:
            self.store.update(row.schedule_id, failures_in_a_row=ScheduleRow.failures_in_a_row + 1)
        else:
            # A refusal as the first stage starts ends the schedule in this round.
            self._settle(self.store.get(row.schedule_id, None), spec)

    def _record_run(
        self,
        schedule_id: str,
        slot: datetime,
        job_id: str | None,
        outcome: str | None,
        message: str | None,
    ) -> None:
        self.store.record_run(schedule_id, slot, job_id=job_id, outcome=outcome, message=message)
