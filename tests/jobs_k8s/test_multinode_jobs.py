"""Scenarios: a job on two nodes of two GPUs each (issue 28) on the test cluster.

The real Job controller runs the Indexed Job and names its pods; the real scheduler places
them one per node; the node agent runs each pod's runner as a local process with the
namespace's hosts file as its ``/etc/hosts`` (what CoreDNS gives a headless Service's pods:
rank 0's name ``<job>-0.<job>`` resolves to its pod's address). The notebook does an
all-reduce over TCP through ``MASTER_ADDR``/``MASTER_PORT`` in plain Python; the
``torch.distributed`` (gloo) variant runs where torch is installed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
from kubernetes_asyncio import client

from gpuspawner.core.admission import GPUAdmission
from gpuspawner.core.allocation_record import devices_from_nodes
from gpuspawner.policy import UserIdentity, load_catalog
from jupyter_to_job.k8s_objects import job_object_name, job_selector
from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, JobCheckpoint, JobStatus
from jupyter_to_job.service.flavor_admission import FlavorAdmission, IdentityBook
from tests.support import eventually
from tests.support.job_managers import ManagerFactory, finished
from tests.support.k8s_job_pods import JOB_PODS, PodProcesses, kill_kernels, make_home_claim
from tests.support.kueue_queues import (
    cluster_queue,
    condition,
    make_queues,
    set_gpu_quota,
    workload_of,
)
from tests.support.notebooks import notebook, wait_for_file

RANKS = """\
import os
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
print(f"rank {rank} of {world} (node rank {os.environ['NODE_RANK']}, "
      f"{os.environ['LOCAL_WORLD_SIZE']} GPUs here, {os.environ['NNODES']} nodes)")"""

# Each rank adds rank + 1; rank 0 gathers over TCP at MASTER_ADDR:MASTER_PORT, sends the sum
# back. Rank 1 tries until rank 0 listens (no deadline: the test's guard bounds the job).
ALL_REDUCE = """\
import socket, time
master = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
mine = rank + 1
if rank == 0:
    with socket.create_server((socket.gethostbyname(master[0]), master[1])) as server:
        total, peers = mine, []
        while len(peers) < world - 1:
            peer, _ = server.accept()
            peers.append(peer)
            total += int(peer.recv(64))
        for peer in peers:
            peer.sendall(str(total).encode())
            peer.close()
else:
    while True:
        try:
            peer = socket.create_connection(master)
            break
        except OSError:
            time.sleep(0.1)
    with peer:
        peer.sendall(str(mine).encode())
        total = int(peer.recv(64))
print(f"all-reduce over {master[0]}: {total}")"""

TORCH_ALL_REDUCE = """\
import torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="env://")
value = torch.tensor([rank + 1])
dist.all_reduce(value)
print(f"gloo all-reduce: {int(value)}")
dist.destroy_process_group()"""


@pytest.fixture
def two_gpu_nodes(k8s_cluster: Any, k8s_controls: Any, pods_dir: Path) -> Any:
    """Two nodes of two simulated A100s, job pods running as local processes that see the
    cluster's names as their /etc/hosts."""
    k8s_controls.add_gpu_nodes(2, product="NVIDIA-A100-SXM4-80GB", gpu_count=2)
    processes = PodProcesses(
        match=JOB_PODS, workdir=pods_dir, hosts=k8s_cluster.agent.services.hosts_file
    )
    k8s_controls.run_processes(processes)
    yield k8s_controls
    kill_kernels(pods_dir)


async def two_by_two(k8s_api: Any, tmp_path: Path) -> FlavorAdmission:
    """The job service's capacity over the cluster's GPUs, with flavor ``two-by-two``:
    ``gpu: {count: 2, nodes: 2}``, open to everyone."""
    listing = await client.CoreV1Api(k8s_api).list_node(_preload_content=False)
    devices = devices_from_nodes(json.loads(await listing.read())["items"])
    path = tmp_path / "catalog.yaml"
    path.write_text(
        "flavors:\n  - {id: two-by-two, title: Four GPUs on two nodes, "
        "gpu: {count: 2, nodes: 2}, access: {everyone: true}}\n"
    )
    identities = IdentityBook(tmp_path / "identities.json")
    identities.remember(UserIdentity("alice"))
    return FlavorAdmission(
        admission=GPUAdmission(fallback_catalog=load_catalog(path), target="kubernetes"),
        devices=devices,
        identities=identities,
    )


