"""KAI-scheduler for real: GPU fractions placed by it, and servers waiting in its queues.

KAI-scheduler v0.12.0 runs in the test cluster (the ``kai`` fixture, tests/support/cluster/
kai.py): its CRDs, RBAC, PriorityClasses and default queues from its chart, its admission,
pod group and queue webhooks, its podgrouper, pod group and queue controllers, binder and
scheduler, with GPU sharing on. The node runs the reservation pods KAI's binder makes for
each shared GPU, with the GPU the device plugin would give them.

The queues are made as hub_config/kubernetes/README.md's "KAI-scheduler" section shows: a
parent queue for the campus and one queue per course under it (KAI schedules only into
queues that have a parent). The spawners run in this test process with the hub's identity
(``kubespawner_env``), as in test_kueue_on_cluster.py; JupyterHub's part (cancelling a
spawn, then stop) is done by hand.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from gpuspawner.spawners.kubernetes import ALLOCATION_ANNOTATION, GPUSpawner
from gpuspawner.spawners.kueue import QUEUED_LABEL
from tests.support import kai_queues
from tests.support.cluster.control_plane import tools_folder
from tests.support.cluster.kai import GPU_INDEX_ANNOTATION, RESERVATION_NAMESPACE
from tests.support.k8s_cluster import wait_for
from tests.support.k8s_spawners import ProgressLog, make_gpu_spawner, write_class_catalog

HANG_GUARD = 90.0  # seconds; no assertion is about time
GPU_GROUP_LABEL = "runai-gpu-group"
KAI = ("scheduling.run.ai", "v2")
POD_GROUPS = ("scheduling.run.ai", "v2alpha2")
COURSE_QUEUE = "course-ml101"


@pytest.fixture(autouse=True)
def fresh_inventory():
    GPUSpawner._inventories.clear()
    yield
    GPUSpawner._inventories.clear()


# -- KAI's objects ------------------------------------------------------------------------


async def make_course_queue(k8s_api, gpus: float = -1) -> None:
    """The campus queue and, under it, ML101's with ``gpus`` GPUs of quota and limit."""
    await kai_queues.make_course_queue(k8s_api, COURSE_QUEUE, gpus)


async def unschedulable_reasons(k8s_controls, spawner) -> list[str] | None:
    """Why KAI has not placed her server, from its PodGroup (KAI's podgrouper names the
    PodGroup on the pod, its scheduler writes the reasons); None until it has."""
    pod = pod_of(k8s_controls, spawner) or {}
    name = (pod.get("metadata", {}).get("annotations") or {}).get("pod-group-name")
    group = name and k8s_controls.get("podgroups", name, "default", *POD_GROUPS)
    reasons = [
        reason["reason"]
        for condition in ((group or {}).get("status") or {}).get("schedulingConditions") or []
        for reason in condition.get("reasons") or []
    ]
    return reasons or None


