"""Scenarios: a Kubernetes job with a checkpoint whose container is ``OOMKilled``. When its
flavor sets ``oom_retry_memory`` the next attempt is a new Job (same job-id label, same
checkpoint folder, the larger memory as request and limit) that resumes from the
checkpoint and completes; without it the job fails once, saying to choose a flavor with
more memory.

The job's pods run the real runner as local processes (``PodProcesses``), the home PVC is
one local folder, and the node agent OOM-kills the container as a node's kubelet would
(exit 137, reason ``OOMKilled``); the flavor comes from a catalog through the job
service's own admission (``FlavorAdmission``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import nbformat
import pytest

from gpuspawner.backends import cpu_only_plan
from jupyter_to_job.k8s_objects import (
    JOB_ID_LABEL,
    PodCheckpoint,
    UserFiles,
    job_object_name,
    job_selector,
    make_configmap,
    make_job,
    run_pod_selector,
)
from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, JobCheckpoint, JobStatus
from jupyter_to_job.retries import no_more_memory
from tests.support import eventually
from tests.support.job_capacity import catalog_capacity
from tests.support.job_managers import finished
from tests.support.k8s_job_pods import PodProcesses
from tests.support.notebooks import notebook

CATALOG = """
flavors:
  - id: train-retry
    title: Training, retried with more memory
    resources: {cpu: 1, memory: 256Mi}
    oom_retry_memory: 1Gi
    access: {everyone: true}
  - id: train
    title: Training
    resources: {cpu: 1, memory: 256Mi}
    access: {everyone: true}
"""

# Prepares a checkpoint once; the first attempt then holds (as a cell allocating too much
# would) until the test has the kubelet OOM-kill its container; a later one finishes.
TRAIN = (
    "import json, os, pathlib, time\n"
    "folder = pathlib.Path(os.environ['JUPYTER_TO_JOB_CHECKPOINT_DIR'])\n"
    "attempt = int(os.environ['JUPYTER_TO_JOB_ATTEMPT'])\n"
    "checkpoint = folder / 'prepared.json'\n"
    "if not checkpoint.exists():\n"
    "    checkpoint.write_text(json.dumps({'by': attempt}))\n"
    "prepared = json.loads(checkpoint.read_text())\n"
    "print(f'attempt {attempt} goes on from the preparation of attempt {prepared[\"by\"]}')\n"
    "if attempt == 1:\n"
    "    (folder / 'held-1').touch()\n"
    "    while True:\n"
    "        time.sleep(0.05)\n"
    "print('trained')\n"
)


@pytest.fixture
def manager(home_claim_manager: JobManager, tmp_path: Path) -> JobManager:
    """The job service running Kubernetes Jobs in alice's home, its flavors from the catalog."""
    manager = home_claim_manager
    manager.capacity = catalog_capacity(tmp_path, CATALOG, ["alice"], target="kubernetes")
    return manager


@pytest.fixture
def checkpoints(pod_processes: PodProcesses) -> Path:
    """The checkpoint folder in alice's home, as the job's pods see it."""
    return pod_processes.claim_folder("default", "claim-alice") / "project" / "ckpt"


async def submit(manager: JobManager, flavor: str) -> str:
    request = CreateJob(
        input_path="project/train.ipynb",
        flavor=flavor,
        output_formats=["ipynb"],
        checkpoint=JobCheckpoint(folder="ckpt", retries=2),
    )
    created = await manager.create("alice", request, notebook=nbformat.writes(notebook(TRAIN)))
    return created.job_id


