"""GPUSpawner with Kueue: students wait in a fair queue with a visible place, not refused.

Still on the emulator's Kueue-like admission controller (tests/support/k8s_emulator/kueue.py):
pods labelled ``kueue.x-k8s.io/queue-name`` are gated at create and admitted in creation
order while the queue's quota allows. The spawners run in this test process, as in
test_gpuspawner.py; JupyterHub's part (cancelling a spawn, then stop) is done by hand.
The same scenarios with the real Kueue controller are tests/k8s/test_kueue_on_cluster.py.
"""

from __future__ import annotations

import asyncio
import json
import re
from fractions import Fraction

import pytest
from jupyterhub.spawner import SpawnException

from gpuspawner.kubernetes import ALLOCATION_ANNOTATION, GPUSpawner
from gpuspawner.kueue import QUEUE_LABEL
from tests.support.k8s_cluster import wait_for
from tests.support.k8s_spawners import ProgressLog, make_gpu_spawner, write_class_catalog

pytestmark = pytest.mark.usefixtures("kubespawner_env")

QUEUE = "gpu-queue"
HANG_GUARD = 30.0  # seconds; no assertion is about time


@pytest.fixture
def k8s_cluster(emulated_cluster):
    return emulated_cluster


@pytest.fixture
def k8s_controls(emulated_cluster):
    return emulated_cluster


@pytest.fixture
def hub_kubeconfig(emulated_cluster):
    return emulated_cluster.kubeconfig


@pytest.fixture(autouse=True)
def fresh_inventory():
    GPUSpawner._inventories.clear()
    yield
    GPUSpawner._inventories.clear()


def queued_spawner(name, catalog, **traits) -> GPUSpawner:
    return make_gpu_spawner(name, catalog, kueue_queue_name=QUEUE, **traits)


def slices_per_gpu(k8s_controls, spawners) -> dict[str, Fraction]:
    held: dict[str, Fraction] = {}
    for spawner in spawners:
        pod = k8s_controls.get("pods", spawner.pod_name, "default")
        allocation = json.loads(pod["metadata"]["annotations"][ALLOCATION_ANNOTATION])
        for device in allocation["device_ids"]:
            held[device] = held.get(device, Fraction(0)) + Fraction(allocation["fraction"])
    return held


def gated(k8s_controls, spawner) -> bool:
    pod = k8s_controls.get("pods", spawner.pod_name, "default")
    return bool(pod and pod["spec"].get("schedulingGates"))


async def until_place(log: ProgressLog, position: int, total: int) -> str:
    """The latest queue message, once it shows this place."""
    wanted = f"position {position} of {total},"

    def current() -> str | None:
        line = log.last("Waiting in the GPU queue")
        return line if line and wanted in line else None

    return await wait_for(current, timeout=HANG_GUARD, what=f"progress shows {wanted}")


