"""Schedules: a notebook job run again and again, on a cron expression or an interval.

A schedule keeps the job's request (:class:`~jupyter_to_job.models.CreateJob`) and a
snapshot of its notebook, taken when the schedule is created (later edits of the notebook
do not change the runs, as for a one-off job). Its *slots* are the times the cron
expression or the interval gives, in the schedule's time zone, kept only when they fall
inside the daily window (from ``window.start`` up to, not including, ``window.end``).

The :class:`Scheduler` does one round at a time (:meth:`Scheduler.tick`): for each active
schedule whose next slot is due it submits one job through
:meth:`JobManager.create <jupyter_to_job.manager.JobManager.create>`, so every run is
admitted by the manager's capacity hook against the owner's entitlements *at the time it
runs*. A run refused outright (not a wait: the owner's grant expired, the flavor is no
longer theirs) ends the schedule, with the refusal's sentence as its status.

Never twice, never lost: each slot handled is a row of ``schedule_runs`` whose
``(schedule_id, slot_time)`` is unique in the database, written *before* the job is
submitted; the schedule row records the last slot handled and the next one due. Two
schedulers on one database, or a restart in the middle of a round, therefore run a slot
at most once. A restarted service (a new Scheduler over the same database) runs, at its
first round, the slots that fell due while it was down: **at most one, the latest one
missed** (a day-long outage of an every-minute schedule starts one job, not 1,440);
the earlier missed slots are skipped, and the schedule goes on from the next slot after
now. Slots that fell due while a schedule was paused are not run when it resumes.

Stop conditions end a schedule (status ``ENDED``, with a sentence): its end date passed,
its number of runs reached, or as many failed runs in a row as it allows. A run counts
as failed when its job ends ``FAILED`` (or could not be created); a job stopped by its
owner is neither a success nor a failure.

A schedule may run a pipeline instead of a job (``pipeline``, a
:class:`~jupyter_to_job.pipelines.CreatePipeline`, with a snapshot of each of its
notebooks): each slot starts one pipeline through :class:`~jupyter_to_job.pipelines.Pipelines`
(its jobs admitted as each stage starts), the run row names the pipeline, and the run's
outcome is the pipeline's (a job refused outright ends the schedule, as for a job run).

All times come from the scheduler's ``clock``, so tests move time by hand.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, time, timedelta
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from pydantic import Field, field_validator, model_validator
from sqlalchemy import JSON, Integer, String, Table, Text, UniqueConstraint, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column, sessionmaker
from traitlets import Float, Instance
from traitlets.config import LoggingConfigurable

from gpuspawner.core.databases import UTCDateTime

from .errors import InvalidJobRequest, JobError, JobRefused
from .manager import JobManager
from .models import CreateJob, JobStatus, WireModel
from .pipelines import CreatePipeline, Pipelines
from .snapshot import notebook_snapshot
from .store import Base, add_missing_columns, utcnow

MIN_INTERVAL_SECONDS = 60
"""The shortest interval between runs: a schedule is for work that takes minutes."""
MAX_SLOT_SEARCH = 100_000
"""How many candidate times the scheduler looks through for the next slot in the window."""
MAX_NAME_LENGTH = 255
RECENT_RUNS = 10

Clock = Callable[[], datetime]


# -- wire models --------------------------------------------------------------------------


class ScheduleStatus(StrEnum):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    ENDED = "ENDED"


class ScheduleWindow(WireModel):
    """Run only between these times of day, in the schedule's time zone."""

    start: time = Field(description="The first time of day a run may start: '10:00'.")
    end: time = Field(description="Runs start before this time of day: '18:00'.")

    @model_validator(mode="after")
    def _end_after_start(self) -> ScheduleWindow:
        if self.end <= self.start:
            raise ValueError(
                f"the window ends ({self.end:%H:%M}) before it starts ({self.start:%H:%M}); "
                "give an end later in the day than the start"
            )
        return self

    def holds(self, moment: time) -> bool:
        return self.start <= moment < self.end