async def listed(k8s_api: Any, path: str, selector: str) -> list[dict[str, Any]]:
    response = await k8s_api.call_api(
        path,
        "GET",
        query_params=[("labelSelector", selector)],
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    return list(json.loads(await response.read())["items"])


async def oom_kill_first_attempt(
    k8s_api: Any, k8s_controls: Any, job_id: str, checkpoints: Path
) -> None:
    """Once the first attempt has its checkpoint, the kubelet OOM-kills its container."""
    await eventually(lambda: (checkpoints / "held-1").exists(), what="the first attempt held")
    [pod] = await listed(k8s_api, "/api/v1/namespaces/default/pods", run_pod_selector(job_id))
    k8s_controls.oom_kill("default", pod["metadata"]["name"])


def memory_of(job: dict[str, Any]) -> dict[str, str]:
    [container] = job["spec"]["template"]["spec"]["containers"]
    resources = container["resources"]
    return {"limit": resources["limits"]["memory"], "request": resources["requests"]["memory"]}


async def test_an_oomkilled_job_starts_again_as_a_new_job_with_more_memory_and_completes(
    manager: JobManager, k8s_api: Any, k8s_controls: Any, checkpoints: Path
) -> None:
    # Given a flavor of 256 MiB that allows a retry with 1 GiB, and a job with two retries
    job_id = await submit(manager, "train-retry")

    # When its container is OOM-killed after it wrote its checkpoint
    await oom_kill_first_attempt(k8s_api, k8s_controls, job_id, checkpoints)
    done = await finished(manager, job_id)

    # Then a new Job resumed from the checkpoint with 1 GiB and completed, as attempt 2 of 3
    assert done.status is JobStatus.COMPLETED, done.status_message
    assert (done.attempt, done.max_attempts) == (2, 3)
    log = manager.read_log(job_id).data
    assert (
        "[job] ---- attempt 2 of 3: the job ran out of its 256 MiB of memory; "
        "starting again with 1 GiB from its checkpoint ----"
    ) in log
    assert "attempt 2 goes on from the preparation of attempt 1" in log
    assert "trained" in log
    jobs = {
        job["metadata"]["name"]: job
        for job in await listed(
            k8s_api, "/apis/batch/v1/namespaces/default/jobs", job_selector(job_id)
        )
    }
    first, second = job_object_name(job_id), job_object_name(job_id, 1)
    assert set(jobs) == {first, second}
    assert memory_of(jobs[first]) == {"limit": "256Mi", "request": "256Mi"}
    assert memory_of(jobs[second]) == {"limit": "1Gi", "request": "1Gi"}
    assert jobs[second]["spec"]["backoffLimit"] == 1  # the retries left
    assert jobs[second]["metadata"]["labels"][JOB_ID_LABEL] == job_id
    [command_1], [command_2] = (
        [c["command"] for c in jobs[name]["spec"]["template"]["spec"]["containers"]]
        for name in (first, second)
    )
    assert command_1[-2:] == command_2[-2:] == ["--checkpoint-dir", command_1[-1]]
    assert command_1[-1].endswith("/project/ckpt")


async def test_without_oom_retry_memory_an_oomkilled_job_fails_once_saying_what_to_do(
    manager: JobManager, k8s_api: Any, k8s_controls: Any, checkpoints: Path
) -> None:
    # Given a flavor of 256 MiB without a retry with more memory
    job_id = await submit(manager, "train")

    # When its container is OOM-killed
    await oom_kill_first_attempt(k8s_api, k8s_controls, job_id, checkpoints)
    done = await finished(manager, job_id)

    # Then it failed on its first attempt, saying to choose a flavor with more memory
    assert done.status is JobStatus.FAILED
    assert done.attempt == 1
    assert done.error is not None and done.error.ename == "OutOfMemory"
    assert done.status_message is not None
    assert done.status_message.endswith(no_more_memory(None))
    jobs = await listed(k8s_api, "/apis/batch/v1/namespaces/default/jobs", job_selector(job_id))
    assert [job["metadata"]["name"] for job in jobs] == [job_object_name(job_id)]
    assert "---- attempt 2" not in manager.read_log(job_id).data


def test_the_job_of_a_later_run_is_named_apart_and_valid_kubernetes() -> None:
    # Given the second Job of a job with a checkpoint, after an out-of-memory kill
    job_id = "3f2a1b4c-0000-4000-8000-000000000001"
    home = {"name": "home", "persistentVolumeClaim": {"claimName": "claim-rhea"}}
    job = make_job(
        job_id=job_id,
        owner="rhea",
        image="jobs:1",
        plan=cpu_only_plan(),
        memory_bytes=48 * 1024**3,
        files=UserFiles(
            volumes=(home,),
            mounts=({"name": "home", "mountPath": "/home/jovyan"},),
            root="/home/jovyan",
            notebook_folder="project",
        ),
        checkpoint=PodCheckpoint(path="/home/jovyan/project/ckpt", retries=1),
        run=1,
    )
    configmap = make_configmap(job_id=job_id, owner="rhea", notebook=b"{}", spec="{}", run=1)

    # Then it and its ConfigMap carry the run in their name, and the pod mounts that one
    assert job["metadata"]["name"] == configmap["metadata"]["name"] == f"j2j-{job_id}-r1"
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    assert volumes["job-files"]["configMap"]["name"] == f"j2j-{job_id}-r1"
    assert job["metadata"]["labels"][JOB_ID_LABEL] == job_id
    assert memory_of(job) == {"limit": "48Gi", "request": "48Gi"}
    # and a long job id still leaves room for the pods' names (at most 52 characters)
    assert len(job_object_name("x" * 80, 12)) <= 52
    assert job_object_name("x" * 80, 12).endswith("-r12")
    # and both are valid Kubernetes, for every release the hub supports
    for version in ("1.32", "1.33", "1.34"):
        kubernetes_validate.validate(job, version, strict=True)
        kubernetes_validate.validate(configmap, version, strict=True)
