"""Scenarios: pipelines of notebook jobs with real runners and kernels (local jobs).

The scene (tests/support/pipeline_scenes.py): stage 1 writes a file in the shared folder,
stage 2 runs two jobs at once (one fails in its third cell when ``mode`` is ``fail``, the
other loops until the first is done), stage 3 reads stage 1's file.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import nbformat
import pytest

from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import ListJobsQuery
from jupyter_to_job.pipeline_templates import parse_template, with_parameters
from jupyter_to_job.pipelines import CreatePipeline, DescribePipeline, Pipelines
from jupyter_to_job.store import JobStore

from ..support import eventually
from ..support.job_managers import ManagerFactory
from ..support.notebooks import notebook, wait_for_file
from ..support.notification_receivers import MailSink, mail_sink_fixture
from ..support.pipeline_scenes import (
    SHARED_FOLDER,
    TEMPLATE_YAML,
    pipeline_request,
    write_home,
)

HANG_GUARD = 120  # a broken test fails instead of hanging; never a timing assertion

PipelinesFactory = Callable[..., Awaitable[Pipelines]]

mail_sink = mail_sink_fixture()


@pytest.fixture
async def make_pipelines(make_manager: ManagerFactory) -> AsyncIterator[PipelinesFactory]:
    """``await make_pipelines(root=...)``: a started manager with its pipelines."""
    made: list[Pipelines] = []

    async def make(**traits: object) -> Pipelines:
        manager = await make_manager(**traits)
        pipelines = Pipelines(manager=manager)
        pipelines.start()
        made.append(pipelines)
        return pipelines

    yield make
    for pipelines in made:
        await pipelines.close()


async def ended(pipelines: Pipelines, pipeline_id: str) -> DescribePipeline:
    async def final() -> DescribePipeline | None:
        pipeline = pipelines.describe(pipeline_id)
        settled = all(
            job.status not in ("CREATED", "QUEUED", "RUNNING", "STOPPING")
            for stage in pipeline.stages
            for job in stage.jobs
        )
        return pipeline if pipeline.status.is_final and settled else None

    return await eventually(final, what=f"pipeline {pipeline_id} to end", timeout=HANG_GUARD)


def jobs_of(manager: JobManager, pipeline_id: str) -> list[str]:
    listed = manager.list_jobs(ListJobsQuery(max_items=100))
    return sorted(job.job_id for job in listed.jobs if job.pipeline_id == pipeline_id)


async def test_a_failure_in_stage_two_stops_its_sibling_and_skips_stage_three(
    make_pipelines: PipelinesFactory, tmp_path: Path
) -> None:
    # Given alice's home with the scene, and its template saying mode: fail
    home = write_home(tmp_path / "home")
    pipelines = await make_pipelines()
    template = parse_template(
        (home / "evaluate.pipeline.yaml").read_text(), "evaluate.pipeline.yaml"
    )

    # When she runs the template
    created = await pipelines.create("alice", template, source_root=home)
    pipeline = await ended(pipelines, created.pipeline_id)

    # Then stage 1 completed, evaluate.ipynb failed in its third cell, watch.ipynb was
    # stopped because of it, and stage 3 never started (no job was made for it)
    assert pipeline.status == "FAILED"
    assert pipeline.status_message == (
        "Stage 'evaluate' failed: in 'evaluate.ipynb', cell 3 raised ValueError: cannot "
        "evaluate in mode fail. The rest was stopped or skipped."
    )
    prepare, evaluate, report = pipeline.stages
    assert (prepare.status, evaluate.status, report.status) == ("COMPLETED", "FAILED", "SKIPPED")
    failing, watching = evaluate.jobs
    assert failing.status == "FAILED"
    assert failing.error is not None and failing.error.ename == "ValueError"
    assert failing.status_message == "Cell 3 raised ValueError: cannot evaluate in mode fail"
    assert failing.parameters == {"mode": "fail"}
    assert watching.status == "STOPPED"
    assert watching.status_message == "Stopped because 'evaluate.ipynb' of stage 'evaluate' failed."
    assert report.jobs[0].status == "SKIPPED" and report.jobs[0].job_id is None
    assert report.status_message == "Skipped because stage 'evaluate' failed."
    assert pipeline.template_path == "evaluate.pipeline.yaml"
    assert (pipeline.can_delete, pipeline.can_stop) == (True, False)
    made = [prepare.jobs[0].job_id, failing.job_id, watching.job_id]
    assert jobs_of(pipelines.manager, created.pipeline_id) == sorted(made)  # type: ignore[arg-type]
    assert (home / SHARED_FOLDER / "data.txt").read_text() == "made by stage 1"
    assert not (home / "report.txt").exists()

    # When she runs the template again with mode: pass
    rerun = await pipelines.create(
        "alice", with_parameters(template, {"mode": "pass"}), source_root=home
    )
    passed = await ended(pipelines, rerun.pipeline_id)

    # Then every stage completed, and stage 3 read what stage 1 wrote in the shared folder
    assert passed.status == "COMPLETED", passed.status_message
    assert [stage.status for stage in passed.stages] == ["COMPLETED"] * 3
    assert (home / "report.txt").read_text() == "made by stage 1, read by stage 3"
    job = pipelines.manager.describe(passed.stages[2].jobs[0].job_id)  # type: ignore[arg-type]
    assert job.pipeline_id == rerun.pipeline_id


async def test_stopping_a_pipeline_stops_its_jobs_and_skips_the_rest(
    make_pipelines: PipelinesFactory, tmp_path: Path
) -> None:
    # Given a pipeline whose first stage waits on a gate that never opens
    home = tmp_path / "home"
    home.mkdir()
    (home / "wait.ipynb").write_text(_nb(wait_for_file(tmp_path / "never")))
    (home / "after.ipynb").write_text(_nb("print('after')"))
    pipelines = await make_pipelines()
    request = CreatePipeline.model_validate(
        {
            "name": "Stop me",
            "stages": [
                {"name": "wait", "jobs": [{"input_path": "wait.ipynb"}]},
                {"name": "after", "jobs": [{"input_path": "after.ipynb"}]},
            ],
        }
    )
    created = await pipelines.create("alice", request, source_root=home)
    job_id = created.stages[0].jobs[0].job_id
    assert job_id is not None
    await eventually(
        lambda: pipelines.manager.describe(job_id).status == "RUNNING", what="the job to run"
    )

    # When she stops the pipeline
    stopping = await pipelines.stop(created.pipeline_id, owner="alice")
    assert stopping.status in ("STOPPING", "STOPPED")
    pipeline = await ended(pipelines, created.pipeline_id)

    # Then its running job stopped, the next stage was skipped, and it is STOPPED
    assert pipeline.status == "STOPPED"
    assert pipeline.stages[0].jobs[0].status == "STOPPED"
    assert pipeline.stages[0].jobs[0].status_message == "Stopped with the pipeline, by its owner."
    assert pipeline.stages[1].status == "SKIPPED"
    assert jobs_of(pipelines.manager, created.pipeline_id) == [job_id]


async def test_a_restarted_job_service_goes_on_with_the_pipeline(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given a pipeline whose first stage waits on a gate
    home = tmp_path / "home"
    home.mkdir()
    gate = tmp_path / "gate"
    (home / "first.ipynb").write_text(_nb(wait_for_file(gate)))
    (home / "second.ipynb").write_text(
        _nb("import os\nopen('second.txt', 'w').write(os.environ['JUPYTER_TO_JOB_PIPELINE_STAGE'])")
    )
    root = tmp_path / "root"
    manager = await make_manager(root=root)
    pipelines = Pipelines(manager=manager)
    pipelines.start()
    request = CreatePipeline.model_validate(
        {
            "name": "Survive a restart",
            "stages": [
                {"name": "first", "jobs": [{"input_path": "first.ipynb"}]},
                {"name": "second", "jobs": [{"input_path": "second.ipynb"}]},
            ],
        }
    )
    created = await pipelines.create("alice", request, source_root=home)
    first = created.stages[0].jobs[0].job_id
    assert first is not None
    await eventually(lambda: manager.describe(first).status == "RUNNING", what="the first job")

    # When the service stops (its jobs run on), the first job finishes meanwhile, and a new
    # service starts on the same database
    await pipelines.close()
    await manager.shutdown(stop_jobs=False)
    gate.write_text("open")
    store = JobStore(f"sqlite:///{root / 'jobs.sqlite'}")
    await eventually(
        lambda: (row := store.get(first)) is not None and row.pid is not None,
        what="the first job's process",
    )
    await eventually(lambda: _status_file_final(root, first), what="the first job to finish")
    store.close()
    restarted = await make_manager(root=root)
    again = Pipelines(manager=restarted)
    again.start()
    try:
        pipeline = await ended(again, created.pipeline_id)
    finally:
        await again.close()

    # Then the pipeline went on with its second stage, and no job was made twice
    assert pipeline.status == "COMPLETED", pipeline.status_message
    assert (home / "second.txt").read_text() == "second"
    assert len(jobs_of(restarted, created.pipeline_id)) == 2


def _status_file_final(root: Path, job_id: str) -> bool:
    status = root / "jobs" / job_id / "status.json"
    try:
        return json.loads(status.read_text())["state"] in ("COMPLETED", "FAILED", "STOPPED")
    except (OSError, ValueError, KeyError):
        return False


def _nb(*cells: str) -> str:
    return nbformat.writes(notebook(*cells))


def test_the_scene_request_matches_its_template() -> None:
    # The template file and the request builder describe one pipeline
    template = parse_template(TEMPLATE_YAML, "evaluate.pipeline.yaml")
    assert template.model_dump(exclude={"template_path"}) == CreatePipeline.model_validate(
        pipeline_request("fail")
    ).model_dump(exclude={"template_path"})


async def test_the_owner_is_told_once_when_the_pipeline_ends_not_per_job(
    make_pipelines: PipelinesFactory, mail_sink: MailSink, tmp_path: Path
) -> None:
    # Given alice, whose default is a mail when anything of hers ends
    home = tmp_path / "home"
    home.mkdir()
    (home / "one.ipynb").write_text(_nb("print('one')"))
    (home / "two.ipynb").write_text(_nb("x = 1", "raise ValueError('no data')"))
    pipelines = await make_pipelines()
    notifier = pipelines.manager.notifier
    notifier.smtp_host, notifier.smtp_port = mail_sink.host, mail_sink.port
    notifier.address_template = "{username}@campus.test"
    notifier.hub_url = "https://gpu-hub.campus.test"
    pipelines.manager.store.set_owner_notify("alice", {"email": True}, None)
    request = CreatePipeline.model_validate(
        {
            "name": "Nightly",
            "stages": [
                {
                    "name": "first",
                    "jobs": [{"input_path": "one.ipynb"}, {"input_path": "one.ipynb"}],
                },
                {"name": "second", "jobs": [{"input_path": "two.ipynb"}]},
            ],
        }
    )

    # When her three-job pipeline fails in its second stage
    created = await pipelines.create("alice", request, source_root=home)
    pipeline = await ended(pipelines, created.pipeline_id)
    await notifier.drain()

    # Then she gets one mail, about the pipeline, with the reason and its link
    assert pipeline.status == "FAILED"
    (mail,) = await eventually(lambda: mail_sink.to("alice@campus.test"), what="the mail")
    await notifier.drain()
    assert mail_sink.to("alice@campus.test") == [mail]
    assert mail["Subject"] == "Pipeline Nightly failed"
    text = mail.get_content()
    assert f"Reason:   {pipeline.status_message}" in text
    assert "cell 2 raised ValueError: no data" in text
    assert f"api/pipelines/{created.pipeline_id}" in text


async def test_a_pipeline_job_starts_warm_and_finds_its_shared_folder(
    make_pipelines: PipelinesFactory, tmp_path: Path
) -> None:
    # Given alice opened the Run as Job dialog, so a runner and kernel were started ahead
    home = tmp_path / "home"
    home.mkdir()
    (home / "one.ipynb").write_text(
        _nb("import os\nopen('seen.txt', 'w').write(os.environ['JUPYTER_TO_JOB_PIPELINE_DIR'])")
    )
    pipelines = await make_pipelines()
    manager = pipelines.manager
    assert manager.prewarm("alice") == 1
    assert manager.warm_pool is not None
    assert await manager.warm_pool.wait_ready("alice", None) == 1

    # When she runs a one-job pipeline
    request = CreatePipeline.model_validate(
        {"name": "Warm", "stages": [{"name": "only", "jobs": [{"input_path": "one.ipynb"}]}]}
    )
    created = await pipelines.create("alice", request, source_root=home)
    pipeline = await ended(pipelines, created.pipeline_id)

    # Then its job ran in the kernel started ahead, which was given the shared folder
    assert pipeline.status == "COMPLETED", pipeline.status_message
    job_id = pipeline.stages[0].jobs[0].job_id
    assert job_id is not None
    log = manager.log_store.path(job_id).read_text()
    assert "the kernel was started ahead of the job (a warm start)" in log
    assert (home / "seen.txt").read_text() == str(home / "pipelines" / "warm")
