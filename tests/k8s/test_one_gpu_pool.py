"""One GPU pool on Kubernetes: servers and research jobs draw from the same GPUs.

Server pods (GPUSpawner) and job pods (the job service's Kubernetes executor) carry the
same allocation record; the hub and the job service both rebuild the pool from the
cluster's node labels and pods, so a job never takes a class's reserved seats and the
admin's GPU map shows jobs beside servers. The spawners (with the hub's identity) and the
job service's capacity hook (with the job service's) run in this test process against the
real control plane.
"""

from __future__ import annotations

import asyncio
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from traitlets.config import Config

from gpuspawner.backends import cpu_only_plan
from gpuspawner.core.admission import GPUAdmission
from gpuspawner.core.allocation_record import (
    ALLOCATION_ANNOTATION,
    encode_allocation,
    pool_from_cluster,
)
from gpuspawner.gpu_map import gpu_map
from gpuspawner.policy import Allocation, load_catalog
from gpuspawner.spawners import kubernetes as hub_side
from gpuspawner.spawners.kubernetes import GPUSpawner
from jupyter_to_job import k8s_objects
from jupyter_to_job.executors.kubernetes import KubernetesExecutor
from jupyter_to_job.job_admission import JobGranted, JobTicket, JobWaits
from jupyter_to_job.service.flavor_admission import FlavorAdmission, IdentityBook
from tests.support.course_catalogs import window
from tests.support.k8s_spawners import make_gpu_spawner

pytestmark = pytest.mark.usefixtures("kubespawner_env")

NOW = datetime.now(UTC).replace(second=0, microsecond=0)
CLASS_END = NOW + timedelta(minutes=120)
STUDENTS = [f"student-{i:02d}" for i in range(40)]
RESEARCHERS = [f"researcher-{i:02d}" for i in range(20)]


def write_catalog(path: Path) -> Path:
    """ML101: 40 students at a quarter GPU, 10 seats reserved; a whole-GPU research flavor."""
    start = NOW - timedelta(minutes=10)
    path.write_text(
        textwrap.dedent(
            f"""\
            courses:
              - id: ml101
                title: ML101
                instructors: [teacher]
                enrolment: {{users: [{", ".join(STUDENTS)}]}}
                gpu: {{fraction: 1/4}}
                max_gpu_servers: 40
                reserved_seats: 10
                schedule:
                  timezone: UTC
                  term: {{first_day: {(NOW - timedelta(days=1)).date()}, last_day: {(NOW + timedelta(days=30)).date()}}}
                  windows:
                    - {window(start, CLASS_END)}
            flavors:
              - id: a100
                title: Whole GPU
                gpu: {{count: 1}}
                access: {{users: [{", ".join(RESEARCHERS)}]}}
            """
        )
    )
    return path


class JobService:
    """The job service's capacity hook over the cluster, with a clock the test moves."""

    def __init__(self, kubeconfig: Path, catalog: Path, root: Path):
        config = Config()
        config.KubernetesExecutor.kubeconfig = str(kubeconfig)
        config.KubernetesExecutor.namespace = "default"
        loaded = load_catalog(catalog)
        self.now = NOW
        self.capacity = FlavorAdmission(
            admission=GPUAdmission(fallback_catalog=loaded, target="kubernetes"),
            devices=[],
            identities=IdentityBook(root / "identities.json"),
            cluster=KubernetesExecutor.cluster_pool_reader(config),
            clock=lambda: self.now,
        )


def ticket(number: int) -> JobTicket:
    return JobTicket(f"job-{number:02d}", RESEARCHERS[number], "a100")


async def run_job_pod(core: client.CoreV1Api, job: JobTicket, grant: JobGranted) -> None:
    """What the Kubernetes executor does for a granted job: its Job's pod, with its record."""
    assert grant.gpu is not None
    manifest = k8s_objects.make_job(
        job_id=job.job_id,
        owner=job.owner,
        image="quay.io/jupyter/scipy-notebook:2025-01-06",
        plan=cpu_only_plan(),
        flavor=job.flavor,
        allocation=grant.gpu["allocation"],
        namespace="default",
    )
    template = manifest["spec"]["template"]
    spec = {**template["spec"], "volumes": []}
    spec["containers"] = [{**spec["containers"][0], "volumeMounts": []}]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**template["metadata"], "name": manifest["metadata"]["name"]},
        "spec": spec,
    }
    await core.create_namespaced_pod("default", pod)