async def test_fifty_students_on_ten_gpus_at_a_quarter_share_queue_for_the_last_ten(
    k8s_controls, tmp_path
):
    # Given 10 GPUs shared four ways, a Kueue queue whose quota is those 40 slices, and a
    # class of 50 students at 1/4 of a GPU
    nodes = k8s_controls.add_gpu_nodes(10, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})
    k8s_controls.set_kueue_quota(QUEUE, {"nvidia.com/gpu": 40})
    names = [f"student-{i:02d}" for i in range(50)]
    catalog = write_class_catalog(tmp_path / "catalog.yaml", names)
    running = [queued_spawner(name, catalog) for name in names[:40]]
    waiting = [queued_spawner(name, catalog) for name in names[40:]]

    # When 40 start at once
    await asyncio.wait_for(asyncio.gather(*(s.start() for s in running)), HANG_GUARD)

    # Then all 40 run through the queue (labelled, admitted), each GPU held four times over
    for spawner in running:
        pod = k8s_controls.get("pods", spawner.pod_name, "default")
        assert pod["metadata"]["labels"][QUEUE_LABEL] == QUEUE
        assert pod["status"]["phase"] == "Running" and not pod["spec"].get("schedulingGates")
    assert set(slices_per_gpu(k8s_controls, running).values()) == {Fraction(1)}
    assert len(slices_per_gpu(k8s_controls, running)) == 10

    # When 10 more start, one after the other
    starts, logs = [], []
    for spawner in waiting:
        starts.append(spawner.start())
        logs.append(ProgressLog(spawner))
        await wait_for(lambda s=spawner: gated(k8s_controls, s), timeout=HANG_GUARD, what="gated")

    # Then none is refused: they wait, and their progress shows positions 1 to 10 of 10,
    # with an expected wait from the running servers' session ends
    for position, log in enumerate(logs, start=1):
        line = await until_place(log, position, 10)
        assert re.search(rf"position {position} of 10, about \d+ (hour|minute)", line), line
    assert not any(start.done() for start in starts)
    assert len(running[0].capacity_pool.allocations) == 40  # the waiting book nothing

    # When a running server stops, the first in line starts on the GPU slice it freed
    freed_node = k8s_controls.get("pods", running[0].pod_name, "default")["spec"]["nodeName"]
    await running[0].stop()
    await asyncio.wait_for(starts[0], HANG_GUARD)
    first = k8s_controls.get("pods", waiting[0].pod_name, "default")
    assert first["status"]["phase"] == "Running" and first["spec"]["nodeName"] == freed_node
    await wait_for(
        lambda: "Admitted from the GPU queue" in logs[0].messages,
        timeout=HANG_GUARD,
        what="progress says the server was admitted",
    )
    assert not any(start.done() for start in starts[1:])
    await until_place(logs[1], 1, 9)
    await until_place(logs[9], 9, 9)

    # And the pool and the pods agree: 40 slices, each GPU exactly full
    now_running = [*running[1:], waiting[0]]
    held = slices_per_gpu(k8s_controls, now_running)
    assert len(held) == 10 and set(held.values()) == {Fraction(1)}
    pool = waiting[0].capacity_pool
    assert len(pool.allocations) == 40
    assert all(usage.fraction == 1 for usage in pool.usage().values())

    # When the student in fourth place leaves the queue (JupyterHub cancels the spawn, then
    # stops the server)
    leaver = waiting[4]
    await until_place(logs[4], 4, 9)
    starts[4].cancel()
    await asyncio.gather(starts[4], return_exceptions=True)
    await leaver.stop()

    # Then their pod is gone and everyone behind moves up
    assert k8s_controls.get("pods", leaver.pod_name, "default") is None
    await until_place(logs[5], 4, 8)
    await until_place(logs[9], 8, 8)
    await until_place(logs[3], 3, 8)

    # When two more running servers stop, one after the other, the next two start in order
    await running[1].stop()
    await asyncio.wait_for(starts[1], HANG_GUARD)
    assert not starts[2].done()
    await running[2].stop()
    await asyncio.wait_for(starts[2], HANG_GUARD)
    assert not any(start.done() for start in (starts[3], *starts[5:]))
    await until_place(logs[3], 1, 6)
    assert len(pool.allocations) == 40
    assert nodes  # ten GPU nodes were used throughout

    # Cleanup: the rest leave the queue; the running stop
    for start in (starts[3], *starts[5:]):
        start.cancel()
    await asyncio.gather(*starts, return_exceptions=True)
    for log in logs:
        await log.close()
    await asyncio.gather(*(s.stop(now=True) for s in [*running[3:], *waiting]))


async def test_without_a_queue_the_41st_student_is_still_refused(k8s_controls, tmp_path):
    # Given one GPU shared four ways, full, and no Kueue queue configured for GPUSpawner
    k8s_controls.add_gpu_nodes(1, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})
    names = [f"s{i}" for i in range(5)]
    catalog = write_class_catalog(tmp_path / "c.yaml", names)
    spawners = [make_gpu_spawner(name, catalog) for name in names]
    await asyncio.gather(*(s.start() for s in spawners[:4]))
    # Then the fifth is refused as before, and no pod carries a queue label
    with pytest.raises(SpawnException) as refused:
        await spawners[4].start()
    assert refused.value.status_code == 409
    for spawner in spawners[:4]:
        labels = k8s_controls.get("pods", spawner.pod_name, "default")["metadata"]["labels"]
        assert QUEUE_LABEL not in labels
    await asyncio.gather(*(s.stop(now=True) for s in spawners[:4]))


async def test_a_cpu_profile_never_queues(k8s_controls, tmp_path):
    k8s_controls.add_gpu_nodes(1, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})
    k8s_controls.set_kueue_quota(QUEUE, {"nvidia.com/gpu": 0})
    catalog = write_class_catalog(tmp_path / "c.yaml", ["ana"])
    spawner = queued_spawner("ana", catalog, profile="cpu")
    await asyncio.wait_for(spawner.start(), HANG_GUARD)
    pod = k8s_controls.get("pods", spawner.pod_name, "default")
    assert QUEUE_LABEL not in pod["metadata"]["labels"]
    await spawner.stop(now=True)


