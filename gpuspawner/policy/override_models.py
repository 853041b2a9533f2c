"""The instructors' overrides file as data: one course's changes (cancelled dates, extra
sessions, timings, a notice, server extensions) and the whole document. Reading, checking
and applying them is :mod:`.course_overrides`."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExtraSession(_Model):
    """A one-off class on ``day`` from ``start`` to ``end`` (the course's wall-clock time)."""

    day: date
    start: time
    end: time

    @field_validator("start", "end", mode="before")
    @classmethod
    def _clock(cls, value: object) -> object:
        return value[:5] if isinstance(value, str) else value

    def describe(self) -> str:
        return f"{self.day:%a %d %b %Y} {self.start:%H:%M}-{self.end:%H:%M}"


class ServerExtension(_Model):
    """Minutes added to one server start (``user``'s server ``server`` started at ``started``)."""

    user: str
    server: str = ""
    started: datetime
    minutes: int = Field(ge=1)


class CourseOverrides(_Model):
    """One course's changes (see the module)."""

    cancelled: tuple[date, ...] = ()
    extra: tuple[ExtraSession, ...] = ()
    lead_time: int | None = Field(default=None, ge=0)
    grace: int | None = Field(default=None, ge=0)
    prewarm: int | None = Field(default=None, ge=0)
    notice: str = ""
    extensions: tuple[ServerExtension, ...] = ()

    def timing(self, name: str) -> timedelta | None:
        minutes = getattr(self, name)
        return None if minutes is None else timedelta(minutes=minutes)

    def extension_for(self, user: str, server: str, started: datetime | None) -> timedelta:
        """How long ``user``'s server ``server`` started at ``started`` was extended."""
        if started is None:
            return timedelta(0)
        minutes = sum(
            e.minutes
            for e in self.extensions
            if e.user == user and e.server == server and e.started == started
        )
        return timedelta(minutes=minutes)


class OverridesFile(_Model):
    """The whole overrides document."""

    version: int = 1
    courses: dict[str, CourseOverrides] = Field(default_factory=dict)

    def of(self, course_id: str) -> CourseOverrides:
        return self.courses.get(course_id) or CourseOverrides()

    def replace(self, course_id: str, overrides: CourseOverrides) -> OverridesFile:
        courses = dict(self.courses)
        courses[course_id] = overrides
        return OverridesFile(version=self.version, courses=courses)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2, exclude_defaults=True)
