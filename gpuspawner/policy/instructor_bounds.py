"""What instructors may change of their own courses, as the admins bound it in the catalog.

Design notes: docs/design/policy.md, "gpuspawner.policy.instructor_bounds".
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from .units import parse_duration
from .wording import duration

Duration = Annotated[timedelta, BeforeValidator(parse_duration)]


class DurationBounds(BaseModel):
    """The shortest and longest value an instructor may choose: ``{min: 0m, max: 30m}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min: Duration = timedelta(0)
    max: Duration

    @model_validator(mode="after")
    def _ordered(self) -> DurationBounds:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) cannot be longer than max ({self.max})")
        return self

    def contains(self, value: timedelta) -> bool:
        return self.min <= value <= self.max


class InstructorBounds(BaseModel):
    """Bounds of what instructors may change on the course page (see the module)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    overrides_file: str | None = None
    """Where the course-sessions service keeps instructors' changes (None: no changes)."""
    cancel_classes: bool = True
    """Instructors may cancel one class of their course (and restore it)."""
    extra_sessions_per_week: int = Field(default=0, ge=0, le=14)
    extra_session_length: Duration = timedelta(hours=3)
    lead_time: DurationBounds | None = None
    grace: DurationBounds | None = None
    prewarm: DurationBounds | None = None
    notice_length: int = Field(default=280, ge=0, le=2000)
    extension: Duration = timedelta(0)
    """The most minutes, in all, a student's server may be kept past its planned stop."""

    @property
    def enabled(self) -> bool:
        """True when instructors may change anything at all."""
        return self.overrides_file is not None

    def narrowed(self, course: CourseInstructorBounds | None) -> InstructorBounds:
        """These bounds with ``course``'s narrower values in their place (checked by
        :meth:`outside` when the catalog is loaded)."""
        if course is None:
            return self
        return self.model_copy(update={name: value for name, value in course if value is not None})

    def outside(self, course: CourseInstructorBounds) -> list[tuple[str, str]]:
        """``(key, sentence)`` for each of ``course``'s values these bounds do not allow:
        a course may only narrow them."""
        narrow = "lower it, or widen settings.instructor_bounds"
        found: list[tuple[str, str]] = []
        if course.cancel_classes and not self.cancel_classes:
            found.append(
                (
                    "cancel_classes",
                    "settings.instructor_bounds do not let instructors cancel classes, so a "
                    "course cannot let them; remove cancel_classes here",
                )
            )
        for name, noun in (
            ("extra_sessions_per_week", "extra sessions a week"),
            ("notice_length", "characters of a notice"),
        ):
            value, limit = getattr(course, name), getattr(self, name)
            if value is not None and value > limit:
                found.append(
                    (name, f"{value} {noun} is more than the catalog-wide {limit}; {narrow}")
                )
        for name, noun in (
            ("extra_session_length", "an extra session"),
            ("extension", "an extension"),
        ):
            value, limit = getattr(course, name), getattr(self, name)
            if value is not None and value > limit:
                found.append(
                    (
                        name,
                        f"{duration(value)} for {noun} is longer than the catalog-wide "
                        f"{duration(limit)}; {narrow}",
                    )
                )
        for name in ("lead_time", "grace", "prewarm"):
            wanted, allowed = getattr(course, name), getattr(self, name)
            if wanted is None:
                continue
            if allowed is None:
                found.append(
                    (
                        name,
                        "settings.instructor_bounds do not let instructors change the "
                        f"{name.replace('_', ' ')}, so a course cannot let them; remove "
                        f"{name} here, or add it to settings.instructor_bounds",
                    )
                )
            elif wanted.min < allowed.min or wanted.max > allowed.max:
                found.append(
                    (
                        name,
                        f"{_span(wanted)} is not within the catalog-wide {_span(allowed)}; "
                        "keep min and max within it, or widen settings.instructor_bounds",
                    )
                )
        return found


def _span(bounds: DurationBounds) -> str:
    return f"{duration(bounds.min) if bounds.min else '0 min'} to {duration(bounds.max)}"


class CourseInstructorBounds(BaseModel):
    """A course's own, narrower bounds (``courses[].instructor_bounds``); a key left out
    is the catalog-wide one (see the module)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cancel_classes: bool | None = None
    extra_sessions_per_week: int | None = Field(default=None, ge=0, le=14)
    extra_session_length: Duration | None = None
    lead_time: DurationBounds | None = None
    grace: DurationBounds | None = None
    prewarm: DurationBounds | None = None
    notice_length: int | None = Field(default=None, ge=0, le=2000)
    extension: Duration | None = None