class CreateSchedule(WireModel):
    """A notebook job, or a pipeline, to run on a cron expression or every
    ``interval_seconds``; exactly one of ``job`` and ``pipeline``."""

    job: CreateJob | None = Field(
        default=None, description="The job each run creates, as for a one-off job."
    )
    pipeline: CreatePipeline | None = Field(
        default=None, description="The pipeline each run starts (instead of a job)."
    )
    name: str | None = Field(
        default=None,
        max_length=MAX_NAME_LENGTH,
        description="A name for the schedule list; defaults to the job's name or notebook, "
        "or the pipeline's name.",
    )
    cron: str | None = Field(
        default=None, description="Five cron fields, in the time zone: '0 9 * * 1-5'."
    )
    interval_seconds: int | None = Field(
        default=None, description=f"Seconds between runs, at least {MIN_INTERVAL_SECONDS}."
    )
    timezone: str = Field(default="UTC", description="An IANA time zone: 'Asia/Taipei'.")
    window: ScheduleWindow | None = Field(
        default=None, description="Run only within this daily window; None: at any time."
    )
    start_time: datetime | None = Field(
        default=None,
        description="No run before this time; an interval counts from it (default: creation).",
    )
    end_time: datetime | None = Field(
        default=None, description="The end date: no run after it, and the schedule ends."
    )
    max_runs: int | None = Field(default=None, ge=1, description="End after this many runs.")
    max_failures_in_a_row: int | None = Field(
        default=None, ge=1, description="End after this many failed runs in a row."
    )

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = " ".join(value.split())
        if len(value.split(" ")) != 5 or not croniter.is_valid(value):
            raise ValueError(
                f"{value[:80]!r} is not a cron expression; give five fields (minute hour "
                "day-of-month month day-of-week), such as '*/15 9-17 * * 1-5'"
            )
        return value

    @field_validator("interval_seconds")
    @classmethod
    def _long_enough(cls, value: int | None) -> int | None:
        if value is not None and value < MIN_INTERVAL_SECONDS:
            raise ValueError(
                f"an interval of {value} seconds is too short; runs are at least "
                f"{MIN_INTERVAL_SECONDS} seconds apart"
            )
        return value

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"{value[:80]!r} is not a time zone; use an IANA name such as 'Europe/Paris' "
                "or 'UTC'"
            ) from None
        return value

    @field_validator("start_time", "end_time")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("give the time with its offset, such as '2026-12-01T09:00:00+08:00'")
        return value

    @model_validator(mode="after")
    def _one_rhythm(self) -> CreateSchedule:
        if (self.job is None) == (self.pipeline is None):
            raise ValueError("give either a job or a pipeline to run, not both")
        if (self.cron is None) == (self.interval_seconds is None):
            raise ValueError("give either a cron expression (cron) or an interval, not both")
        if self.start_time and self.end_time and self.end_time <= self.start_time:
            raise ValueError("the end date is before the start; give a later end_time")
        return self

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


class ScheduleRun(WireModel):
    """One slot handled, and the job it created."""

    slot_time: datetime
    job_id: str | None = Field(default=None, description="None: no job could be created.")
    pipeline_id: str | None = Field(
        default=None, description="The pipeline a pipeline schedule's run started."
    )
    outcome: JobStatus | None = Field(default=None, description="None while its job runs.")
    message: str | None = None


class Schedule(CreateSchedule):
    """A schedule as its owner sees it."""

    schedule_id: str
    owner: str
    pipeline_name: str | None = Field(default=None, description="The pipeline it runs, if any.")
    flavor_title: str | None = Field(
        default=None,
        description="Its job's flavor title, for people; None: a pipeline or no such flavor.",
    )
    status: ScheduleStatus
    status_message: str | None = Field(
        default=None, description="Why it is paused or ended, in a sentence."
    )
    runs: int = Field(default=0, description="Runs submitted so far.")
    failures_in_a_row: int = 0
    last_slot_time: datetime | None = Field(default=None, description="The last slot handled.")
    next_run_time: datetime | None = Field(default=None, description="The next slot; None: none.")
    last_job_id: str | None = None
    recent_runs: list[ScheduleRun] = Field(
        default_factory=list, description=f"The last {RECENT_RUNS} runs, newest first."
    )
    create_time: datetime
    update_time: datetime


class UpdateSchedule(WireModel):
    """PATCH: ``{"status": "PAUSED"}`` pauses, ``{"status": "ACTIVE"}`` resumes."""

    status: ScheduleStatus

    @field_validator("status")
    @classmethod
    def _pause_or_resume(cls, value: ScheduleStatus) -> ScheduleStatus:
        if value is ScheduleStatus.ENDED:
            raise ValueError(
                "a schedule can be paused (PAUSED) or resumed (ACTIVE); delete it to end it"
            )
        return value


class ListSchedulesResponse(WireModel):
    schedules: list[Schedule]


class _SlotTaken(Exception):
    """Another round handled this slot first."""


class ScheduleNotFound(JobError):
    status = 404
    code = "not-found"

    def __init__(self, schedule_id: str):
        super().__init__(
            f"There is no schedule {schedule_id[:64]!r}. It may have been deleted; reload the "
            "schedule list."
        )