async def submit(manager: JobManager, nb: nbformat.NotebookNode) -> str:
    request = CreateJob(input_path="train.ipynb", output_formats=["ipynb"], flavor="two-by-two")
    created = await manager.create("alice", request, notebook=nbformat.writes(nb))
    return created.job_id


async def job_pods_of(k8s_api: Any, job_id: str) -> list[dict[str, Any]]:
    response = await client.CoreV1Api(k8s_api).list_namespaced_pod(
        "default", label_selector=job_selector(job_id), _preload_content=False
    )
    return list(json.loads(await response.read())["items"])


def rank_lines(manager: JobManager, job_id: str, rank: int) -> list[str]:
    prefix = f"[rank {rank}] [cell "
    return [
        line.removeprefix(f"[rank {rank}] ")
        for line in manager.read_log(job_id).data.splitlines()
        if line.startswith(prefix)
    ]


async def submit_holding_checkpointed(manager: Any, tmp_path: Path) -> str:
    """Alice's job on two nodes with a checkpoint folder (2 retries), whose ranks both hold
    in their first attempt (until it is taken away: the gate never opens), once both are
    holding; its id."""
    hold = "if attempt == 1:\n    print('holding')\n" + "\n".join(
        "    " + line for line in wait_for_file(tmp_path / "never-opened").splitlines()
    )
    request = CreateJob(
        input_path="train.ipynb",
        output_formats=["ipynb"],
        flavor="two-by-two",
        checkpoint=JobCheckpoint(folder="checkpoints", retries=2),
    )
    cells = notebook(RANKS, ATTEMPT + "\n" + hold)
    job_id = (await manager.create("alice", request, notebook=nbformat.writes(cells))).job_id
    for rank in (0, 1):
        await eventually(
            lambda rank=rank: "[cell 1] holding" in rank_lines(manager, job_id, rank),
            what=f"rank {rank} to hold",
        )
    return job_id


async def test_two_ranks_on_two_nodes_find_each_other_and_all_reduce_their_ranks(
    two_gpu_nodes: Any, make_k8s_manager: ManagerFactory, k8s_api: Any, tmp_path: Path
) -> None:
    # Given a flavor of two nodes with two GPUs each
    manager = await make_k8s_manager()
    manager.capacity = await two_by_two(k8s_api, tmp_path)

    # When a notebook that all-reduces the ranks runs on it
    job_id = await submit(manager, notebook(RANKS, ALL_REDUCE))
    job = await finished(manager, job_id)

    # Then it completes, and each rank saw its place and the sum of both ranks (1 + 2)
    assert job.status is JobStatus.COMPLETED, job.status_message
    name = job_object_name(job_id)
    assert rank_lines(manager, job_id, 0) == [
        "[cell 0] rank 0 of 2 (node rank 0, 2 GPUs here, 2 nodes)",
        f"[cell 1] all-reduce over {name}-0.{name}: 3",
    ]
    assert rank_lines(manager, job_id, 1) == [
        "[cell 0] rank 1 of 2 (node rank 1, 2 GPUs here, 2 nodes)",
        f"[cell 1] all-reduce over {name}-0.{name}: 3",
    ]
    # And its two pods ran on two different nodes, each with two GPUs
    pods = await job_pods_of(k8s_api, job_id)
    assert len(pods) == 2
    assert len({pod["spec"]["nodeName"] for pod in pods}) == 2
    for pod in pods:
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        assert limits["nvidia.com/gpu"] == "2"
    # And the job holds four GPUs in the one pool, two on each node, and says it runs on two
    assert job.nodes == 2
    assert job.gpu is not None and job.gpu.description.startswith("2 nodes, each with 2 whole")
    held = sorted(device.split("/")[0] for device in job.gpu.device_ids)
    assert held == sorted(pod["spec"]["nodeName"] for pod in pods for _ in range(2))


