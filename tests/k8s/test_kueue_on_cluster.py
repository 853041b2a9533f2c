"""GPUSpawner with Kueue: students wait in a fair queue with a visible place, not refused.

Kueue v0.17.0 runs in the test cluster (the ``kueue`` fixture: its CRDs, webhooks and
controller, with the ``pod`` and ``batch/job`` integrations). Each scenario makes the
queues as a cluster admin would (tests/support/kueue_queues.py, as
hub_config/kubernetes/README.md's "Kueue" section describes them): a ResourceFlavor, a
ClusterQueue with the GPUs' quota, first come first served (StrictFIFO), and the LocalQueue
the hub is given (``c.GPUSpawner.kueue_queue_name``).

Kueue's pod webhook gates each queued server's pod (``kueue.x-k8s.io/admission`` and
``kueue.x-k8s.io/topology``) and its controller makes a Workload for it; the hub reads the
Workloads, with its own service account, for each waiting student's place in line. The
spawners run in this test process with the hub's identity (``kubespawner_env``), as in
test_gpuspawner.py; JupyterHub's part (cancelling a spawn, then stop) is done by hand.
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime
from fractions import Fraction

import pytest
from jupyterhub.spawner import SpawnException
from kubernetes_asyncio import client

from gpuspawner.spawners.kubernetes import ALLOCATION_ANNOTATION, GPUSpawner
from gpuspawner.spawners.kueue import QUEUE_LABEL, QUEUED_LABEL
from tests.support.k8s_cluster import create_priority_class, wait_for
from tests.support.k8s_spawners import ProgressLog, make_gpu_spawner, write_class_catalog
from tests.support.kueue_queues import (
    cluster_queue,
    condition,
    make_queues,
    set_gpu_quota,
    workload_of,
)

pytestmark = pytest.mark.usefixtures("kubespawner_env")

QUEUE = "gpu-servers"
CLUSTER_QUEUE = "campus-gpus"
KUEUE_GATES = [{"name": "kueue.x-k8s.io/admission"}, {"name": "kueue.x-k8s.io/topology"}]
HANG_GUARD = 60.0  # seconds; no assertion is about time


@pytest.fixture(autouse=True)
def fresh_inventory():
    GPUSpawner._inventories.clear()
    yield
    GPUSpawner._inventories.clear()


def queued_spawner(name, catalog, **traits) -> GPUSpawner:
    return make_gpu_spawner(name, catalog, kueue_queue_name=QUEUE, **traits)


def quarter_gpu_nodes(k8s_controls, count: int) -> list:
    """``count`` nodes with one GPU each, shared four ways by time-slicing (4 replicas)."""
    return k8s_controls.add_gpu_nodes(count, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})


def pod_of(k8s_controls, spawner) -> dict | None:
    return k8s_controls.get("pods", spawner.pod_name, "default")


def slices_per_gpu(k8s_controls, spawners) -> dict[str, Fraction]:
    held: dict[str, Fraction] = {}
    for spawner in spawners:
        allocation = json.loads(
            pod_of(k8s_controls, spawner)["metadata"]["annotations"][ALLOCATION_ANNOTATION]
        )
        for device in allocation["device_ids"]:
            held[device] = held.get(device, Fraction(0)) + Fraction(allocation["fraction"])
    return held


def gated(k8s_controls, spawner) -> bool:
    pod = pod_of(k8s_controls, spawner)
    return bool(pod and pod["spec"].get("schedulingGates"))


def place(log: ProgressLog) -> tuple[int, int] | None:
    """The place the spawn page shows now: (position, of how many)."""
    line = log.last("Waiting in the GPU queue")
    found = re.search(r"position (\d+) of (\d+),", line or "")
    return (int(found[1]), int(found[2])) if found else None


async def until_place(log: ProgressLog, position: int, total: int) -> str:
    """The latest queue message, once it shows this place."""

    def current() -> str | None:
        return log.last("Waiting in the GPU queue") if place(log) == (position, total) else None

    return await wait_for(
        current, timeout=HANG_GUARD, what=f"progress shows position {position} of {total}"
    )


async def workload_gone(k8s_api, pod_uid: str) -> bool:
    return await workload_of(k8s_api, pod_uid) is None


async def join_the_queue(k8s_controls, spawners) -> tuple[dict, dict]:
    """Start ``spawners`` one after the other, each once the one before waits at Kueue's
    gates; their starts and progress logs, by spawner."""
    starts, logs = {}, {}
    for spawner in spawners:
        starts[spawner] = spawner.start()
        logs[spawner] = ProgressLog(spawner)
        await wait_for(
            lambda s=spawner: gated(k8s_controls, s), timeout=HANG_GUARD, what="gated by Kueue"
        )
    return starts, logs


async def places_shown(logs: dict, total: int) -> dict:
    """Each waiting spawner's place, once every one of them shows a place of ``total``."""

    def all_shown() -> dict | None:
        shown = {spawner: place(log) for spawner, log in logs.items()}
        if all(found and found[1] == total for found in shown.values()):
            return {spawner: found[0] for spawner, found in shown.items()}
        return None

    return await wait_for(all_shown, timeout=HANG_GUARD, what=f"every place of {total} shown")


