"""Errors of the schedule API, each a sentence with what to do next (mapped to HTTP as job
errors are)."""

from __future__ import annotations

from ..errors import JobError


class ScheduleNotFound(JobError):
    status = 404
    code = "not-found"

    def __init__(self, schedule_id: str):
        super().__init__(
            f"There is no schedule {schedule_id[:64]!r}. It may have been deleted; reload the "
            "schedule list."
        )