async def test_deleting_rank_1s_pod_stops_rank_0_and_the_job_names_the_rank(
    two_gpu_nodes: Any, make_k8s_manager: ManagerFactory, k8s_api: Any, tmp_path: Path
) -> None:
    # Given a job on two nodes whose ranks both wait on a gate
    manager = await make_k8s_manager()
    manager.capacity = await two_by_two(k8s_api, tmp_path)
    gate = tmp_path / "never-opened"
    job_id = await submit(manager, notebook(RANKS, "print('waiting')\n" + wait_for_file(gate)))
    for rank in (0, 1):
        await eventually(
            lambda rank=rank: "[cell 1] waiting" in rank_lines(manager, job_id, rank),
            what=f"rank {rank} waiting",
        )

    # When rank 1's pod is deleted
    pods = {
        pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]: pod
        for pod in await job_pods_of(k8s_api, job_id)
    }
    rank_1 = pods["1"]
    await client.CoreV1Api(k8s_api).delete_namespaced_pod(rank_1["metadata"]["name"], "default")

    # Then the job fails, saying which rank failed where, and that the others were stopped
    job = await finished(manager, job_id)
    assert job.status is JobStatus.FAILED
    assert job.status_message is not None
    assert job.status_message.startswith(
        f"rank 1 (pod {rank_1['metadata']['name']} on {rank_1['spec']['nodeName']}) failed: "
        "its pod was deleted; the other ranks were stopped."
    ), job.status_message

    # And rank 0 did not run on: its pod is stopped by the Job controller
    async def rank_0_stopped() -> bool:
        remaining = [
            pod
            for pod in await job_pods_of(k8s_api, job_id)
            if pod["metadata"]["name"] == pods["0"]["metadata"]["name"]
        ]
        return (
            not remaining
            or bool(remaining[0]["metadata"].get("deletionTimestamp"))
            or (remaining[0]["status"].get("phase") in ("Failed", "Succeeded"))
        )

    await eventually(rank_0_stopped, what="rank 0's pod to be stopped")


async def test_the_torch_gloo_all_reduce_finds_the_rendezvous(
    two_gpu_nodes: Any, make_k8s_manager: ManagerFactory, k8s_api: Any, tmp_path: Path
) -> None:
    pytest.importorskip(
        "torch",
        reason="torch is not installed here (a 539 MB wheel the CI does not install); the "
        "plain-Python all-reduce above proves the same rendezvous",
    )
    manager = await make_k8s_manager()
    manager.capacity = await two_by_two(k8s_api, tmp_path)
    job_id = await submit(manager, notebook(RANKS, TORCH_ALL_REDUCE))
    job = await finished(manager, job_id)
    assert job.status is JobStatus.COMPLETED, job.status_message
    for rank in (0, 1):
        assert "[cell 1] gloo all-reduce: 3" in rank_lines(manager, job_id, rank)


JOBS_QUEUE = "research-jobs"


async def read_k8s_job(k8s_api: Any, job_id: str) -> dict[str, Any]:
    response = await client.BatchV1Api(k8s_api).read_namespaced_job(
        job_object_name(job_id), "default", _preload_content=False
    )
    return dict(json.loads(await response.read()))


async def test_under_kueue_both_pods_are_admitted_together_or_not_at_all(
    kueue: Any,
    two_gpu_nodes: Any,
    make_k8s_manager: ManagerFactory,
    k8s_api: Any,
    tmp_path: Path,
) -> None:
    # Given a job queue with quota for three GPUs, one fewer than a 2-node x 2-GPU job takes
    await make_queues(k8s_api, cluster_queue("campus-gpus", 3), [JOBS_QUEUE])
    manager = await make_k8s_manager(queue_name=JOBS_QUEUE)
    manager.capacity = await two_by_two(k8s_api, tmp_path)

    # When such a job is submitted
    job_id = await submit(manager, notebook(RANKS, ALL_REDUCE))

    # Then it waits in the queue as one Workload of both pods, and neither pod starts
    waiting = f"Waiting for the cluster's queue {JOBS_QUEUE} to admit the job."
    await eventually(
        lambda: manager.describe(job_id).status_message == waiting, what="the job to wait"
    )
    uid = (await read_k8s_job(k8s_api, job_id))["metadata"]["uid"]
    workload = await eventually(lambda: workload_of(k8s_api, uid), what="the job's Workload")
    assert [pod_set["count"] for pod_set in workload["spec"]["podSets"]] == [2]
    assert condition(workload, "QuotaReserved") is None
    assert await job_pods_of(k8s_api, job_id) == []

    # When the admins raise the quota to four GPUs
    await set_gpu_quota(k8s_api, "campus-gpus", 4)

    # Then both pods start on that one admission, and both ranks all-reduce
    job = await finished(manager, job_id)
    assert job.status is JobStatus.COMPLETED, job.status_message
    for rank in (0, 1):
        assert rank_lines(manager, job_id, rank)[-1].endswith(": 3")
    admitted = await workload_of(k8s_api, uid)
    assert admitted is not None and condition(admitted, "Admitted") is not None
    assert [
        pod_set["count"] for pod_set in admitted["status"]["admission"]["podSetAssignments"]
    ] == [2]


