"""Wire models of the schedule API (mirrored by ``schedules/scheduleModels.ts``): a schedule's
request, its runs, and how it stands."""

from __future__ import annotations

from datetime import datetime, time
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from pydantic import Field, field_validator, model_validator

from ..models import CreateJob, JobStatus, WireModel
from ..pipelines.models import CreatePipeline

MIN_INTERVAL_SECONDS = 60
"""The shortest interval between runs: a schedule is for work that takes minutes."""
MAX_NAME_LENGTH = 255
RECENT_RUNS = 10


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