def held_keys(pool: Any) -> set[str]:
    return set(pool.allocations)


@pytest.fixture(autouse=True)
def fresh_inventory():
    GPUSpawner._inventories.clear()
    yield
    GPUSpawner._inventories.clear()


def test_a_job_pod_carries_the_same_allocation_record_as_a_server_pod():
    # Given one allocation, as the policy records it for a job
    allocation = Allocation.from_dict(
        {
            "key": "job:0123",
            "owner": "rhea",
            "profile_id": "a100",
            "course_id": None,
            "device_ids": ["gpu-node-0/0"],
            "fraction": "1/1",
            "memory_mib": 81920,
            "compute_min_pct": 0,
        }
    )
    # When the job's manifest is built
    job = k8s_objects.make_job(
        job_id="0123",
        owner="rhea",
        image="img",
        plan=cpu_only_plan(),
        allocation=allocation.to_dict(),
    )
    # Then its pod template carries the server pods' annotation, in the same format
    assert hub_side.ALLOCATION_ANNOTATION == ALLOCATION_ANNOTATION
    assert k8s_objects.ALLOCATION_ANNOTATION == ALLOCATION_ANNOTATION
    record = job["spec"]["template"]["metadata"]["annotations"][ALLOCATION_ANNOTATION]
    assert record == encode_allocation(allocation)
    assert record == (
        '{"compute_min_pct":0,"course_id":null,"device_ids":["gpu-node-0/0"],"fraction":"1/1",'
        '"key":"job:0123","memory_mib":81920,"owner":"rhea","profile_id":"a100",'
        '"session_end":null}'
    )


def test_the_pool_rebuilt_from_pods_holds_servers_and_jobs_but_not_ended_pods():
    # Given a node with two GPUs, a running server pod, a running job pod and an ended job pod
    node = {
        "metadata": {
            "name": "gpu-node-0",
            "labels": {
                "nvidia.com/gpu.count": "2",
                "nvidia.com/gpu.memory": "81920",
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
            },
        }
    }

    def pod(name: str, key: str, device: str, fraction: str, phase: str) -> dict[str, Any]:
        record = {
            "key": key,
            "owner": name,
            "profile_id": "p",
            "course_id": None,
            "device_ids": [device],
            "fraction": fraction,
            "memory_mib": 1024,
            "compute_min_pct": 0,
        }
        return {
            "metadata": {
                "name": name,
                "annotations": {ALLOCATION_ANNOTATION: encode_allocation(record)},
            },
            "status": {"phase": phase},
        }

    pods = [
        pod("ana", "server:ana/", "gpu-node-0/0", "1/4", "Running"),
        pod("rhea", "job:1", "gpu-node-0/1", "1/1", "Running"),
        pod("old", "job:0", "gpu-node-0/0", "1/1", "Succeeded"),
        {"metadata": {"name": "plain"}, "status": {"phase": "Running"}},
    ]
    # When the pool is rebuilt from them
    pool, warnings = pool_from_cluster([node], pods)
    # Then it holds the server's and the running job's slices, and nothing is overbooked
    assert warnings == []
    assert held_keys(pool) == {"server:ana/", "job:1"}
    assert [slot.fraction for slot in pool.usage().values()] == [0.25, 1]