def fraction_pod(name: str, fraction: str) -> dict:
    """A pod as KAI's GPU-sharing docs make one (gpu-sharing.yaml): a fraction of a GPU."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"kai.scheduler/queue": "default-queue"},
            "annotations": {"gpu-fraction": fraction},
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "notebook", "image": "registry.k8s.io/pause:3.10"}],
        },
    }


async def environment(kubeconfig: Path, pod: str) -> dict[str, str]:
    """The environment of ``pod``'s container, as ``kubectl exec ... -- env`` prints it."""
    process = await asyncio.create_subprocess_exec(
        str(tools_folder() / "kubectl"),
        f"--kubeconfig={kubeconfig}",
        "exec",
        pod,
        "--",
        "env",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return dict(line.split("=", 1) for line in out.decode().splitlines() if "=" in line)


# -- the hub's side ------------------------------------------------------------------------


def kai_spawner(name: str, catalog: Path, **traits) -> GPUSpawner:
    """A hub's spawner on a KAI cluster: the ``kai`` back end, one KAI queue per course."""
    return make_gpu_spawner(
        name,
        catalog,
        sharing_backend="kai",
        sharing_backend_config={"queue": "course-{course}"},
        **traits,
    )


def pod_of(k8s_controls, spawner) -> dict | None:
    return k8s_controls.get("pods", spawner.pod_name, "default")


def waiting(k8s_controls, spawner) -> bool:
    """Her pod exists and KAI has not bound it."""
    pod = pod_of(k8s_controls, spawner)
    return bool(pod and not pod["spec"].get("nodeName"))


def place(log: ProgressLog) -> tuple[int, int] | None:
    """The place the spawn page shows now: (position, of how many)."""
    found = re.search(r"position (\d+) of (\d+),", log.last("Waiting in the GPU queue") or "")
    return (int(found[1]), int(found[2])) if found else None


async def until_place(log: ProgressLog, position: int, total: int) -> str:
    def current() -> str | None:
        return log.last("Waiting in the GPU queue") if place(log) == (position, total) else None

    return await wait_for(
        current, timeout=HANG_GUARD, what=f"progress shows position {position} of {total}"
    )


async def places_shown(logs: dict, total: int) -> dict:
    """Each waiting spawner's place, once every one of them shows a place of ``total``."""

    def all_shown() -> dict | None:
        shown = {spawner: place(log) for spawner, log in logs.items()}
        if all(found and found[1] == total for found in shown.values()):
            return {spawner: found[0] for spawner, found in shown.items()}
        return None

    return await wait_for(all_shown, timeout=HANG_GUARD, what=f"every place of {total} shown")


async def join_the_queue(k8s_controls, spawners) -> tuple[dict, dict]:
    """Start ``spawners`` at once; their starts and progress logs, once each pod waits."""
    starts = {spawner: spawner.start() for spawner in spawners}
    logs = {spawner: ProgressLog(spawner) for spawner in spawners}
    for spawner in spawners:
        await wait_for(
            lambda s=spawner: waiting(k8s_controls, s), timeout=HANG_GUARD, what="waiting in KAI"
        )
    return starts, logs


async def leave(starts: dict, spawners) -> None:
    """What JupyterHub does for students who cancel their start: cancel, then stop."""
    for spawner in spawners:
        starts[spawner].cancel()
    await asyncio.gather(*(starts[s] for s in spawners), return_exceptions=True)
    await asyncio.gather(*(s.stop(now=True) for s in spawners))


# -- scenarios ------------------------------------------------------------------------------


async def test_quarter_gpus_are_placed_by_kai_four_to_a_gpu_each_told_its_gpu(
    kai, k8s_controls, k8s_api
):
    # Given a node with two GPUs, and KAI as the scheduler
    node = k8s_controls.add_gpu_nodes(1, gpu_count=2)[0]
    core = client.CoreV1Api(k8s_api)

    # When five pods each ask KAI for a quarter of a GPU
    names = [f"quarter-{i}" for i in range(5)]
    for name in names:
        await core.create_namespaced_pod("default", fraction_pod(name, "0.25"))

    # Then KAI binds all five (its binder, through BindRequests) and they run: four share
    # one GPU (packed, as its binpack placement does) and the fifth has the other
    def all_running() -> list[dict] | None:
        pods = [k8s_controls.get("pods", name, "default") for name in names]
        return pods if all(p and p["status"].get("phase") == "Running" for p in pods) else None

    pods = await wait_for(all_running, timeout=HANG_GUARD, what="five fractions running")
    assert {pod["spec"]["nodeName"] for pod in pods} == {node}
    assert {pod["spec"].get("runtimeClassName") for pod in pods} == {"nvidia"}  # KAI's admission
    groups = [pod["metadata"]["labels"][GPU_GROUP_LABEL] for pod in pods]
    assert sorted(groups.count(group) for group in set(groups)) == [1, 4]

    # And each GPU is held by one reservation pod, on its own GPU of the node, and every
    # fraction's container is told the GPU its group holds (NVIDIA_VISIBLE_DEVICES, from
    # the ConfigMap KAI's binder fills) and its portion of it
    listed = await core.list_namespaced_pod(RESERVATION_NAMESPACE, _preload_content=False)
    reservations = (await listed.json())["items"]
    assert len(reservations) == 2
    held = {
        pod["metadata"]["labels"][GPU_GROUP_LABEL]: pod["metadata"]["annotations"][
            GPU_INDEX_ANNOTATION
        ]
        for pod in reservations
    }
    assert set(held) == set(groups) and len(set(held.values())) == 2
    assert {pod["spec"]["nodeName"] for pod in reservations} == {node}
    for name, group in zip(names, groups, strict=True):
        env = await environment(k8s_controls.kubeconfig, name)
        assert env["NVIDIA_VISIBLE_DEVICES"] == held[group]
        assert env["GPU_PORTION"] == "0.25"

    # When the lone fraction ends, its GPU's reservation goes with it
    await core.delete_namespaced_pod(
        names[groups.index(next(g for g in groups if groups.count(g) == 1))],
        "default",
        grace_period_seconds=0,
    )

    async def one_reservation() -> bool:
        listed = await core.list_namespaced_pod(RESERVATION_NAMESPACE, _preload_content=False)
        alive = [
            p for p in (await listed.json())["items"] if not p["metadata"].get("deletionTimestamp")
        ]
        return len(alive) == 1

    await wait_for(one_reservation, timeout=HANG_GUARD, what="the freed GPU's reservation gone")


async def test_servers_beyond_their_kai_queues_limit_wait_with_their_places_and_go_in_order(
    kai, kubespawner_env, k8s_controls, k8s_api, tmp_path
):
    # Given one GPU, and ML101's KAI queue limited to half of a GPU: two quarters
    k8s_controls.add_gpu_nodes(1, gpu_count=1)
    await make_course_queue(k8s_api, gpus=0.5)
    names = ["ana", "ben", "zoe", "ada"]
    catalog = write_class_catalog(tmp_path / "c.yaml", names)
    spawners = {name: kai_spawner(name, catalog) for name in names}
    ana, ben, zoe, ada = spawners.values()

    # When Ana and Ben start, they run: KAI placed both quarters on the GPU
    await asyncio.wait_for(asyncio.gather(ana.start(), ben.start()), HANG_GUARD)
    for spawner in (ana, ben):
        pod = pod_of(k8s_controls, spawner)
        assert pod["metadata"]["labels"]["kai.scheduler/queue"] == COURSE_QUEUE
        assert pod["metadata"]["annotations"]["gpu-fraction"] == "0.25"
        assert pod["status"]["phase"] == "Running"

    # When Zoe and Ada start at once, although the GPU still has room for both
    starts, logs = await join_the_queue(k8s_controls, [zoe, ada])

    # Then neither is refused nor placed: KAI keeps both in the course's queue (its limit
    # is reached), and their spawn pages show places 1 and 2 of 2, in the order KAI will
    # take them (KAI orders PodGroups made in the same second by name)
    for spawner in (zoe, ada):
        reasons = await wait_for(
            lambda s=spawner: unschedulable_reasons(k8s_controls, s),
            timeout=HANG_GUARD,
            what="KAI's reasons on her PodGroup",
        )
        assert reasons == ["OverLimit"]

    shown = await places_shown(logs, 2)
    first, second = sorted((zoe, ada), key=shown.get)
    assert [shown[first], shown[second]] == [1, 2]
    line = logs[first].last("Waiting in the GPU queue")
    assert re.search(r"position 1 of 2, about \d+ (hour|minute)", line), line
    assert not any(start.done() for start in starts.values())

    # When Ana stops, the first in line is placed by KAI and starts, and the second moves up
    await ana.stop()
    await asyncio.wait_for(starts[first], HANG_GUARD)
    assert pod_of(k8s_controls, first)["status"]["phase"] == "Running"
    await wait_for(
        lambda: "Admitted from the GPU queue" in logs[first].messages,
        timeout=HANG_GUARD,
        what="her progress says she was admitted",
    )
    assert not starts[second].done()
    await until_place(logs[second], 1, 1)

    # When the second leaves the queue, her pod and PodGroup are gone
    await leave(starts, [second])
    assert pod_of(k8s_controls, second) is None

    for log in logs.values():
        await log.close()
    await asyncio.gather(*(s.stop(now=True) for s in (ben, first)))


async def test_a_server_the_gpus_have_no_room_for_waits_in_kai_and_lands_where_a_slice_frees(
    kai, kubespawner_env, k8s_controls, k8s_api, tmp_path
):
    # Given one GPU held by four students at a quarter each, in a course queue with no limit
    k8s_controls.add_gpu_nodes(1, gpu_count=1)
    await make_course_queue(k8s_api)
    names = [f"s{i}" for i in range(5)]
    catalog = write_class_catalog(tmp_path / "c.yaml", names)
    running = [kai_spawner(name, catalog) for name in names[:4]]
    await asyncio.wait_for(asyncio.gather(*(s.start() for s in running)), HANG_GUARD)
    late = kai_spawner(names[4], catalog)

    # When a fifth starts: the hub's pool is full, so she joins KAI's queue without a slice
    starts, logs = await join_the_queue(k8s_controls, [late])
    await until_place(logs[late], 1, 1)
    pod = pod_of(k8s_controls, late)
    assert pod["metadata"]["labels"][QUEUED_LABEL] == "true"
    assert ALLOCATION_ANNOTATION not in pod["metadata"]["annotations"]
    assert len(running[0].capacity_pool.allocations) == 4

    # When a student stops, KAI places her on the quarter he freed, and the hub books that
    # slice for her and records it on her pod
    await running[0].stop()
    await asyncio.wait_for(starts[late], HANG_GUARD)
    pod = pod_of(k8s_controls, late)
    assert pod["status"]["phase"] == "Running" and QUEUED_LABEL not in pod["metadata"]["labels"]
    recorded = json.loads(pod["metadata"]["annotations"][ALLOCATION_ANNOTATION])
    assert recorded["device_ids"] == [f"{pod['spec']['nodeName']}/0"]
    assert recorded["fraction"] == "1/4"
    assert len(late.capacity_pool.allocations) == 4

    await logs[late].close()
    await asyncio.gather(*(s.stop(now=True) for s in [*running[1:], late]))


async def test_twelve_students_on_two_gpus_at_a_quarter_eight_run_four_wait_in_kai_and_go_in_order(
    kai, kubespawner_env, k8s_controls, k8s_api, tmp_path
):
    # Given two GPU nodes of one GPU each, KAI as their scheduler, ML101's KAI queue with no
    # limit, and a class of twelve students at a quarter of a GPU each (the last to be
    # admitted waits for four servers to stop: a start_timeout long enough for that)
    nodes = k8s_controls.add_gpu_nodes(2, gpu_count=1)
    await make_course_queue(k8s_api)
    names = [f"student-{i:02d}" for i in range(12)]
    catalog = write_class_catalog(tmp_path / "c.yaml", names)
    running = [kai_spawner(name, catalog, start_timeout=600) for name in names[:8]]
    waiting = [kai_spawner(name, catalog, start_timeout=600) for name in names[8:]]

    # When eight start at once, they all run: KAI placed four quarters on each GPU
    await asyncio.wait_for(asyncio.gather(*(s.start() for s in running)), HANG_GUARD)
    pods = [pod_of(k8s_controls, spawner) for spawner in running]
    assert all(pod["status"]["phase"] == "Running" for pod in pods)
    assert sorted(pod["spec"]["nodeName"] for pod in pods) == sorted(nodes * 4)
    pool = running[0].capacity_pool
    assert len(pool.allocations) == 8 and all(u.fraction == 1 for u in pool.usage().values())

    # When four more start at once
    starts, logs = await join_the_queue(k8s_controls, waiting)

    # Then none is refused: the GPUs are full, so each waits in KAI's queue unbound and
    # without a slice booked, and the spawn pages show places 1 to 4 of 4 (the order KAI
    # takes them in, from their PodGroups), each with an expected wait
    places = await places_shown(logs, 4)
    assert sorted(places.values()) == [1, 2, 3, 4]
    for spawner in waiting:
        pod = pod_of(k8s_controls, spawner)
        assert not pod["spec"].get("nodeName") and pod["metadata"]["labels"][QUEUED_LABEL]
        assert ALLOCATION_ANNOTATION not in pod["metadata"]["annotations"]
        line = logs[spawner].last("Waiting in the GPU queue")
        assert re.search(r"of 4, about \d+ (hour|minute)", line), line
    assert not any(start.done() for start in starts.values())
    assert len(pool.allocations) == 8  # the waiting book nothing
    in_line = sorted(waiting, key=places.get)

    # When servers stop one after the other: each that stops lets the first in line in, on
    # the quarter it freed (KAI places her there, and the hub books that slice for her),
    # and everyone behind moves up one place
    for step, stopping in enumerate(running[:4]):
        first, behind = in_line[step], in_line[step + 1 :]
        freed_node = pod_of(k8s_controls, stopping)["spec"]["nodeName"]
        await stopping.stop()
        await asyncio.wait_for(starts[first], HANG_GUARD)
        pod = pod_of(k8s_controls, first)
        assert pod["status"]["phase"] == "Running" and pod["spec"]["nodeName"] == freed_node
        recorded = json.loads(pod["metadata"]["annotations"][ALLOCATION_ANNOTATION])
        assert recorded["device_ids"] == [f"{freed_node}/0"]
        await wait_for(
            lambda f=first: "Admitted from the GPU queue" in logs[f].messages,
            timeout=HANG_GUARD,
            what="her progress says she was admitted",
        )
        assert not any(starts[spawner].done() for spawner in behind)
        for position, spawner in enumerate(behind, start=1):
            await until_place(logs[spawner], position, len(behind))

    # Then the queue is empty, and the pool and the pods agree: eight quarters, both full
    now_running = [*running[4:], *waiting]
    assert sorted(pod_of(k8s_controls, s)["spec"]["nodeName"] for s in now_running) == sorted(
        nodes * 4
    )
    assert len(pool.allocations) == 8 and all(u.fraction == 1 for u in pool.usage().values())

    for log in logs.values():
        await log.close()
    await asyncio.gather(*(s.stop(now=True) for s in now_running))