async def test_a_server_kueue_preempts_before_it_starts_ends_with_a_sentence(
    k8s_controls, tmp_path
):
    # Given a GPU server admitted by Kueue whose container takes long to become ready
    k8s_controls.add_gpu_nodes(1, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})
    k8s_controls.set_kueue_quota(QUEUE, {"nvidia.com/gpu": 4})
    k8s_controls.set_timings(pull=60)
    catalog = write_class_catalog(tmp_path / "c.yaml", ["ana"])
    spawner = queued_spawner("ana", catalog)
    start = spawner.start()
    await wait_for(
        lambda: (
            (k8s_controls.get("pods", spawner.pod_name, "default") or {})
            .get("spec", {})
            .get("nodeName")
        ),
        timeout=HANG_GUARD,
        what="bound",
    )

    # When Kueue preempts it
    k8s_controls.preempt_by_kueue("default", spawner.pod_name)

    # Then the start ends with a sentence that says so, and the slice is free again
    with pytest.raises(SpawnException) as ended:
        await asyncio.wait_for(start, HANG_GUARD)
    assert ended.value.status_code == 409
    assert "preempted" in ended.value.message
    assert spawner.capacity_pool.allocations == {}


async def test_a_start_queues_behind_those_waiting_even_when_a_slice_is_free(
    k8s_controls, tmp_path
):
    # Given one GPU shared four ways, held by four students, and Cai waiting in the queue
    k8s_controls.add_gpu_nodes(1, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})
    k8s_controls.set_kueue_quota(QUEUE, {"nvidia.com/gpu": 4})
    names = ["ana", "ben", "cai", "dan", "eve", "fay"]
    catalog = write_class_catalog(tmp_path / "c.yaml", names)
    spawners = {name: queued_spawner(name, catalog) for name in names}
    await asyncio.gather(*(spawners[n].start() for n in ("ana", "ben", "dan", "eve")))
    cai_start = spawners["cai"].start()
    cai_log = ProgressLog(spawners["cai"])
    await until_place(cai_log, 1, 1)

    # When the admins shrink the queue's quota to three and Ana stops: the hub's pool has
    # a free slice, but Kueue admits no one
    k8s_controls.set_kueue_quota(QUEUE, {"nvidia.com/gpu": 3})
    await spawners["ana"].stop()
    assert len(spawners["ben"].capacity_pool.allocations) == 3

    # Then Fay, starting now, does not take that slice ahead of Cai: she queues behind him
    fay_start = spawners["fay"].start()
    fay_log = ProgressLog(spawners["fay"])
    await until_place(fay_log, 2, 2)
    fay_pod = k8s_controls.get("pods", spawners["fay"].pod_name, "default")
    assert fay_pod["metadata"]["labels"]["gpuspawner.campus-gpu-hub.org/queued"] == "true"
    assert ALLOCATION_ANNOTATION not in fay_pod["metadata"]["annotations"]
    assert len(spawners["ben"].capacity_pool.allocations) == 3

    # When the quota is four again, Cai is admitted first, and his slice is booked where
    # he landed (the queued label gives way to the allocation record)
    k8s_controls.set_kueue_quota(QUEUE, {"nvidia.com/gpu": 4})
    await asyncio.wait_for(cai_start, HANG_GUARD)
    cai_pod = k8s_controls.get("pods", spawners["cai"].pod_name, "default")
    assert "gpuspawner.campus-gpu-hub.org/queued" not in cai_pod["metadata"]["labels"]
    recorded = json.loads(cai_pod["metadata"]["annotations"][ALLOCATION_ANNOTATION])
    assert recorded["device_ids"] == ["gpu-node-0/0"] and recorded["fraction"] == "1/4"
    assert len(spawners["ben"].capacity_pool.allocations) == 4
    await until_place(fay_log, 1, 1)
    assert not fay_start.done()

    fay_start.cancel()
    await asyncio.gather(fay_start, return_exceptions=True)
    for log in (cai_log, fay_log):
        await log.close()
    await asyncio.gather(*(spawners[n].stop(now=True) for n in names if n != "ana"))


async def test_a_server_that_waits_start_timeout_in_the_queue_leaves_it_with_a_sentence(
    k8s_controls, tmp_path
):
    # Given a queue with no quota for GPUs, and a short start_timeout
    k8s_controls.add_gpu_nodes(1, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})
    k8s_controls.set_kueue_quota(QUEUE, {"nvidia.com/gpu": 0})
    catalog = write_class_catalog(tmp_path / "c.yaml", ["ana"])
    spawner = queued_spawner("ana", catalog, start_timeout=2)

    # When Ana starts, her pod waits, gated, until start_timeout
    with pytest.raises(SpawnException) as ended:
        await asyncio.wait_for(spawner.start(), HANG_GUARD)

    # Then the start ends with a sentence, her place is given up, and nothing is held
    assert ended.value.status_code == 409
    assert "waited 1 minute in the GPU queue without getting a GPU" in ended.value.message
    assert k8s_controls.get("pods", spawner.pod_name, "default") is None
    assert spawner.capacity_pool.allocations == {}