ATTEMPT = """\
attempt = int(os.environ["JUPYTER_TO_JOB_ATTEMPT"])
print(f"rank {rank} attempt {attempt}")"""


async def test_a_job_with_a_checkpoint_taken_back_by_the_queue_resumes_with_both_ranks(
    kueue: Any,
    two_gpu_nodes: Any,
    make_k8s_manager: ManagerFactory,
    k8s_api: Any,
    tmp_path: Path,
) -> None:
    # Given a job on two nodes with a checkpoint folder in alice's home, both ranks running
    # and holding in their first attempt
    await make_queues(k8s_api, cluster_queue("campus-gpus", 4), [JOBS_QUEUE])
    await make_home_claim(k8s_api, "claim-alice")
    manager = await make_k8s_manager(
        queue_name=JOBS_QUEUE, home_pvc_name_template="claim-{username}"
    )
    manager.capacity = await two_by_two(k8s_api, tmp_path)
    job_id = await submit_holding_checkpointed(manager, tmp_path)

    # When the queue takes the job back (an admin deactivates its Workload), then lets it in
    uid = (await read_k8s_job(k8s_api, job_id))["metadata"]["uid"]
    workload = await workload_of(k8s_api, uid)
    assert workload is not None
    custom = client.CustomObjectsApi(k8s_api)
    name = workload["metadata"]["name"]

    async def set_active(active: bool) -> None:
        await custom.patch_namespaced_custom_object(
            "kueue.x-k8s.io",
            "v1beta2",
            "default",
            "workloads",
            name,
            {"spec": {"active": active}},
            _content_type="application/merge-patch+json",
        )

    await set_active(False)

    async def suspended() -> bool:
        return bool((await read_k8s_job(k8s_api, job_id))["spec"].get("suspend"))

    await eventually(suspended, what="the queue to suspend the Job")
    await set_active(True)

    # Then both ranks run again as attempt 2, from the same checkpoint folder, and it completes
    job = await finished(manager, job_id)
    assert job.status is JobStatus.COMPLETED, job.status_message
    for rank in (0, 1):
        lines = rank_lines(manager, job_id, rank)
        assert f"[cell 1] rank {rank} attempt 1" in lines
        assert f"[cell 1] rank {rank} attempt 2" in lines
    assert manager.describe(job_id).attempt == 2


async def test_the_job_ends_with_its_last_rank_not_with_rank_0(
    two_gpu_nodes: Any, make_k8s_manager: ManagerFactory, k8s_api: Any, tmp_path: Path
) -> None:
    # Given a job on two nodes whose rank 1 waits on a gate while rank 0 is done at once
    manager = await make_k8s_manager()
    manager.capacity = await two_by_two(k8s_api, tmp_path)
    gate = tmp_path / "rank-1-goes-on"
    later = "if rank == 1:\n" + "\n".join(
        "    " + line for line in wait_for_file(gate).splitlines()
    )
    job_id = await submit(manager, notebook(RANKS, later, "print(f'rank {rank} done')"))
    await eventually(
        lambda: "[cell 2] rank 0 done" in rank_lines(manager, job_id, 0), what="rank 0's end"
    )
    await eventually(
        lambda: (
            "[cell 0] rank 1 of 2 (node rank 1, 2 GPUs here, 2 nodes)"
            in rank_lines(manager, job_id, 1)
        ),
        what="rank 1 to run",
    )

    # Then the job still runs while rank 1 does
    assert manager.describe(job_id).status is JobStatus.RUNNING

    # When rank 1 goes on, the job completes with rank 1's lines to its end
    gate.touch()
    job = await finished(manager, job_id)
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert rank_lines(manager, job_id, 1)[-2:] == [
        "[cell 1] gate rank-1-goes-on opened",
        "[cell 2] rank 1 done",
    ]


