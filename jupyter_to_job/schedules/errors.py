"""Errors of the schedule API, each a sentence with what to do next (mapped to HTTP as job
errors are)."""

from __future__ import annotations

from ..errors import NotFound


class ScheduleNotFound(NotFound):
    def __init__(self, schedule_id: str):
        super().__init__("schedule", schedule_id)
