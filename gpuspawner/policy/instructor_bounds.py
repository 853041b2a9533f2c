"""What instructors may change of their own courses, as the admins bound it in the catalog.

``settings.instructor_bounds`` in the catalog::

    settings:
      instructor_bounds:
        overrides_file: /var/lib/gpuspawner/course-overrides.json
        extra_sessions_per_week: 2        # extra sessions a course may add in one week
        extra_session_length: 3h          # the longest extra session
        lead_time: {min: 0m, max: 30m}    # absent: instructors may not change it
        grace: {min: 5m, max: 30m}
        prewarm: {min: 0m, max: 20m}
        notice_length: 280                # characters of a notice on the spawn cards (0: none)
        extension: 60m                    # the most a student's server may be extended

Without ``overrides_file`` instructors change nothing themselves: the course page shows
their courses, and the admins edit the catalog. The course-sessions service writes the
file (:mod:`.course_overrides`); a relative path is read from the folder of the catalog
file that holds the settings.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from .units import parse_duration

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