async def test_a_rank_evicted_without_a_queue_runs_the_whole_job_again_from_its_checkpoint(
    two_gpu_nodes: Any, make_k8s_manager: ManagerFactory, k8s_api: Any, tmp_path: Path
) -> None:
    # Given a job on two nodes with a checkpoint folder in alice's home, both ranks holding
    # in their first attempt (no job queue)
    await make_home_claim(k8s_api, "claim-alice")
    manager = await make_k8s_manager(home_pvc_name_template="claim-{username}")
    manager.capacity = await two_by_two(k8s_api, tmp_path)
    job_id = await submit_holding_checkpointed(manager, tmp_path)

    # When rank 1's pod is evicted, as kubectl drain does
    rank_1 = next(
        pod
        for pod in await job_pods_of(k8s_api, job_id)
        if pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "1"
    )
    name = rank_1["metadata"]["name"]
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
    response = await client.CoreV1Api(k8s_api).create_namespaced_pod_eviction(
        name, "default", eviction, _preload_content=False
    )
    assert response.status == 201, await response.text()

    # Then the whole job runs again, both ranks as attempt 2 from the checkpoint folder, and
    # its log says why between the attempts
    job = await finished(manager, job_id)
    assert job.status is JobStatus.COMPLETED, job.status_message
    for rank in (0, 1):
        lines = rank_lines(manager, job_id, rank)
        assert f"[cell 1] rank {rank} attempt 1" in lines
        assert f"[cell 1] rank {rank} attempt 2" in lines
    assert (
        "---- attempt 2 of 3: its pod was evicted (its node was drained, or an admin evicted "
        "it); starting again from its checkpoint ----" in manager.read_log(job_id).data
    )
    assert manager.describe(job_id).attempt == 2


async def test_a_restarted_service_follows_both_ranks_on_and_the_job_completes(
    two_gpu_nodes: Any, make_k8s_manager: ManagerFactory, k8s_api: Any, tmp_path: Path
) -> None:
    # Given a job on two nodes whose ranks both wait on a gate, each having written its lines
    gate = tmp_path / "gate"
    root = tmp_path / "root"
    manager = await make_k8s_manager(root=root)
    manager.capacity = await two_by_two(k8s_api, tmp_path)
    job_id = await submit(
        manager,
        notebook(RANKS, "print('waiting')\n" + wait_for_file(gate), "print('after the restart')"),
    )
    for rank in (0, 1):
        await eventually(
            lambda rank=rank: "[cell 1] waiting" in rank_lines(manager, job_id, rank),
            what=f"rank {rank} waiting",
        )

    # When the job service stops (the Job runs on) and a new one starts on the same store
    await manager.shutdown()
    second = await make_k8s_manager(root=root)
    second.capacity = await two_by_two(k8s_api, tmp_path)
    assert second.reconcile_report is not None and second.reconcile_report.adopted == [job_id]
    gate.touch()
    job = await finished(second, job_id)

    # Then the job completes, and each rank's lines are in the log exactly once: both logs
    # were read on from where the first service stopped
    assert job.status is JobStatus.COMPLETED, job.status_message
    for rank in (0, 1):
        assert rank_lines(second, job_id, rank) == [
            f"[cell 0] rank {rank} of 2 (node rank {rank}, 2 GPUs here, 2 nodes)",
            "[cell 1] waiting",
            "[cell 1] gate gate opened",
            "[cell 2] after the restart",
        ]
    log = second.read_log(job_id).data
    assert "[job] the job service restarted; following Kubernetes Job" in log