# -- the tables (in the job store's database) ----------------------------------------------


class ScheduleRow(Base):
    """One schedule: its request (``spec``, a CreateSchedule) and where it stands."""

    __tablename__ = "schedules"

    schedule_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(255), index=True)
    status: Mapped[str] = mapped_column(String(16), index=True)
    status_message: Mapped[str | None] = mapped_column(Text)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    working_dir: Mapped[str | None] = mapped_column(Text)
    runs: Mapped[int] = mapped_column(Integer, default=0)
    failures_in_a_row: Mapped[int] = mapped_column(Integer, default=0)
    last_slot_time: Mapped[datetime | None] = mapped_column(UTCDateTime)
    next_slot_time: Mapped[datetime | None] = mapped_column(UTCDateTime, index=True)
    create_time: Mapped[datetime] = mapped_column(UTCDateTime)
    update_time: Mapped[datetime] = mapped_column(UTCDateTime)


class ScheduleRunRow(Base):
    """One slot handled: its time is the run's key, unique per schedule."""

    __tablename__ = "schedule_runs"
    __table_args__ = (UniqueConstraint("schedule_id", "slot_time", name="uq_schedule_slot"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    schedule_id: Mapped[str] = mapped_column(String(64), index=True)
    slot_time: Mapped[datetime] = mapped_column(UTCDateTime)
    job_id: Mapped[str | None] = mapped_column(String(64), index=True)
    pipeline_id: Mapped[str | None] = mapped_column(String(64))
    """The pipeline of a pipeline schedule's run (its job_id stays None)."""
    outcome: Mapped[str | None] = mapped_column(String(16))
    """None while its job runs; then COMPLETED, FAILED or STOPPED."""
    message: Mapped[str | None] = mapped_column(Text)


TABLES: list[Table] = [ScheduleRow.__table__, ScheduleRunRow.__table__]  # type: ignore[list-item]


# -- slots --------------------------------------------------------------------------------


def _candidates(spec: CreateSchedule, after: datetime, anchor: datetime) -> Iterator[datetime]:
    """The rhythm's times strictly after ``after`` (aware, UTC), window not applied."""
    if spec.cron is not None:
        times = croniter(spec.cron, after.astimezone(spec.zone))
        while True:
            yield times.get_next(datetime).astimezone(UTC)
    else:
        assert spec.interval_seconds is not None
        step = timedelta(seconds=spec.interval_seconds)
        steps = max(0, (after - anchor) // step + 1) if after >= anchor else 0
        moment = anchor + steps * step
        while True:
            if moment > after:
                yield moment
            moment += step


def next_slot(spec: CreateSchedule, after: datetime, anchor: datetime) -> datetime | None:
    """The first slot strictly after ``after``, inside the window and before the end date;
    None when there is none."""
    if spec.start_time is not None and after < spec.start_time:
        after = spec.start_time - timedelta(microseconds=1)
    for count, moment in enumerate(_candidates(spec, after, anchor)):
        if spec.end_time is not None and moment > spec.end_time:
            return None
        if spec.window is None or spec.window.holds(moment.astimezone(spec.zone).time()):
            return moment
        if count >= MAX_SLOT_SEARCH:
            return None
    return None  # pragma: no cover: the candidates never end


def latest_due_slot(
    spec: CreateSchedule, first_due: datetime, now: datetime, anchor: datetime
) -> datetime:
    """The last slot at or before ``now``, from ``first_due`` (itself a slot, due)."""
    latest = first_due
    for _ in range(MAX_SLOT_SEARCH):
        following = next_slot(spec, latest, anchor)
        if following is None or following > now:
            break
        latest = following
    return latest


# -- the scheduler ------------------------------------------------------------------------


class Scheduler(LoggingConfigurable):
    """Keeps schedules and runs their jobs through the job manager (see the module docstring)."""

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
        self._sessions = sessionmaker(manager.store.engine, expire_on_commit=False)
        self._task: asyncio.Future[None] | None = None
        self._lock = asyncio.Lock()
        self.folder = Path(manager.root_dir) / "schedules"

    # -- lifecycle ------------------------------------------------------------------------

    def create_tables(self) -> None:
        engine = self.manager.store.engine
        Base.metadata.create_all(engine, tables=TABLES)
        add_missing_columns(engine, ScheduleRunRow.__table__)  # type: ignore[arg-type]

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
        with self._sessions.begin() as session:
            session.add(row)
        return self.describe(schedule_id)

    def _row(self, schedule_id: str, owner: str | None) -> ScheduleRow:
        with self._sessions() as session:
            row = session.get(ScheduleRow, schedule_id)
        if row is None or (owner is not None and row.owner != owner):
            raise ScheduleNotFound(schedule_id)
        return row

    def _recent_runs(self, schedule_id: str) -> list[ScheduleRun]:
        with self._sessions() as session:
            rows = session.scalars(
                select(ScheduleRunRow)
                .where(ScheduleRunRow.schedule_id == schedule_id)
                .order_by(ScheduleRunRow.slot_time.desc())
                .limit(RECENT_RUNS)
            ).all()
        return [
            ScheduleRun.model_validate(
                {
                    "slot_time": run.slot_time,
                    "job_id": run.job_id,
                    "pipeline_id": run.pipeline_id,
                    "outcome": run.outcome,
                    "message": run.message,
                }
            )
            for run in rows
        ]

    def _model(self, row: ScheduleRow) -> Schedule:
        recent = self._recent_runs(row.schedule_id)
        return Schedule.model_validate(
            {
                **row.spec,
                "schedule_id": row.schedule_id,
                "owner": row.owner,
                "pipeline_name": (row.spec.get("pipeline") or {}).get("name"),
                "status": row.status,
                "status_message": row.status_message,
                "runs": row.runs,
                "failures_in_a_row": row.failures_in_a_row,
                "last_slot_time": row.last_slot_time,
                "next_run_time": row.next_slot_time
                if row.status == ScheduleStatus.ACTIVE
                else None,
                "last_job_id": recent[0].job_id if recent else None,
                "recent_runs": recent,
                "create_time": row.create_time,
                "update_time": row.update_time,
            }
        )

    def describe(self, schedule_id: str, *, owner: str | None = None) -> Schedule:
        return self._model(self._row(schedule_id, owner))

    def list_schedules(self, owner: str) -> list[Schedule]:
        with self._sessions() as session:
            rows = session.scalars(
                select(ScheduleRow)
                .where(ScheduleRow.owner == owner)
                .order_by(ScheduleRow.create_time.desc())
            ).all()
        return [self._model(row) for row in rows]

    def runs_of(self, schedule_id: str) -> list[ScheduleRunRow]:
        """The slots handled, oldest first, each with its job."""
        with self._sessions() as session:
            return list(
                session.scalars(
                    select(ScheduleRunRow)
                    .where(ScheduleRunRow.schedule_id == schedule_id)
                    .order_by(ScheduleRunRow.slot_time)
                ).all()
            )

    def schedule_of(self, job_id: str) -> str | None:
        """The schedule whose run created the job ``job_id``; None for a one-off job."""
        with self._sessions() as session:
            return session.scalar(
                select(ScheduleRunRow.schedule_id).where(ScheduleRunRow.job_id == job_id)
            )

    def set_status(
        self, schedule_id: str, status: ScheduleStatus, *, owner: str | None = None
    ) -> Schedule:
        """Pause or resume. A resumed schedule goes on from its next slot after now."""
        row = self._row(schedule_id, owner)
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
        self._update(schedule_id, **values)
        if values.get("next_slot_time", row.next_slot_time) is None:
            self._end(schedule_id, "This schedule has no time left to run: its end date is past.")
        return self.describe(schedule_id)

    def delete(self, schedule_id: str, *, owner: str | None = None) -> None:
        """Delete the schedule; the jobs it started stay (and keep running)."""
        self._row(schedule_id, owner)
        with self._sessions.begin() as session:
            session.execute(delete(ScheduleRunRow).where(ScheduleRunRow.schedule_id == schedule_id))
            session.execute(delete(ScheduleRow).where(ScheduleRow.schedule_id == schedule_id))
        self._notebook_path(schedule_id).unlink(missing_ok=True)
        self._notebooks_path(schedule_id).unlink(missing_ok=True)

    def _update(self, schedule_id: str, **values: Any) -> None:
        with self._sessions.begin() as session:
            session.execute(
                update(ScheduleRow).where(ScheduleRow.schedule_id == schedule_id).values(**values)
            )

    def _end(self, schedule_id: str, message: str) -> None:
        self._update(
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
            with self._sessions() as session:
                rows = session.scalars(
                    select(ScheduleRow)
                    .where(ScheduleRow.status != ScheduleStatus.ENDED.value)
                    .order_by(ScheduleRow.create_time)
                ).all()
            for row in rows:
                try:
                    await self._round(row, now)
                except Exception:
                    self.log.exception("Schedule %s: this round failed", row.schedule_id)
            # An ended schedule's last runs: their outcomes are still recorded.
            with self._sessions() as session:
                ended = session.scalars(
                    select(ScheduleRow).where(
                        ScheduleRow.status == ScheduleStatus.ENDED.value,
                        ScheduleRow.schedule_id.in_(
                            select(ScheduleRunRow.schedule_id).where(
                                ScheduleRunRow.outcome.is_(None)
                            )
                        ),
                    )
                ).all()
            for row in ended:
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
        with self._sessions() as session:
            pending = session.scalars(
                select(ScheduleRunRow)
                .where(
                    ScheduleRunRow.schedule_id == row.schedule_id,
                    ScheduleRunRow.outcome.is_(None),
                )
                .order_by(ScheduleRunRow.slot_time)
            ).all()
        failures = row.failures_in_a_row
        for run in pending:
            job = self.manager.store.get(run.job_id) if run.job_id else None
            message: str | None
            if spec.pipeline is not None:
                settled = self._pipeline_outcome(run)
                if settled is None:
                    continue
                outcome, message, refusal = settled
                self._record_outcome(run.id, outcome, message)
                if refusal is not None and not over:
                    self._update(row.schedule_id, failures_in_a_row=failures + 1)
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
            with self._sessions.begin() as session:
                session.execute(
                    update(ScheduleRunRow)
                    .where(ScheduleRunRow.id == run.id)
                    .values(outcome=outcome, message=message)
                )
            if (
                job is not None
                and job.error
                and job.error.get("ename") == "JobRefused"
                and not over
            ):
                self._update(row.schedule_id, failures_in_a_row=failures + 1)
                self._end(row.schedule_id, self._refused_sentence(job.error.get("evalue", "")))
                return False
            if outcome == JobStatus.COMPLETED.value:
                failures = 0
            elif outcome == JobStatus.FAILED.value:
                failures += 1
        if failures != row.failures_in_a_row:
            self._update(row.schedule_id, failures_in_a_row=failures)
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

    def _record_outcome(self, run_id: int, outcome: str, message: str | None) -> None:
        with self._sessions.begin() as session:
            session.execute(
                update(ScheduleRunRow)
                .where(ScheduleRunRow.id == run_id)
                .values(outcome=outcome, message=message)
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
            with self._sessions.begin() as session:
                claimed = session.execute(
                    update(ScheduleRow)
                    .where(
                        ScheduleRow.schedule_id == row.schedule_id,
                        ScheduleRow.status == ScheduleStatus.ACTIVE.value,
                        ScheduleRow.next_slot_time == row.next_slot_time,
                    )
                    .values(
                        last_slot_time=slot,
                        next_slot_time=following,
                        runs=ScheduleRow.runs + 1,
                        update_time=now,
                    )
                )
                if claimed.rowcount != 1:  # type: ignore[attr-defined]
                    raise _SlotTaken  # paused, deleted or taken by another scheduler meanwhile
                session.add(ScheduleRunRow(schedule_id=row.schedule_id, slot_time=slot))
        except (_SlotTaken, IntegrityError):  # this slot was handled already: roll back
            return
        await self._submit(row, spec, slot)
        runs = row.runs + 1
        current = self._row(row.schedule_id, None)
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
            self._update(row.schedule_id, failures_in_a_row=ScheduleRow.failures_in_a_row + 1)
        else:
            # A refusal at dispatch fails the job at once: end the schedule in this round.
            self._settle(self._row(row.schedule_id, None), spec)

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
        with self._sessions.begin() as session:
            session.execute(
                update(ScheduleRunRow)
                .where(
                    ScheduleRunRow.schedule_id == row.schedule_id,
                    ScheduleRunRow.slot_time == slot,
                )
                .values(pipeline_id=pipeline_id, outcome=outcome, message=message)
            )
        if outcome == JobStatus.FAILED.value:
            self._update(row.schedule_id, failures_in_a_row=ScheduleRow.failures_in_a_row + 1)
        else:
            # A refusal as the first stage starts ends the schedule in this round.
            self._settle(self._row(row.schedule_id, None), spec)

    def _record_run(
        self,
        schedule_id: str,
        slot: datetime,
        job_id: str | None,
        outcome: str | None,
        message: str | None,
    ) -> None:
        with self._sessions.begin() as session:
            session.execute(
                update(ScheduleRunRow)
                .where(ScheduleRunRow.schedule_id == schedule_id, ScheduleRunRow.slot_time == slot)
                .values(job_id=job_id, outcome=outcome, message=message)
            )
