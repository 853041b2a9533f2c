"""Scenarios: what the cluster's own controllers do to a job's Kubernetes Job, and what its
owner sees of it. The real Job controller holds a suspended Job's pod back and retries a
failed pod within ``backoffLimit`` (after its back-off of 10 s); the TTL controller
deletes a finished Job, and the garbage collector what the Job owns.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import nbformat
from kubernetes_asyncio import client

from jupyter_to_job.k8s_objects import job_object_name, job_selector
from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, JobStatus
from tests.support import eventually
from tests.support.job_managers import ManagerFactory, finished
from tests.support.notebooks import notebook


async def submit(manager: JobManager, *cells: str) -> str:
    request = CreateJob(input_path="train.ipynb", output_formats=["ipynb"])
    created = await manager.create("alice", request, notebook=nbformat.writes(notebook(*cells)))
    return created.job_id


async def listed(k8s_api: Any, path: str, job_id: str) -> list[dict[str, Any]]:
    """The job's objects at ``path`` (a collection in ``default``), as the admin sees them."""
    response = await k8s_api.call_api(
        path,
        "GET",
        query_params=[("labelSelector", job_selector(job_id))],
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    assert response.status == 200, await response.text()
    return list(json.loads(await response.read())["items"])


def seconds(earlier: str, later: str) -> float:
    """Seconds between two API timestamps (``2030-01-01T00:00:00Z``)."""
    return (datetime.fromisoformat(later) - datetime.fromisoformat(earlier)).total_seconds()


def cell_lines(manager: JobManager, job_id: str) -> list[str]:
    return [
        line for line in manager.read_log(job_id).data.splitlines() if line.startswith("[cell ")
    ]


async def test_a_finished_job_leaves_nothing_in_the_cluster_after_its_time_to_live(
    job_pods: Any, make_k8s_manager: ManagerFactory, k8s_api: Any
) -> None:
    # Given jobs whose Kubernetes Jobs live one second once finished
    manager = await make_k8s_manager(ttl_seconds_after_finished=1)

    # When a job completes
    job_id = await submit(manager, "print('done')")
    job = await finished(manager, job_id)
    assert job.status is JobStatus.COMPLETED, job.status_message
    log = manager.read_log(job_id).data

    # Then the cluster deletes its Job, and with it its pod and its ConfigMap
    async def nothing_left() -> bool:
        return not any(
            [
                await listed(k8s_api, "/apis/batch/v1/namespaces/default/jobs", job_id),
                await listed(k8s_api, "/api/v1/namespaces/default/pods", job_id),
                await listed(k8s_api, "/api/v1/namespaces/default/configmaps", job_id),
            ]
        )

    await eventually(nothing_left, what="the TTL controller and garbage collector to clean up")

    # And the job, its log and its result stay with the job service
    assert manager.describe(job_id).status is JobStatus.COMPLETED
    assert manager.read_log(job_id).data == log
    assert cell_lines(manager, job_id) == ["[cell 0] done"]


async def test_a_job_in_a_cluster_queue_waits_suspended_until_the_queue_admits_it(
    job_pods: Any, make_k8s_manager: ManagerFactory, k8s_api: Any
) -> None:
    # Given jobs handed to a Kueue queue (their Jobs are created suspended)
    manager = await make_k8s_manager(queue_name="ml101-jobs")

    # When a job is submitted
    job_id = await submit(manager, "print('admitted')")

    # Then it waits, saying for what, and the Job controller makes no pod for it
    waiting = "Waiting for the cluster's queue ml101-jobs to admit the job."
    await eventually(
        lambda: manager.describe(job_id).status_message == waiting, what="the waiting message"
    )
    [k8s_job] = await listed(k8s_api, "/apis/batch/v1/namespaces/default/jobs", job_id)
    assert k8s_job["spec"]["suspend"] is True
    assert await listed(k8s_api, "/api/v1/namespaces/default/pods", job_id) == []
    assert manager.describe(job_id).status is JobStatus.RUNNING

    # When the queue admits it (Kueue resumes the Job)
    await client.BatchV1Api(k8s_api).patch_namespaced_job(
        job_object_name(job_id), "default", {"spec": {"suspend": False}}
    )

    # Then it runs and completes
    job = await finished(manager, job_id)
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert cell_lines(manager, job_id) == ["[cell 0] admitted"]
    assert waiting in manager.read_log(job_id).data


async def test_a_failed_pod_is_run_again_within_the_backoff_limit_then_the_job_fails(
    job_pods: Any, make_k8s_manager: ManagerFactory, k8s_api: Any
) -> None:
    # Given a cluster whose admins let the Job controller run a failed pod once more
    manager = await make_k8s_manager(backoff_limit=1)

    # When a notebook that fails is submitted
    job_id = await submit(manager, "print('trying')", "1 / 0")
    job = await finished(manager, job_id)

    # Then it ran twice, on two pods, the second after the Job controller's back-off of
    # 10 s from the first one's end, and failed with its error
    pods = sorted(
        await listed(k8s_api, "/api/v1/namespaces/default/pods", job_id),
        key=lambda pod: pod["metadata"]["creationTimestamp"],
    )
    assert len(pods) == 2
    first_ended = pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
    second_made = pods[1]["metadata"]["creationTimestamp"]
    assert seconds(first_ended, second_made) >= 10
    assert job.status is JobStatus.FAILED
    assert job.status_message == "Cell 2 raised ZeroDivisionError: division by zero"
    assert cell_lines(manager, job_id).count("[cell 0] trying") == 2
    # and its log says that the second run is one, from the start
    log = manager.read_log(job_id).data
    first, second = (f"[job] pod {pod['metadata']['name']} started on" for pod in pods)
    again = "[job] ---- run 2 of 2: its pod failed, and the cluster runs the job again from the "
    assert log.index(first) < log.index("[cell 0] trying") < log.index(again) < log.index(second)
    [k8s_job] = await listed(k8s_api, "/apis/batch/v1/namespaces/default/jobs", job_id)
    conditions = {c["type"]: c for c in k8s_job["status"]["conditions"]}
    assert conditions["Failed"]["reason"] == "BackoffLimitExceeded"