async def leave(starts: dict, spawners) -> None:
    """What JupyterHub does for students who cancel their start: cancel, then stop."""
    for spawner in spawners:
        starts[spawner].cancel()
    await asyncio.gather(*(starts[s] for s in spawners), return_exceptions=True)
    await asyncio.gather(*(s.stop(now=True) for s in spawners))


async def test_fifty_students_on_ten_gpus_at_a_quarter_forty_run_ten_queue_and_go_in_order(
    kueue, k8s_controls, k8s_api, tmp_path
):
    # Given 10 GPUs shared four ways, a ClusterQueue whose quota is those 40 slices, first
    # come first served, and a class of 50 students at 1/4 of a GPU
    nodes = quarter_gpu_nodes(k8s_controls, 10)
    await make_queues(k8s_api, cluster_queue(CLUSTER_QUEUE, 40), [QUEUE])
    names = [f"student-{i:02d}" for i in range(50)]
    catalog = write_class_catalog(tmp_path / "catalog.yaml", names)
    running = [queued_spawner(name, catalog) for name in names[:40]]
    waiting = [queued_spawner(name, catalog) for name in names[40:]]

    # When 40 start at once
    await asyncio.wait_for(asyncio.gather(*(s.start() for s in running)), HANG_GUARD)

    # Then all 40 run, each admitted by Kueue through a Workload of its own, and each GPU
    # is held four times over
    for spawner in running:
        pod = pod_of(k8s_controls, spawner)
        assert pod["metadata"]["labels"][QUEUE_LABEL] == QUEUE
        assert pod["status"]["phase"] == "Running" and not pod["spec"].get("schedulingGates")
        workload = await workload_of(k8s_api, pod["metadata"]["uid"])
        assert condition(workload, "Admitted"), workload["status"]
    held = slices_per_gpu(k8s_controls, running)
    assert len(held) == 10 and set(held.values()) == {Fraction(1)}

    # When 10 more start, one after the other
    starts, logs = await join_the_queue(k8s_controls, waiting)

    # Then none is refused: each waits at Kueue's gates, with a Workload of its own waiting
    # for quota, and the spawn pages show places 1 to 10 of 10, each with an expected wait
    # from the running servers' session ends
    places = await places_shown(logs, 10)
    assert sorted(places.values()) == list(range(1, 11))
    for spawner in waiting:
        pod = pod_of(k8s_controls, spawner)
        assert pod["spec"]["schedulingGates"] == KUEUE_GATES
        workload = await workload_of(k8s_api, pod["metadata"]["uid"])
        assert not condition(workload, "QuotaReserved")
        line = logs[spawner].last("Waiting in the GPU queue")
        assert re.search(r"of 10, about \d+ (hour|minute)", line), line
    assert not any(start.done() for start in starts.values())
    pool = running[0].capacity_pool
    assert len(pool.allocations) == 40  # the waiting book nothing
    in_line = sorted(waiting, key=places.get)

    # When the class ends, its servers stop one after the other: each that stops lets the
    # first in line in, on the GPU slice it freed, and everyone behind moves up one place
    for step, stopping in enumerate(running[:10]):
        first, behind = in_line[step], in_line[step + 1 :]
        freed_node = pod_of(k8s_controls, stopping)["spec"]["nodeName"]
        await stopping.stop()
        await asyncio.wait_for(starts[first], HANG_GUARD)
        pod = pod_of(k8s_controls, first)
        assert pod["status"]["phase"] == "Running" and pod["spec"]["nodeName"] == freed_node
        await wait_for(
            lambda f=first: "Admitted from the GPU queue" in logs[f].messages,
            timeout=HANG_GUARD,
            what="her progress says she was admitted",
        )
        assert not any(starts[spawner].done() for spawner in behind)
        for position, spawner in enumerate(behind, start=1):
            await until_place(logs[spawner], position, len(behind))

    # Then the queue is empty, and the pool and the pods agree: 40 slices, each GPU full
    now_running = [*running[10:], *waiting]
    held = slices_per_gpu(k8s_controls, now_running)
    assert len(held) == 10 and set(held.values()) == {Fraction(1)}
    assert len(pool.allocations) == 40
    assert all(usage.fraction == 1 for usage in pool.usage().values())
    assert nodes  # ten GPU nodes were used throughout

    for log in logs.values():
        await log.close()
    await asyncio.gather(*(s.stop(now=True) for s in now_running))


