"""Scenarios: a pipeline on a schedule, driven round by round with a hand-moved clock.

Each round (``Scheduler.tick``) is called at a chosen time; the pipelines it starts are
real (tiny notebooks run by the local executor, passing a file from stage to stage).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jupyter_to_job.pipelines import DescribePipeline, Pipelines
from jupyter_to_job.schedules import CreateSchedule, Scheduler, ScheduleStatus

from ..support import eventually
from ..support.job_capacity import EXPIRING_LAB_CATALOG, catalog_capacity
from ..support.job_managers import ManagerFactory
from ..support.notebooks import notebook
from ..support.schedule_clock import Clock, at

HANG_GUARD = 120  # a broken test fails instead of hanging; never a timing assertion
SHARED = "import os, pathlib\nshared = pathlib.Path(os.environ['JUPYTER_TO_JOB_PIPELINE_DIR'])"


@pytest.fixture
async def pipelines(make_manager: ManagerFactory) -> AsyncIterator[Pipelines]:
    made = Pipelines(manager=await make_manager())
    made.start()
    yield made
    await made.close()


async def ended(pipelines: Pipelines, pipeline_id: str) -> DescribePipeline:
    def final() -> DescribePipeline | None:
        pipeline = pipelines.describe(pipeline_id)
        return pipeline if pipeline.status.is_final else None

    return await eventually(final, what=f"pipeline {pipeline_id} to end", timeout=HANG_GUARD)


async def test_a_pipeline_runs_at_each_slot_and_the_schedule_ends_after_its_runs(
    pipelines: Pipelines, tmp_path: Path
) -> None:
    # Given an hourly schedule of a two-stage pipeline, at most two runs, in alice's home
    home = tmp_path / "home"
    home.mkdir()
    clock = Clock(at("08:30"))
    scheduler = Scheduler(manager=pipelines.manager, clock=clock, pipelines=pipelines)
    scheduler.create_tables()
    request = CreateSchedule.model_validate(
        {
            "name": "Hourly report",
            "pipeline": {
                "name": "Report",
                "parameters": {"label": "hourly"},
                "stages": [
                    {"name": "collect", "jobs": [{"input_path": "collect.ipynb"}]},
                    {"name": "publish", "jobs": [{"input_path": "publish.ipynb"}]},
                ],
            },
            "cron": "0 * * * *",
            "max_runs": 2,
        }
    )
    collect = notebook(
        ("label = 'none'", ["parameters"]),
        SHARED,
        "(shared / 'count.txt').write_text(str(len(list(shared.iterdir()))) + label)",
    )
    publish = notebook(
        SHARED,
        "with open('published.txt', 'a') as out:\n"
        "    out.write((shared / 'count.txt').read_text() + '\\n')",
    )
    schedule = scheduler.create(
        "alice",
        request,
        notebooks={"collect.ipynb": collect, "publish.ipynb": publish},
        working_dir=str(home),
    )
    assert (schedule.pipeline_name, schedule.next_run_time) == ("Report", at("09:00"))

    # When rounds run at 08:59 (nothing due), 09:00 and 10:00
    await scheduler.tick(at("08:59"))
    assert scheduler.describe(schedule.schedule_id).recent_runs == []
    runs = []
    for slot in ("09:00", "10:00"):
        clock.now = at(slot)
        await scheduler.tick(at(slot))
        run = scheduler.describe(schedule.schedule_id).recent_runs[0]
        assert run.pipeline_id is not None and run.job_id is None
        pipeline = await ended(pipelines, run.pipeline_id)
        assert pipeline.status == "COMPLETED", pipeline.status_message
        runs.append(run.pipeline_id)
        for job_id in (job.job_id for stage in pipeline.stages for job in stage.jobs):
            assert job_id is not None
            job = pipelines.manager.describe(job_id)
            assert (job.pipeline_id, job.schedule_id) == (run.pipeline_id, schedule.schedule_id)
    clock.now = at("10:01")
    await scheduler.tick(at("10:01"))

    # Then the pipeline ran at 09:00 and 10:00, each run's stage 2 read stage 1's file,
    # each run is listed with its pipeline, and the schedule ended after its two runs
    assert (home / "published.txt").read_text().splitlines() == ["0hourly", "1hourly"]
    after = scheduler.describe(schedule.schedule_id)
    assert [(run.pipeline_id, run.outcome) for run in after.recent_runs] == [
        (runs[1], "COMPLETED"),
        (runs[0], "COMPLETED"),
    ]
    assert after.status is ScheduleStatus.ENDED
    assert after.status_message == "It ran 2 times, as many as it was set to."


def test_a_schedule_runs_a_job_or_a_pipeline_not_both() -> None:
    job = {"input_path": "a.ipynb"}
    pipeline = {"name": "P", "stages": [{"name": "s", "jobs": [job]}]}

    with pytest.raises(ValueError, match="give either a job or a pipeline to run, not both"):
        CreateSchedule.model_validate({"job": job, "pipeline": pipeline, "cron": "0 * * * *"})
    with pytest.raises(ValueError, match="give either a job or a pipeline to run, not both"):
        CreateSchedule.model_validate({"cron": "0 * * * *"})


async def test_a_pipeline_run_refused_because_the_grant_expired_stops_the_schedule(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given alice's research allocation, which ends on 25 November, and a daily pipeline
    # on its flavor
    clock = Clock(at("09:59"))
    capacity = catalog_capacity(tmp_path, EXPIRING_LAB_CATALOG, ["alice"], clock=clock)
    manager = await make_manager(capacity=capacity)
    pipelines = Pipelines(manager=manager)
    pipelines.start()
    try:
        scheduler = Scheduler(manager=manager, clock=clock, pipelines=pipelines)
        scheduler.create_tables()
        job = {"input_path": "daily.ipynb", "flavor": "lab-cpu"}
        request = CreateSchedule.model_validate(
            {
                "pipeline": {"name": "Daily", "stages": [{"name": "only", "jobs": [job]}]},
                "cron": "0 10 * * *",
            }
        )
        schedule = scheduler.create(
            "alice", request, notebooks={"daily.ipynb": notebook("print('daily')")}
        )
        clock.now = at("10:00")
        await scheduler.tick(at("10:00"))
        first = scheduler.describe(schedule.schedule_id).recent_runs[0].pipeline_id
        assert first is not None
        assert (await ended(pipelines, first)).status == "COMPLETED"

        # When the next day's run comes, after the allocation ended
        next_day = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
        clock.now = next_day
        await scheduler.tick(next_day)

        # Then that run was refused, and the schedule stopped with the admission's sentence
        reason = (
            "You cannot run jobs on 'lab-cpu': Lab CPU came with a course term or research "
            "allocation that is not active now."
        )
        stopped = scheduler.describe(schedule.schedule_id)
        assert stopped.status is ScheduleStatus.ENDED
        assert stopped.status_message == f"A run was refused, so the schedule stopped: {reason}"
        refused = stopped.recent_runs[0]
        assert refused.pipeline_id is not None and refused.outcome == "FAILED"
        assert refused.message == (
            f"Stage 'only' failed: in 'daily.ipynb', {reason[0].lower()}{reason[1:-1]}. "
            "The rest was stopped or skipped."
        )
    finally:
        await pipelines.close()
