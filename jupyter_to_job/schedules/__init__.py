"""Schedules: a notebook job, or a pipeline, run again and again on a cron expression or an
interval.

Laid out as the jobs are: ``models`` (wire models), ``errors``, ``store`` (tables and their
reads and writes), ``slots`` (when it runs), ``describe`` and ``engine`` (:class:`Scheduler`);
docs/jobs-schedules.md tells how runs are made once and never lost.
"""

from .engine import Clock, Scheduler
from .errors import ScheduleNotFound
from .models import (
    MAX_NAME_LENGTH,
    MIN_INTERVAL_SECONDS,
    RECENT_RUNS,
    CreateSchedule,
    ListSchedulesResponse,
    Schedule,
    ScheduleRun,
    ScheduleStatus,
    ScheduleWindow,
    UpdateSchedule,
)
from .slots import MAX_SLOT_SEARCH, latest_due_slot, next_slot

__all__ = [
    "MAX_NAME_LENGTH",
    "MAX_SLOT_SEARCH",
    "MIN_INTERVAL_SECONDS",
    "RECENT_RUNS",
    "Clock",
    "CreateSchedule",
    "ListSchedulesResponse",
    "Schedule",
    "ScheduleNotFound",
    "ScheduleRun",
    "ScheduleStatus",
    "ScheduleWindow",
    "Scheduler",
    "UpdateSchedule",
    "latest_due_slot",
    "next_slot",
]