async def test_a_student_who_leaves_the_queue_takes_her_place_with_her_and_those_behind_move_up(
    kueue, k8s_controls, k8s_api, tmp_path
):
    # Given one GPU shared four ways, held by four students, and four more waiting in line
    quarter_gpu_nodes(k8s_controls, 1)
    await make_queues(k8s_api, cluster_queue(CLUSTER_QUEUE, 4), [QUEUE])
    names = [f"s{i}" for i in range(8)]
    catalog = write_class_catalog(tmp_path / "c.yaml", names)
    running = [queued_spawner(name, catalog) for name in names[:4]]
    waiting = [queued_spawner(name, catalog) for name in names[4:]]
    await asyncio.wait_for(asyncio.gather(*(s.start() for s in running)), HANG_GUARD)
    starts, logs = await join_the_queue(k8s_controls, waiting)
    places = await places_shown(logs, 4)
    in_line = sorted(waiting, key=places.get)

    # When the second in line leaves the queue (JupyterHub cancels her start, then stops)
    leaver = in_line[1]
    leaver_uid = pod_of(k8s_controls, leaver)["metadata"]["uid"]
    await leave(starts, [leaver])

    # Then her pod is gone, her Workload with it, and those behind her move up
    assert pod_of(k8s_controls, leaver) is None
    await wait_for(
        lambda: workload_gone(k8s_api, leaver_uid), timeout=HANG_GUARD, what="her Workload gone"
    )
    await until_place(logs[in_line[0]], 1, 3)
    await until_place(logs[in_line[2]], 2, 3)
    await until_place(logs[in_line[3]], 3, 3)

    # And when a running server stops, the first in line starts, and no one else
    await running[0].stop()
    await asyncio.wait_for(starts[in_line[0]], HANG_GUARD)
    assert not any(starts[s].done() for s in in_line[2:])
    await until_place(logs[in_line[3]], 2, 2)

    for log in logs.values():
        await log.close()
    await leave(starts, in_line[2:])
    await asyncio.gather(*(s.stop(now=True) for s in [*running[1:], in_line[0]]))


