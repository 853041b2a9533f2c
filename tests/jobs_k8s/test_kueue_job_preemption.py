"""Scenario: a class's servers preempt a research job in the cluster's Kueue queue, and the
Jobs panel says so.

Kueue v0.17.0 runs in the test cluster (the ``kueue`` fixture). The admins give research
jobs and the class's servers one ClusterQueue of GPU quota, in which servers come first:
they have a higher PriorityClass, and the ClusterQueue preempts lower-priority work for
them (``preemption.withinClusterQueue: LowerPriority``). The job service hands its Jobs
to the queue (``c.KubernetesExecutor.queue_name``) with its own identity; the class's
server is a GPUSpawner with the hub's (``kubespawner_env``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nbformat
from kubernetes_asyncio import client

from gpuspawner.core.admission import GPUAdmission
from gpuspawner.core.allocation_record import devices_from_nodes
from gpuspawner.policy import UserIdentity, load_catalog
from gpuspawner.spawners.kubernetes import GPUSpawner
from jupyter_to_job.k8s_objects import job_object_name
from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, DescribeJob, JobCheckpoint, JobStatus
from jupyter_to_job.service.flavor_admission import FlavorAdmission, IdentityBook
from tests.support import eventually
from tests.support.job_managers import ManagerFactory, finished
from tests.support.k8s_cluster import create_priority_class
from tests.support.k8s_job_pods import make_home_claim
from tests.support.k8s_spawners import make_gpu_spawner, write_class_catalog
from tests.support.kueue_queues import cluster_queue, condition, make_queues, workload_of
from tests.support.notebooks import notebook, wait_for_file

JOBS_QUEUE = "research-jobs"
SERVERS_QUEUE = "ml101-servers"
HANG_GUARD = 60.0  # seconds; no assertion is about time


async def whole_gpu_flavor(k8s_api: Any, tmp_path: Path) -> FlavorAdmission:
    """The job service's capacity: a one-GPU flavor, over the cluster's GPUs."""
    nodes = await client.CoreV1Api(k8s_api).list_node(_preload_content=False)
    devices = devices_from_nodes(json.loads(await nodes.read())["items"])
    path = tmp_path / "flavors.yaml"
    path.write_text(
        "flavors:\n  - {id: a100, title: Whole GPU, gpu: {count: 1}, access: {everyone: true}}\n"
    )
    identities = IdentityBook(tmp_path / "identities.json")
    identities.remember(UserIdentity("rhea"))
    return FlavorAdmission(
        admission=GPUAdmission(fallback_catalog=load_catalog(path), target="kubernetes"),
        devices=devices,
        identities=identities,
    )


async def class_servers_first(k8s_api: Any) -> None:
    """One GPU of quota shared by research jobs and ML101's servers, the servers first."""
    await create_priority_class(k8s_api, "class-servers", 1000)
    queue = cluster_queue("campus-gpus", 1, preemption={"withinClusterQueue": "LowerPriority"})
    await make_queues(k8s_api, queue, [JOBS_QUEUE, SERVERS_QUEUE])


async def a_class_server_starts(tmp_path: Path) -> GPUSpawner:
    """A student of ML101 starts a server in the class's queue (with the hub's identity)."""
    catalog = write_class_catalog(tmp_path / "class.yaml", ["ana"])
    server = make_gpu_spawner(
        "ana", catalog, kueue_queue_name=SERVERS_QUEUE, priority_class_name="class-servers"
    )
    await asyncio.wait_for(server.start(), HANG_GUARD)
    return server


async def suspended_by_the_queue(k8s_api: Any, job_id: str) -> None:
    """The job's Kubernetes Job is suspended again, its Workload evicted by a preemption."""
    response = await client.BatchV1Api(k8s_api).read_namespaced_job(
        job_object_name(job_id), "default", _preload_content=False
    )
    k8s_job = json.loads(await response.read())
    assert k8s_job["spec"]["suspend"] is True
    workload = await workload_of(k8s_api, k8s_job["metadata"]["uid"])
    assert condition(workload, "Evicted")["reason"] == "Preempted"


async def status_message(manager: JobManager, job_id: str, message: str) -> DescribeJob:
    return await eventually(
        lambda: (job := manager.describe(job_id)).status_message == message and job,
        what=f"the job's status message to be {message!r}",
    )


def cells_run(manager: JobManager, job_id: str) -> list[str]:
    log = manager.read_log(job_id).data
    return [line for line in log.splitlines() if line.startswith("[cell ")]


TRAINING = ("print('loading')", "print('trained')")


