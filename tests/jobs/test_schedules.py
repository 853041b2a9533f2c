"""Scenarios: notebook jobs on a schedule, driven round by round with a hand-moved clock.

Each round (``Scheduler.tick``) is called at a chosen time; nothing waits on the wall
clock for a slot. The jobs are real: tiny notebooks run by the local executor, each
appending a line to a file, so the file says how often the notebook really ran.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from nbformat import NotebookNode
from pydantic import ValidationError
from traitlets.config import Config

from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, JobStatus
from jupyter_to_job.schedules import CreateSchedule, Scheduler, ScheduleStatus

from ..support import eventually
from ..support.job_capacity import EXPIRING_LAB_CATALOG, catalog_capacity
from ..support.job_managers import ManagerFactory, finished
from ..support.notebooks import append_line, notebook
from ..support.schedule_clock import Clock, at


def every_minute(tmp_path: Path, **settings: object) -> tuple[CreateSchedule, NotebookNode]:
    ran = tmp_path / "ran.txt"
    request = CreateSchedule.model_validate(
        {
            "job": CreateJob(input_path="report.ipynb", output_formats=["ipynb"]),
            "cron": "* * * * *",
            **settings,
        }
    )
    return request, notebook(append_line(ran, "ran"))


def lines_written(tmp_path: Path) -> int:
    ran = tmp_path / "ran.txt"
    return len(ran.read_text().splitlines()) if ran.exists() else 0


async def tick_and_finish(scheduler: Scheduler, clock: Clock, when: datetime) -> list[str]:
    """One round at ``when``; waits for the jobs it started; returns their ids."""
    before = {run.id for schedule in _all(scheduler) for run in scheduler.runs_of(schedule)}
    clock.now = when
    await scheduler.tick(when)
    started = [
        run.job_id
        for schedule in _all(scheduler)
        for run in scheduler.runs_of(schedule)
        if run.id not in before and run.job_id
    ]
    for job_id in started:
        await finished(scheduler.manager, job_id)
    return started


def _all(scheduler: Scheduler) -> list[str]:
    return [s.schedule_id for s in scheduler.list_schedules("alice")]


def slots(scheduler: Scheduler, schedule_id: str) -> list[str]:
    return [f"{run.slot_time:%H:%M}" for run in scheduler.runs_of(schedule_id)]


def make_scheduler(manager: JobManager, clock: Clock) -> Scheduler:
    scheduler = Scheduler(manager=manager, clock=clock)
    scheduler.create_tables()
    return scheduler


async def test_runs_exactly_the_slots_inside_the_daily_window(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given a schedule every minute, only from 10:00 up to 10:03
    clock = Clock(at("09:58"))
    scheduler = make_scheduler(await make_manager(), clock)
    request, nb = every_minute(tmp_path, window={"start": "10:00", "end": "10:03"})
    schedule = scheduler.create("alice", request, notebook=nb)
    assert schedule.next_run_time == at("10:00")

    # When rounds run each minute from 09:59 to 10:05
    for minute in ("09:59", "10:00", "10:01", "10:02", "10:03", "10:04", "10:05"):
        await tick_and_finish(scheduler, clock, at(minute))

    # Then the notebook ran at 10:00, 10:01 and 10:02, and the next run is tomorrow
    assert slots(scheduler, schedule.schedule_id) == ["10:00", "10:01", "10:02"]
    assert lines_written(tmp_path) == 3
    after = scheduler.describe(schedule.schedule_id)
    assert after.status is ScheduleStatus.ACTIVE
    assert after.next_run_time == datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
    assert [(f"{run.slot_time:%H:%M}", run.outcome) for run in after.recent_runs] == [
        ("10:02", JobStatus.COMPLETED),
        ("10:01", JobStatus.COMPLETED),
        ("10:00", JobStatus.COMPLETED),
    ]
    for run in scheduler.runs_of(schedule.schedule_id):
        assert run.job_id is not None
        assert scheduler.schedule_of(run.job_id) == schedule.schedule_id
        job = scheduler.manager.describe(run.job_id)
        assert (job.status, job.schedule_id) == (JobStatus.COMPLETED, schedule.schedule_id)


async def test_a_schedule_stops_after_its_number_of_runs(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    clock = Clock(at("09:58"))
    scheduler = make_scheduler(await make_manager(), clock)
    request, nb = every_minute(tmp_path, window={"start": "10:00", "end": "10:03"}, max_runs=2)
    schedule = scheduler.create("alice", request, notebook=nb)

    for minute in ("09:59", "10:00", "10:01", "10:02", "10:03"):
        await tick_and_finish(scheduler, clock, at(minute))

    assert slots(scheduler, schedule.schedule_id) == ["10:00", "10:01"]
    assert lines_written(tmp_path) == 2
    ended = scheduler.describe(schedule.schedule_id)
    assert ended.status is ScheduleStatus.ENDED
    assert ended.status_message == "It ran 2 times, as many as it was set to."
    assert ended.next_run_time is None


async def test_a_schedule_ends_at_its_end_date(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    clock = Clock(at("09:59", 30))
    scheduler = make_scheduler(await make_manager(), clock)
    request, nb = every_minute(tmp_path, end_time=at("10:01", 30).isoformat())
    schedule = scheduler.create("alice", request, notebook=nb)

    for minute in ("10:00", "10:01", "10:02", "10:03"):
        await tick_and_finish(scheduler, clock, at(minute))

    assert slots(scheduler, schedule.schedule_id) == ["10:00", "10:01"]
    ended = scheduler.describe(schedule.schedule_id)
    assert (ended.status, ended.status_message) == (
        ScheduleStatus.ENDED,
        "It reached its end date.",
    )


async def test_the_schedulers_loop_runs_a_due_slot_on_its_own(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given a scheduler started with the service, rounds every 0.05 s, its clock held at 09:59
    clock = Clock(at("09:59"))
    scheduler = Scheduler(
        manager=await make_manager(),
        clock=clock,
        config=Config({"Scheduler": {"tick_seconds": 0.05}}),
    )
    scheduler.start()
    try:
        request, nb = every_minute(tmp_path)
        schedule = scheduler.create("alice", request, notebook=nb)
        # When the clock reaches the first slot, no one calling tick by hand
        clock.now = at("10:00", 5)
        await eventually(
            lambda: [run for run in scheduler.runs_of(schedule.schedule_id) if run.job_id],
            what="the 10:00 run's job",
        )
    finally:
        await scheduler.stop()

    # Then the 10:00 slot ran, once
    runs = scheduler.runs_of(schedule.schedule_id)
    assert [f"{run.slot_time:%H:%M}" for run in runs] == ["10:00"]
    assert runs[0].job_id is not None
    await finished(scheduler.manager, runs[0].job_id)
    assert lines_written(tmp_path) == 1
    assert scheduler.describe(schedule.schedule_id).runs == 1


async def test_a_restart_runs_the_latest_missed_slot_once_and_never_twice(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given a schedule every minute that ran at 10:01
    root = tmp_path / "root"
    clock = Clock(at("10:00", 30))
    first_manager = await make_manager(root=root)
    first = make_scheduler(first_manager, clock)
    request, nb = every_minute(tmp_path)
    schedule = first.create("alice", request, notebook=nb)
    await tick_and_finish(first, clock, at("10:01"))

    # When the job service is down from 10:01 to 10:04:30 and starts again
    await first_manager.shutdown()
    second = make_scheduler(await make_manager(root=root), clock)
    started = await tick_and_finish(second, clock, at("10:04", 30))
    # and a second round (or a second scheduler on the same database) comes at once
    again = await tick_and_finish(second, clock, at("10:04", 30))
    other = make_scheduler(second.manager, clock)
    await tick_and_finish(other, clock, at("10:04", 40))

    # Then the latest missed slot ran once, the earlier missed ones were skipped
    assert len(started) == 1 and again == []
    assert slots(second, schedule.schedule_id) == ["10:01", "10:04"]
    # and the schedule goes on at its next slot
    await tick_and_finish(second, clock, at("10:05"))
    assert slots(second, schedule.schedule_id) == ["10:01", "10:04", "10:05"]
    assert lines_written(tmp_path) == 3
    assert second.describe(schedule.schedule_id).runs == 3


async def test_a_paused_schedule_skips_its_slots_and_resumes_at_the_next(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    clock = Clock(at("09:59", 30))
    scheduler = make_scheduler(await make_manager(), clock)
    request, nb = every_minute(tmp_path)
    schedule = scheduler.create("alice", request, notebook=nb)
    await tick_and_finish(scheduler, clock, at("10:00"))

    paused = scheduler.set_status(schedule.schedule_id, ScheduleStatus.PAUSED, owner="alice")
    assert paused.status is ScheduleStatus.PAUSED and paused.next_run_time is None
    await tick_and_finish(scheduler, clock, at("10:01"))
    await tick_and_finish(scheduler, clock, at("10:02"))

    clock.now = at("10:02", 30)
    resumed = scheduler.set_status(schedule.schedule_id, ScheduleStatus.ACTIVE, owner="alice")
    assert resumed.next_run_time == at("10:03")
    await tick_and_finish(scheduler, clock, at("10:03"))

    assert slots(scheduler, schedule.schedule_id) == ["10:00", "10:03"]
    assert lines_written(tmp_path) == 2


async def test_a_run_refused_because_the_grant_expired_stops_the_schedule(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given alice's research allocation, which ends on 25 November, and a daily schedule
    clock = Clock(at("09:59", 30))
    capacity = catalog_capacity(tmp_path, EXPIRING_LAB_CATALOG, ["alice"], clock=clock)
    scheduler = make_scheduler(await make_manager(capacity=capacity), clock)
    request = CreateSchedule(
        job=CreateJob(input_path="daily.ipynb", flavor="lab-cpu", output_formats=["ipynb"]),
        cron="0 10 * * *",
    )
    schedule = scheduler.create(
        "alice", request, notebook=notebook(append_line(tmp_path / "ran.txt", "ran"))
    )
    await tick_and_finish(scheduler, clock, at("10:00"))
    assert lines_written(tmp_path) == 1

    # When the next day's run comes, after the allocation ended
    next_day = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
    await tick_and_finish(scheduler, clock, next_day)
    await tick_and_finish(scheduler, clock, datetime(2026, 11, 27, 10, 0, tzinfo=UTC))

    # Then that run was refused, and the schedule stopped with the admission's sentence
    reason = (
        "You cannot run jobs on 'lab-cpu': Lab CPU came with a course term or research "
        "allocation that is not active now."
    )
    stopped = scheduler.describe(schedule.schedule_id)
    assert stopped.status is ScheduleStatus.ENDED
    assert stopped.status_message == f"A run was refused, so the schedule stopped: {reason}"
    assert [run.slot_time for run in scheduler.runs_of(schedule.schedule_id)] == [
        at("10:00"),
        next_day,
    ]
    assert (stopped.recent_runs[0].outcome, stopped.recent_runs[0].message) == (
        JobStatus.FAILED,
        reason,
    )
    assert lines_written(tmp_path) == 1


async def test_a_schedule_ends_after_as_many_failures_in_a_row_as_it_allows(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    clock = Clock(at("09:59", 30))
    scheduler = make_scheduler(await make_manager(), clock)
    request = CreateSchedule(
        job=CreateJob(input_path="broken.ipynb", output_formats=["ipynb"]),
        interval_seconds=60,
        max_failures_in_a_row=2,
    )
    schedule = scheduler.create("alice", request, notebook=notebook("1 / 0"))

    for moment in (at("10:00", 30), at("10:01", 30), at("10:02", 30), at("10:03", 30)):
        await tick_and_finish(scheduler, clock, moment)

    ended = scheduler.describe(schedule.schedule_id)
    assert ended.status is ScheduleStatus.ENDED
    assert ended.status_message is not None
    assert ended.status_message.startswith("Its last 2 runs failed in a row, and it allows 2")
    assert len(scheduler.runs_of(schedule.schedule_id)) == 2


@pytest.mark.parametrize(
    ("settings", "complaint"),
    [
        ({"cron": "every monday"}, "'every monday' is not a cron expression"),
        ({"interval_seconds": 10}, "an interval of 10 seconds is too short"),
        (
            {"cron": "* * * * *", "window": {"start": "18:00", "end": "09:00"}},
            "the window ends (09:00) before it starts (18:00)",
        ),
        ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "'Mars/Olympus' is not a time zone"),
        ({"cron": "* * * * *", "interval_seconds": 60}, "either a cron expression"),
    ],
)
def test_a_bad_schedule_is_refused_with_a_sentence(settings: dict, complaint: str) -> None:
    with pytest.raises(ValidationError) as raised:
        CreateSchedule.model_validate({"job": {"input_path": "a.ipynb"}, **settings})
    assert complaint in str(raised.value)