async def test_a_start_queues_behind_those_waiting_even_when_a_slice_is_free(
    kueue, k8s_controls, k8s_api, tmp_path
):
    # Given one GPU shared four ways, held by four students, and Cai waiting in the queue
    quarter_gpu_nodes(k8s_controls, 1)
    await make_queues(k8s_api, cluster_queue(CLUSTER_QUEUE, 4), [QUEUE])
    names = ["ana", "ben", "cai", "dan", "eve", "fay"]
    catalog = write_class_catalog(tmp_path / "c.yaml", names)
    spawners = {name: queued_spawner(name, catalog) for name in names}
    await asyncio.gather(*(spawners[n].start() for n in ("ana", "ben", "dan", "eve")))
    cai_start = spawners["cai"].start()
    cai_log = ProgressLog(spawners["cai"])
    await until_place(cai_log, 1, 1)

    # When the admins shrink the queue's quota to three and Ana stops: the hub's pool has
    # a free slice, but Kueue admits no one
    await set_gpu_quota(k8s_api, CLUSTER_QUEUE, 3)
    await spawners["ana"].stop()
    assert len(spawners["ben"].capacity_pool.allocations) == 3

    # Then Fay, starting now, does not take that slice ahead of Cai: she queues behind him.
    # (Kueue orders Workloads made in the same second by uid: she starts in a later one.)
    cai_uid = pod_of(k8s_controls, spawners["cai"])["metadata"]["uid"]
    cai_joined = (await workload_of(k8s_api, cai_uid))["metadata"]["creationTimestamp"]
    await wait_for(
        lambda: datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") > cai_joined,
        timeout=HANG_GUARD,
        what="a second after Cai joined",
    )
    fay_start = spawners["fay"].start()
    fay_log = ProgressLog(spawners["fay"])
    await until_place(fay_log, 2, 2)
    fay_pod = pod_of(k8s_controls, spawners["fay"])
    assert fay_pod["metadata"]["labels"][QUEUED_LABEL] == "true"
    assert ALLOCATION_ANNOTATION not in fay_pod["metadata"]["annotations"]
    assert len(spawners["ben"].capacity_pool.allocations) == 3

    # When the quota is four again, Cai is admitted first, and his slice is booked where
    # he landed (the queued label gives way to the allocation record)
    await set_gpu_quota(k8s_api, CLUSTER_QUEUE, 4)
    await asyncio.wait_for(cai_start, HANG_GUARD)
    cai_pod = pod_of(k8s_controls, spawners["cai"])
    assert QUEUED_LABEL not in cai_pod["metadata"]["labels"]
    recorded = json.loads(cai_pod["metadata"]["annotations"][ALLOCATION_ANNOTATION])
    assert recorded["device_ids"] == ["gpu-node-0/0"] and recorded["fraction"] == "1/4"
    assert len(spawners["ben"].capacity_pool.allocations) == 4
    await until_place(fay_log, 1, 1)
    assert not fay_start.done()

    for log in (cai_log, fay_log):
        await log.close()
    await leave({spawners["fay"]: fay_start}, [spawners["fay"]])
    await asyncio.gather(*(spawners[n].stop(now=True) for n in ("ben", "cai", "dan", "eve")))


async def test_a_server_kueue_preempts_before_it_starts_ends_with_a_sentence(
    kueue, k8s_controls, k8s_api, tmp_path
):
    # Given a queue of one GPU slice whose higher-priority work may preempt lower, and Ana's
    # server admitted to it, its image still being pulled
    quarter_gpu_nodes(k8s_controls, 1)
    queue = cluster_queue(CLUSTER_QUEUE, 1, preemption={"withinClusterQueue": "LowerPriority"})
    await make_queues(k8s_api, queue, [QUEUE])
    k8s_controls.set_timings(pull=60)
    catalog = write_class_catalog(tmp_path / "c.yaml", ["ana"])
    spawner = queued_spawner("ana", catalog)
    start = spawner.start()
    await wait_for(
        lambda: ((pod_of(k8s_controls, spawner) or {}).get("spec") or {}).get("nodeName"),
        timeout=HANG_GUARD,
        what="Ana's server admitted and placed",
    )

    # When work of a higher priority (an exam's server, say) joins the queue
    await create_priority_class(k8s_api, "exam-servers", 1000)
    await client.CoreV1Api(k8s_api).create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "exam-server", "labels": {QUEUE_LABEL: QUEUE}},
            "spec": {
                "priorityClassName": "exam-servers",
                "containers": [
                    {
                        "name": "notebook",
                        "image": "quay.io/jupyter/base-notebook",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ],
            },
        },
    )

    # Then Kueue preempts Ana's server, and her start ends with a sentence that says so,
    # her slice free again
    with pytest.raises(SpawnException) as ended:
        await asyncio.wait_for(start, HANG_GUARD)
    assert ended.value.status_code == 409
    assert ended.value.message == (
        "Your server was preempted before it started: the cluster's GPU queue gave its place "
        "to work with a higher priority. Start it again to rejoin the queue."
    )
    assert spawner.capacity_pool.allocations == {}
    await wait_for(
        lambda: pod_of(k8s_controls, spawner) is None, timeout=HANG_GUARD, what="her pod gone"
    )


