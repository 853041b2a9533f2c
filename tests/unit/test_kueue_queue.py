"""Waiting in a Kueue queue: the place in line, the expected wait, the landing, preemption.

The Workloads and pods below are shaped as Kueue v0.17 writes them (seen on the test
cluster's Kueue: tests/k8s/test_kueue_on_cluster.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fractions import Fraction

from gpuspawner.policy import Allocation, CapacityPool, GPUDevice
from gpuspawner.spawners.kueue import (
    QUEUE_LABEL,
    QUEUED_AT_ANNOTATION,
    expected_wait,
    place_in_queue,
    place_on_node,
    preemption_sentence,
    queue_line,
    queue_timeout_sentence,
    waiting_pods,
    waiting_workloads,
)

NOW = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)


def pod(name, created, *, queue="gpu", gated=True, stamp="", deleting=False) -> dict:
    metadata = {
        "name": name,
        "creationTimestamp": created,
        "labels": {QUEUE_LABEL: queue},
        "annotations": {QUEUED_AT_ANNOTATION: stamp} if stamp else {},
    }
    if deleting:
        metadata["deletionTimestamp"] = created
    spec = {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]} if gated else {}
    return {"metadata": metadata, "spec": spec}


def slice_of(key: str, devices: tuple[str, ...]) -> Allocation:
    return Allocation(key, key, "ml101", "ml101", devices, Fraction(1, 4), 4096, 0)


def test_the_queue_is_the_gated_pods_of_that_queue_oldest_first():
    pods = [
        pod("late", "2026-11-25T10:00:02Z"),
        pod("b", "2026-11-25T10:00:01Z", stamp="2026-11-25T10:00:01.500000Z"),
        pod("a", "2026-11-25T10:00:01Z", stamp="2026-11-25T10:00:01.200000Z"),
        pod("running", "2026-11-25T09:00:00Z", gated=False),
        pod("other-queue", "2026-11-25T09:00:00Z", queue="cpu"),
        pod("leaving", "2026-11-25T09:00:00Z", deleting=True),
    ]
    assert [p["metadata"]["name"] for p in waiting_pods(pods, "gpu")] == ["a", "b", "late"]


def test_the_expected_wait_is_the_end_of_the_nth_session_to_end():
    ends = [NOW + timedelta(minutes=50), None, NOW + timedelta(minutes=10), NOW - timedelta(1)]
    assert expected_wait(1, ends, NOW) == timedelta(0)  # a session already over
    assert expected_wait(2, ends, NOW) == timedelta(minutes=10)
    assert expected_wait(3, ends, NOW) == timedelta(minutes=50)
    assert expected_wait(4, ends, NOW) is None


def test_the_queue_line_says_the_place_and_the_wait_in_words():
    assert queue_line(3, 10, timedelta(minutes=9, seconds=1)) == (
        "Waiting in the GPU queue: position 3 of 10, about 10 minutes. "
        "You can leave the queue by cancelling this start."
    )
    assert "about 2 hours 5 minutes." in queue_line(1, 1, timedelta(minutes=125))
    assert "about 1 hour." in queue_line(1, 1, timedelta(minutes=60))
    assert "no estimate of the wait yet" in queue_line(1, 2, None)
    assert queue_timeout_sentence(3600).startswith("Your server waited 60 minutes in the GPU")


def test_a_server_admitted_from_the_queue_takes_the_fullest_gpu_of_its_node_that_fits():
    devices = [
        GPUDevice(f"{node}/{i}", n * 2 + i, "T4", 16384)
        for n, node in enumerate("ab")
        for i in range(2)
    ]
    pool = CapacityPool(devices)
    for key, device in (("s1", "b/0"), ("s2", "b/1"), ("s3", "b/1"), ("s4", "a/0")):
        pool.restore(slice_of(key, (device,)))
    rendered = slice_of("queued", ("a/0",))  # where the share was rendered for the queue

    assert place_on_node(pool, rendered, "b").device_ids == ("b/1",)
    assert place_on_node(pool, rendered, "a").device_ids == ("a/0",)
    assert place_on_node(pool, rendered, "unknown") == rendered


def workload(pod_uid, created, uid, *, queue="gpu", priority=0, conditions=(), **meta) -> dict:
    return {
        "metadata": {
            "name": f"pod-{pod_uid}",
            "uid": uid,
            "creationTimestamp": created,
            "ownerReferences": [{"kind": "Pod", "uid": pod_uid, "controller": True}],
            **meta,
        },
        "spec": {"queueName": queue, "priority": priority, "active": True},
        "status": {"conditions": list(conditions)},
    }


def reserved(status="True"):
    return {"type": "QuotaReserved", "status": status, "reason": "QuotaReserved"}


def test_the_queue_is_its_waiting_workloads_in_the_order_kueue_admits_them():
    workloads = [
        workload("late", "2026-11-25T10:00:02Z", "0000"),
        # the same second: Kueue orders them by the Workload's uid, not the pod's age
        workload("b", "2026-11-25T10:00:01Z", "aaaa"),
        workload("a", "2026-11-25T10:00:01Z", "bbbb"),
        workload("urgent", "2026-11-25T10:00:09Z", "ffff", priority=1000),
        # requeued after its pod was not ready in time: from the eviction on
        workload(
            "again",
            "2026-11-25T09:00:00Z",
            "1111",
            conditions=[
                {
                    "type": "Evicted",
                    "status": "True",
                    "reason": "PodsReadyTimeout",
                    "lastTransitionTime": "2026-11-25T10:00:03Z",
                }
            ],
        ),
        workload("pending", "2026-11-25T09:00:00Z", "2222", conditions=[reserved("False")]),
        workload("running", "2026-11-25T09:00:00Z", "3333", conditions=[reserved()]),
        workload("other-queue", "2026-11-25T09:00:00Z", "4444", queue="cpu"),
        workload("leaving", "2026-11-25T09:00:00Z", "5555", deletionTimestamp="x"),
        workload(
            "done",
            "2026-11-25T09:00:00Z",
            "6666",
            conditions=[{"type": "Finished", "status": "True"}],
        ),
    ]
    line = [w["metadata"]["ownerReferences"][0]["uid"] for w in waiting_workloads(workloads, "gpu")]
    assert line == ["urgent", "pending", "b", "a", "late", "again"]
    assert place_in_queue(workloads, "gpu", "a") == (4, 6)
    assert place_in_queue(workloads, "gpu", "running") is None
    assert place_in_queue(workloads, "gpu", "not-made-yet") is None


def terminating(kind, reason, message=""):
    return {
        "status": {
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": kind, "status": "True", "reason": reason, "message": message},
            ]
        }
    }


def test_a_kueue_preemption_is_told_in_a_sentence():
    preempted = terminating(
        "TerminationTarget",
        "WorkloadEvictedDueToPreempted",
        "Preempted to accommodate a workload (UID: 2748, JobUID: 4088) due to prioritization "
        "in the ClusterQueue; preemptor path: /cq; preemptee path: /cq",
    )
    assert preemption_sentence(preempted) == (
        "Your server was preempted before it started: the cluster's GPU queue gave its place "
        "to work with a higher priority. Start it again to rejoin the queue."
    )
    assert preemption_sentence(terminating("DisruptionTarget", "PreemptionByScheduler")) == (
        preemption_sentence(preempted)
    )
    stopped = terminating(
        "TerminationTarget",
        "WorkloadEvictedDueToClusterQueueStopped",
        "The ClusterQueue is stopped.",
    )
    assert preemption_sentence(stopped) == (
        "Your server was stopped by the cluster's GPU queue before it started (The ClusterQueue "
        "is stopped). Start it again to rejoin the queue, or tell the hub admins if this "
        "happens again."
    )
    assert preemption_sentence({"status": {"conditions": [{"type": "Ready"}]}}) is None
