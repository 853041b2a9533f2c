"""Scenario: the three-stage pipeline on Kubernetes (the test cluster; pods run as local
processes, a PVC is one local folder for every pod that mounts it).

Each job of the pipeline is a Kubernetes Job in alice's home claim; the stages pass files
through the shared folder on that claim. The same scene runs locally in
tests/jobs/test_pipelines.py and through the job service in tests/jobs_service.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from jupyter_to_job.k8s_objects import job_object_name
from jupyter_to_job.manager import JobManager
from jupyter_to_job.pipeline_templates import parse_template, with_parameters
from jupyter_to_job.pipelines import DescribePipeline, Pipelines
from tests.support import eventually
from tests.support.k8s_job_pods import JOB_PODS, PodProcesses
from tests.support.pipeline_scenes import (
    SHARED_FOLDER,
    TEMPLATE_YAML,
    notebooks_json,
)

HANG_GUARD = 180  # a broken test fails instead of hanging; never a timing assertion


@pytest.fixture
async def pipelines_on_k8s(home_claim_manager: JobManager) -> AsyncIterator[Pipelines]:
    """Pipelines whose jobs run as Kubernetes Jobs in their owner's home claim."""
    pipelines = Pipelines(manager=home_claim_manager)
    pipelines.start()
    yield pipelines
    await pipelines.close()


async def ended(pipelines: Pipelines, pipeline_id: str) -> DescribePipeline:
    def final() -> DescribePipeline | None:
        pipeline = pipelines.describe(pipeline_id)
        running = any(
            job.status in ("CREATED", "QUEUED", "RUNNING", "STOPPING")
            for stage in pipeline.stages
            for job in stage.jobs
        )
        return pipeline if pipeline.status.is_final and not running else None

    return await eventually(final, what=f"pipeline {pipeline_id} to end", timeout=HANG_GUARD)


async def kubernetes_jobs(k8s_api: Any) -> list[dict[str, Any]]:
    response = await client.BatchV1Api(k8s_api).list_namespaced_job(
        "default", label_selector=JOB_PODS.labels, _preload_content=False
    )
    return json.loads(await response.read())["items"]


async def test_a_failure_in_stage_two_stops_its_sibling_pod_and_a_rerun_passes(
    pipelines_on_k8s: Pipelines, pod_processes: PodProcesses, k8s_api: Any
) -> None:
    pipelines = pipelines_on_k8s
    home = pod_processes.claim_folder("default", "claim-alice")
    template = parse_template(TEMPLATE_YAML, "evaluate.pipeline.yaml")

    # When alice runs the template (mode: fail) on Kubernetes
    created = await pipelines.create("alice", template, notebooks=notebooks_json())
    pipeline = await ended(pipelines, created.pipeline_id)

    # Then evaluate.ipynb failed in its third cell inside its pod, watch.ipynb's pod was
    # stopped for it, and stage 3 never became a Kubernetes Job
    assert pipeline.status == "FAILED"
    assert pipeline.status_message == (
        "Stage 'evaluate' failed: in 'evaluate.ipynb', cell 3 raised ValueError: cannot "
        "evaluate in mode fail. The rest was stopped or skipped."
    )
    assert [stage.status for stage in pipeline.stages] == ["COMPLETED", "FAILED", "SKIPPED"]
    failing, watching = pipeline.stages[1].jobs
    assert failing.error is not None and failing.error.ename == "ValueError"
    assert watching.status == "STOPPED"
    assert watching.status_message == "Stopped because 'evaluate.ipynb' of stage 'evaluate' failed."
    assert pipeline.stages[2].jobs[0].job_id is None
    made = [job.job_id for stage in pipeline.stages[:2] for job in stage.jobs]
    names = {job["metadata"]["name"] for job in await kubernetes_jobs(k8s_api)}
    assert names <= {job_object_name(job_id) for job_id in made if job_id}  # the stopped one went
    assert not (home / "report.txt").exists()
    assert (home / SHARED_FOLDER / "data.txt").read_text() == "made by stage 1"

    # When she runs it again with mode: pass
    rerun = await pipelines.create(
        "alice", with_parameters(template, {"mode": "pass"}), notebooks=notebooks_json()
    )
    passed = await ended(pipelines, rerun.pipeline_id)

    # Then every stage completed, and stage 3's pod read stage 1's file from the shared
    # folder on her home claim
    assert passed.status == "COMPLETED", passed.status_message
    assert (home / "report.txt").read_text() == "made by stage 1, read by stage 3"