async def test_a_server_that_waits_start_timeout_in_the_queue_leaves_it_with_a_sentence(
    kueue, k8s_controls, k8s_api, tmp_path
):
    # Given a queue with no quota for GPUs, and a short start_timeout
    quarter_gpu_nodes(k8s_controls, 1)
    await make_queues(k8s_api, cluster_queue(CLUSTER_QUEUE, 0), [QUEUE])
    catalog = write_class_catalog(tmp_path / "c.yaml", ["ana"])
    spawner = queued_spawner("ana", catalog, start_timeout=2)

    # When Ana starts, her pod waits, gated, until start_timeout
    start = spawner.start()
    await wait_for(lambda: gated(k8s_controls, spawner), timeout=HANG_GUARD, what="gated")
    uid = pod_of(k8s_controls, spawner)["metadata"]["uid"]
    with pytest.raises(SpawnException) as ended:
        await asyncio.wait_for(start, HANG_GUARD)

    # Then the start ends with a sentence, her place is given up, and nothing is held
    assert ended.value.status_code == 409
    assert "waited 1 minute in the GPU queue without getting a GPU" in ended.value.message
    assert pod_of(k8s_controls, spawner) is None
    assert spawner.capacity_pool.allocations == {}
    await wait_for(
        lambda: workload_gone(k8s_api, uid), timeout=HANG_GUARD, what="her Workload gone"
    )


async def test_a_cpu_profile_never_queues(kueue, k8s_controls, k8s_api, tmp_path):
    # Given a queue with no quota for GPUs
    quarter_gpu_nodes(k8s_controls, 1)
    await make_queues(k8s_api, cluster_queue(CLUSTER_QUEUE, 0), [QUEUE])
    catalog = write_class_catalog(tmp_path / "c.yaml", ["ana"])
    # When Ana starts a profile without a GPU, it starts, and Kueue never sees it
    spawner = queued_spawner("ana", catalog, profile="cpu")
    await asyncio.wait_for(spawner.start(), HANG_GUARD)
    pod = pod_of(k8s_controls, spawner)
    assert QUEUE_LABEL not in pod["metadata"]["labels"]
    assert await workload_of(k8s_api, pod["metadata"]["uid"]) is None
    await spawner.stop(now=True)


async def test_without_a_queue_the_fifth_student_on_a_full_gpu_is_still_refused(
    k8s_controls, tmp_path
):
    # Given one GPU shared four ways, full, and no Kueue queue configured for GPUSpawner
    quarter_gpu_nodes(k8s_controls, 1)
    names = [f"s{i}" for i in range(5)]
    catalog = write_class_catalog(tmp_path / "c.yaml", names)
    spawners = [make_gpu_spawner(name, catalog) for name in names]
    await asyncio.gather(*(s.start() for s in spawners[:4]))
    # Then the fifth is refused as before, and no pod carries a queue label
    with pytest.raises(SpawnException) as refused:
        await spawners[4].start()
    assert refused.value.status_code == 409
    for spawner in spawners[:4]:
        assert QUEUE_LABEL not in pod_of(k8s_controls, spawner)["metadata"]["labels"]
    await asyncio.gather(*(s.stop(now=True) for s in spawners[:4]))