async def test_a_job_preempted_by_a_class_server_says_so_waits_and_runs_again_after_class(
    kueue: Any,
    job_pods: Any,
    make_k8s_manager: ManagerFactory,
    k8s_api: Any,
    kubespawner_env: Any,
    tmp_path: Path,
) -> None:
    # Given one GPU of quota shared by research jobs and ML101's servers, the servers
    # first, and Rhea's job running on it, in its second cell
    await class_servers_first(k8s_api)
    manager = await make_k8s_manager(queue_name=JOBS_QUEUE)
    manager.capacity = await whole_gpu_flavor(k8s_api, tmp_path)
    request = CreateJob(input_path="train.ipynb", output_formats=["ipynb"], flavor="a100")
    gate = tmp_path / "class-over"
    cells = notebook(TRAINING[0], wait_for_file(gate), TRAINING[1])
    job_id = (await manager.create("rhea", request, notebook=nbformat.writes(cells))).job_id
    await eventually(
        lambda: "[cell 0] loading" in manager.read_log(job_id).data, what="the job to run"
    )

    # When a student of ML101 starts a server in the class's queue
    server = await a_class_server_starts(tmp_path)

    # Then Kueue preempted the job for it, and the Jobs panel says so, in words, while the
    # job waits in its queue to run again
    preempted = (
        "The job was preempted: the cluster's GPU queue gave its GPU to a server of the class "
        "ml101, which comes first in the queue (a higher priority). It waits in the queue "
        "research-jobs and runs again from the start when a GPU is free; the log keeps what "
        "it did until then."
    )
    job = await status_message(manager, job_id, preempted)
    assert job.status is JobStatus.RUNNING
    assert preempted in manager.read_log(job_id).data
    await suspended_by_the_queue(k8s_api, job_id)

    # When the class is over (the server stops) and the gate the notebook waits for opens
    gate.touch()
    await server.stop(now=True)

    # Then the queue admits the job again, and it runs from the start and completes
    job = await finished(manager, job_id, timeout=HANG_GUARD)
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert (
        "---- run 2: the cluster's GPU queue admitted the job again, and it runs from the "
        "start ----" in manager.read_log(job_id).data
    )
    assert cells_run(manager, job_id)[-3:] == [
        "[cell 0] loading",
        "[cell 1] gate class-over opened",
        "[cell 2] trained",
    ]
    assert cells_run(manager, job_id).count("[cell 0] loading") == 2


async def test_a_preempted_job_with_a_checkpoint_goes_on_from_it_once_the_class_is_over(
    kueue: Any,
    job_pods: Any,
    make_k8s_manager: ManagerFactory,
    k8s_api: Any,
    kubespawner_env: Any,
    tmp_path: Path,
) -> None:
    # Given the same queue, and Rhea's job with a checkpoint folder in her home, running
    await class_servers_first(k8s_api)
    await make_home_claim(k8s_api, "claim-rhea")
    manager = await make_k8s_manager(
        queue_name=JOBS_QUEUE, home_pvc_name_template="claim-{username}"
    )
    manager.capacity = await whole_gpu_flavor(k8s_api, tmp_path)
    request = CreateJob(
        input_path="train.ipynb",
        output_formats=["ipynb"],
        flavor="a100",
        checkpoint=JobCheckpoint(folder="checkpoints", retries=2),
    )
    gate = tmp_path / "class-over"
    cells = notebook(TRAINING[0], wait_for_file(gate), TRAINING[1])
    job_id = (await manager.create("rhea", request, notebook=nbformat.writes(cells))).job_id
    await eventually(
        lambda: "[cell 0] loading" in manager.read_log(job_id).data, what="the job to run"
    )

    # When a class server preempts it
    server = await a_class_server_starts(tmp_path)

    # Then the Jobs panel says so, and that it goes on with its checkpoint folder
    await status_message(
        manager,
        job_id,
        "The job was preempted: the cluster's GPU queue gave its GPU to a server of the class "
        "ml101, which comes first in the queue (a higher priority). It waits in the queue "
        "research-jobs and runs again, with its checkpoint folder, when a GPU is free; the "
        "log keeps what it did until then.",
    )

    # When the class is over, the job's second attempt runs, with its checkpoint, and ends
    gate.touch()
    await server.stop(now=True)
    job = await finished(manager, job_id, timeout=HANG_GUARD)
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert (
        "---- attempt 2 of 3: the cluster's GPU queue gave its GPU to a server of the class "
        "ml101, which comes first in the queue (a higher priority); starting again from its "
        "checkpoint ----" in manager.read_log(job_id).data
    )
    assert manager.describe(job_id).attempt == 2
