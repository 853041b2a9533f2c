"""Waiting in a KAI-scheduler queue: who waits, and in which order KAI takes them.

The PodGroups and pods below are shaped as KAI-scheduler v0.12.0 writes them (seen on the
test cluster's KAI: tests/k8s/test_kai_on_cluster.py): a PodGroup per pod, named
``pg-<pod>-<pod uid>``, owned by the pod, its queue and PriorityClass in its spec, and its
requested and allocated resources in its status (KAI's pod group controller)."""

from __future__ import annotations

from gpuspawner.spawners.kai_queue import (
    kai_priority,
    place_in_kai_queue,
    waiting_kai_pods,
    waiting_pod_groups,
)


def pod(name, created, *, queue="course-ml101", node=None, priority="build", deleting=False):
    metadata = {
        "name": name,
        "uid": f"uid-{name}",
        "creationTimestamp": created,
        "labels": {"kai.scheduler/queue": queue, "priorityClassName": priority},
        "annotations": {"pod-group-name": f"pg-{name}-uid-{name}"},
    }
    if deleting:
        metadata["deletionTimestamp"] = created
    spec = {"schedulerName": "kai-scheduler", **({"nodeName": node} if node else {})}
    return {"metadata": metadata, "spec": spec, "status": {"phase": "Pending"}}


def group(owner, created, *, queue="course-ml101", priority="build", allocated=False):
    """The PodGroup KAI's podgrouper makes for pod ``owner``."""
    resources = {"requested": {"nvidia.com/gpu": "250m"}}
    if allocated:
        resources["allocated"] = {"nvidia.com/gpu": "250m"}
    return {
        "metadata": {
            "name": f"pg-{owner}-uid-{owner}",
            "creationTimestamp": created,
            "ownerReferences": [{"kind": "Pod", "name": owner, "uid": f"uid-{owner}"}],
        },
        "spec": {"minMember": 1, "queue": queue, "priorityClassName": priority},
        "status": {"resourcesStatus": resources},
    }


def names(groups) -> list[str]:
    return [g["metadata"]["ownerReferences"][0]["name"] for g in groups]


def test_kai_takes_a_queue_by_priority_then_creation_then_the_pod_groups_name():
    # Given PodGroups made in the same second for Zoe and Ada, an older one for Cai, and a
    # job of KAI's preemptible "train" class that waited longest
    groups = [
        group("zoe", "2026-11-25T10:00:01Z"),
        group("ada", "2026-11-25T10:00:01Z"),
        group("cai", "2026-11-25T10:00:00Z"),
        group("job", "2026-11-25T09:00:00Z", priority="train"),
    ]
    # Then the servers ("build", 100) come first, oldest first, and in the same second by
    # name (KAI's id for a PodGroup), the job last
    assert names(waiting_pod_groups(groups, "course-ml101")) == ["cai", "ada", "zoe", "job"]


def test_a_pod_group_of_the_hubs_pod_waits_while_its_pod_is_unbound():
    # Given the hub's pods: Ana bound to a node, Ben unbound, Cai unbound but being deleted
    pods = {
        p["metadata"]["uid"]: p
        for p in (
            pod("ana", "2026-11-25T10:00:00Z", node="gpu-node-0"),
            pod("ben", "2026-11-25T10:00:01Z"),
            pod("cai", "2026-11-25T10:00:02Z", deleting=True),
        )
    }
    groups = [group(name, "2026-11-25T10:00:00Z") for name in ("ana", "ben", "cai")]
    # Then only Ben waits, whatever the PodGroups' status says yet
    assert names(waiting_pod_groups(groups, "course-ml101", pods)) == ["ben"]


def test_other_pod_groups_wait_while_they_request_and_hold_nothing():
    # Given PodGroups of pods the hub does not watch (a job's, another hub's): one placed,
    # one waiting, one of an ended pod (it requests nothing any more), one of another queue
    ended = group("done", "2026-11-25T09:00:00Z")
    ended["status"]["resourcesStatus"] = {}
    groups = [
        group("placed", "2026-11-25T09:00:00Z", allocated=True),
        group("queued", "2026-11-25T09:00:01Z"),
        ended,
        group("elsewhere", "2026-11-25T09:00:00Z", queue="course-cs50"),
    ]
    assert names(waiting_pod_groups(groups, "course-ml101")) == ["queued"]


def test_a_servers_place_is_its_pod_groups_place_among_those_waiting():
    pods = {p["metadata"]["uid"]: p for p in (pod("ana", "t"), pod("ben", "t"))}
    groups = [group("ben", "2026-11-25T10:00:01Z"), group("ana", "2026-11-25T10:00:01Z")]
    assert place_in_kai_queue(groups, "course-ml101", pods["uid-ana"], pods) == (1, 2)
    assert place_in_kai_queue(groups, "course-ml101", pods["uid-ben"], pods) == (2, 2)
    # A pod whose PodGroup KAI has not made yet has no place (yet)
    newcomer = pod("eve", "2026-11-25T10:00:02Z")
    assert place_in_kai_queue(groups, "course-ml101", newcomer, pods) is None


def test_without_the_pod_groups_the_order_is_estimated_from_the_pods():
    pods = [
        pod("zoe", "2026-11-25T10:00:01Z"),
        pod("ada", "2026-11-25T10:00:01Z"),
        pod("running", "2026-11-25T09:00:00Z", node="gpu-node-0"),
        pod("job", "2026-11-25T09:00:00Z", priority="train"),
        pod("other", "2026-11-25T09:00:00Z", queue="course-cs50"),
    ]
    waiting = waiting_kai_pods(pods, "course-ml101")
    assert [p["metadata"]["name"] for p in waiting] == ["ada", "zoe", "job"]


def test_priorities_are_kais_own_classes_values_and_its_default_for_others():
    assert kai_priority("inference") > kai_priority("build") > kai_priority("train")
    assert kai_priority("build-preemptible") == 75
    assert kai_priority("campus-custom") == kai_priority(None) == 50
