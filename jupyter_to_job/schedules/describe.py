"""A schedule as its owner sees it (:class:`Schedule`), from its row and its recent runs."""

from __future__ import annotations

from .models import Schedule, ScheduleRun, ScheduleStatus
from .store import ScheduleRow, ScheduleRunRow


def schedule_run(run: ScheduleRunRow) -> ScheduleRun:
    return ScheduleRun.model_validate(
        {
            "slot_time": run.slot_time,
            "job_id": run.job_id,
            "pipeline_id": run.pipeline_id,
            "outcome": run.outcome,
            "message": run.message,
        }
    )


def describe_schedule(row: ScheduleRow, recent_runs: list[ScheduleRunRow]) -> Schedule:
    """The schedule ``row`` with its ``recent_runs`` (newest first)."""
    recent = [schedule_run(run) for run in recent_runs]
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
            "next_run_time": row.next_slot_time if row.status == ScheduleStatus.ACTIVE else None,
            "last_job_id": recent[0].job_id if recent else None,
            "recent_runs": recent,
            "create_time": row.create_time,
            "update_time": row.update_time,
        }
    )