async def test_a_class_holds_its_reserved_seats_against_research_jobs_across_a_restart(
    k8s_controls, job_service_kubeconfig, k8s_api, tmp_path
):
    # Given 10 GPUs shared four ways, ML101 open with 10 of its 40 seats reserved,
    # and the job service reading the same cluster
    k8s_controls.add_gpu_nodes(10, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})
    catalog = write_catalog(tmp_path / "catalog.yaml")
    core = client.CoreV1Api(k8s_api)
    service = JobService(job_service_kubeconfig, catalog, tmp_path)
    await service.capacity.refresh_from_cluster()
    assert len(service.capacity.devices) == 10

    # When 20 researchers each submit a whole-GPU job
    started: list[JobTicket] = []
    waiting: dict[str, str] = {}
    for number in range(20):
        job = ticket(number)
        decision = service.capacity.acquire(job)
        if isinstance(decision, JobGranted):
            await run_job_pod(core, job, decision)
            started.append(job)
        else:
            assert isinstance(decision, JobWaits)
            waiting[job.job_id] = decision.reason

    # Then 7 start and 13 wait, saying the class's seats are reserved
    assert len(started) == 7
    assert len(waiting) == 13
    assert all("ML101" in reason for reason in waiting.values()), waiting

    # And the class's 10 reserved seats are still there for its students
    students = [make_gpu_spawner(name, catalog) for name in STUDENTS[:10]]
    await asyncio.gather(*(s.start() for s in students))
    hub_pool = students[0].capacity_pool
    assert held_keys(hub_pool) == {
        *(f"job:{job.job_id}" for job in started),
        *(s.allocation_key for s in students),
    }

    # And the admin's GPU map shows the jobs beside the servers
    bars = gpu_map(hub_pool, viewer="admin", admin=True)
    tooltips = [segment.tooltip for bar in bars for segment in bar.segments]
    assert sum("a100 job" in tip for tip in tooltips) == 7
    assert sum("ml101 server" in tip for tip in tooltips) == 10

    # When the hub and the job service restart in the middle of the class
    GPUSpawner._inventories.clear()
    restarted = JobService(job_service_kubeconfig, catalog, tmp_path)
    for job in started:  # what the manager's reconcile hands back from its store
        restarted.capacity.restore(job, None)
    warnings = await restarted.capacity.refresh_from_cluster()
    late = make_gpu_spawner(STUDENTS[10], catalog)
    await late.ensure_inventory()

    # Then both rebuild one pool: the same 17 slices, nothing lost or double-booked
    expected = held_keys(hub_pool)
    assert warnings == []
    with restarted.capacity.current_pool() as job_pool:
        assert held_keys(job_pool) == expected
    assert held_keys(late.capacity_pool) == expected
    # And a waiting job still waits for the reserved seats
    assert isinstance(restarted.capacity.acquire(ticket(7)), JobWaits)

    # When the class ends and its students' servers stop
    await asyncio.gather(*(s.stop() for s in students))
    restarted.now = CLASS_END + timedelta(minutes=1)
    await restarted.capacity.refresh_from_cluster()

    # Then the waiting jobs start on the GPUs the class used, until the GPUs are full
    after_class = [restarted.capacity.acquire(ticket(n)) for n in range(7, 20)]
    granted = [d for d in after_class if isinstance(d, JobGranted)]
    assert len(granted) == 3
    assert all("All GPUs are taken" in d.reason for d in after_class[3:])  # type: ignore[union-attr]


async def test_the_hub_counts_a_job_that_starts_or_ends_after_it_read_the_cluster(
    k8s_controls, job_service_kubeconfig, k8s_api, tmp_path
):
    # Given a hub that has read the cluster (2 GPUs, no jobs yet) and the job service
    k8s_controls.add_gpu_nodes(2, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})
    catalog = write_catalog(tmp_path / "catalog.yaml")
    core = client.CoreV1Api(k8s_api)
    first = make_gpu_spawner(STUDENTS[0], catalog)
    await first.ensure_inventory()
    assert held_keys(first.capacity_pool) == set()
    service = JobService(job_service_kubeconfig, catalog, tmp_path)
    service.now = CLASS_END + timedelta(minutes=1)  # no reservation: the job may start
    await service.capacity.refresh_from_cluster()

    # When a research job starts on one GPU
    job = ticket(0)
    grant = service.capacity.acquire(job)
    assert isinstance(grant, JobGranted)
    await run_job_pod(core, job, grant)

    # Then the hub counts its slice at its next look, before the inventory refresh is due
    second = make_gpu_spawner(STUDENTS[1], catalog, job_slices_refresh_seconds=0)
    await second.ensure_inventory()
    assert held_keys(second.capacity_pool) == {"job:job-00"}

    # And when the job's pod is gone, the hub frees the slice at its next look
    pod_name = k8s_objects.job_object_name(job.job_id)
    await core.delete_namespaced_pod(pod_name, "default", grace_period_seconds=0)

    async def freed() -> bool:
        await second.ensure_inventory()
        return held_keys(second.capacity_pool) == set()

    for _ in range(200):  # the kubelet ends the pod in the background
        if await freed():
            break
        await asyncio.sleep(0.05)
    assert held_keys(second.capacity_pool) == set()
