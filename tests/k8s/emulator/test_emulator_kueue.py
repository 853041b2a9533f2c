"""Scheduling gates and the Kueue-like admission controller of the emulator."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio import client

from tests.support.k8s_cluster import status_body, wait_for
from tests.support.k8s_manifests import pod

QUEUE = {"kueue.x-k8s.io/queue-name": "gpu-queue"}
GATE = "kueue.x-k8s.io/admission"


async def read(core: client.CoreV1Api, name: str) -> dict | None:
    try:
        response = await core.read_namespaced_pod(name, "default", _preload_content=False)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise
    if response.status == 404:
        return None
    return json.loads(await response.read())


def gates(p: dict) -> list[str]:
    return [g["name"] for g in p["spec"].get("schedulingGates") or []]


async def until_running(core: client.CoreV1Api, name: str) -> dict:
    async def check():
        current = await read(core, name)
        return current if current and current["status"]["phase"] == "Running" else None

    return await wait_for(check, what=f"{name} running")


async def test_a_gated_pod_stays_pending_until_its_gates_are_removed(k8s_api, k8s_controls):
    # Given a node with room, and a pod created with a scheduling gate of its own
    k8s_controls.add_gpu_nodes(1, gpu_count=1)
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_pod(
        "default", pod("gated", schedulingGates=[{"name": "example.com/wait"}])
    )

    # Then the scheduler leaves it alone and says why
    current = await read(core, "gated")
    assert current["status"]["phase"] == "Pending" and not current["spec"].get("nodeName")
    scheduled = next(c for c in current["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "SchedulingGated")

    # And a gate may not be added after creation, only removed
    with pytest.raises(client.ApiException) as refused:
        await core.patch_namespaced_pod(
            "gated",
            "default",
            {"spec": {"schedulingGates": [{"name": "example.com/wait"}, {"name": "other"}]}},
            _content_type="application/merge-patch+json",
        )
    assert refused.value.status == 422
    assert (
        "only deletion is allowed, but found new scheduling gate 'other'"
        in (status_body(refused.value)["message"])
    )

    # When the gate is removed, the pod is scheduled and runs
    await core.patch_namespaced_pod(
        "gated",
        "default",
        {"spec": {"schedulingGates": None}},
        _content_type="application/merge-patch+json",
    )
    running = await until_running(core, "gated")
    assert running["spec"]["nodeName"] == "gpu-node-0"


async def test_a_pod_may_not_be_created_bound_and_gated(k8s_api, k8s_controls):
    core = client.CoreV1Api(k8s_api)
    with pytest.raises(client.ApiException) as refused:
        await core.create_namespaced_pod(
            "default", pod("odd", nodeName="n", schedulingGates=[{"name": "g"}])
        )
    assert refused.value.status == 422
    assert (
        "cannot be set until all schedulingGates have been cleared"
        in (status_body(refused.value)["message"])
    )


async def test_queued_pods_are_admitted_in_creation_order_while_the_quota_allows(
    k8s_api, k8s_controls
):
    # Given a queue whose quota is two GPU slots, on a node with four
    k8s_controls.add_gpu_nodes(1, gpu_count=4)
    k8s_controls.set_kueue_quota("gpu-queue", {"nvidia.com/gpu": 2})
    core = client.CoreV1Api(k8s_api)

    # When four one-GPU pods of that queue are created, one after the other
    for name in ("a", "b", "c", "d"):
        await core.create_namespaced_pod("default", pod(name, gpus=1, labels=QUEUE))

    # Then the first two are admitted (gate removed) and run; the others wait, gated
    for name in ("a", "b"):
        await until_running(core, name)
    for name in ("c", "d"):
        waiting = await read(core, name)
        assert gates(waiting) == [GATE] and waiting["status"]["phase"] == "Pending"
        assert waiting["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    events = json.loads(
        await (
            await core.list_namespaced_event(
                "default", field_selector="involvedObject.name=a", _preload_content=False
            )
        ).read()
    )["items"]
    assert "Admitted by clusterQueue gpu-queue-cluster-queue" in [e["message"] for e in events]

    # When the oldest waiting pod leaves the queue and a running one is deleted
    await core.delete_namespaced_pod("c", "default")
    await core.delete_namespaced_pod("a", "default")

    # Then the quota it frees goes to the next in line
    await until_running(core, "d")
    assert await read(core, "c") is None


async def test_a_pod_without_a_queue_name_is_not_gated(k8s_api, k8s_controls):
    k8s_controls.add_gpu_nodes(1, gpu_count=1)
    k8s_controls.set_kueue_quota("gpu-queue", {"nvidia.com/gpu": 0})
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_pod("default", pod("free", gpus=1))
    await until_running(core, "free")


async def test_a_pod_kueue_preempts_is_marked_and_deleted(k8s_api, k8s_controls):
    # Given a running pod admitted from a queue (a finalizer keeps it readable once deleted)
    k8s_controls.add_gpu_nodes(1, gpu_count=1)
    k8s_controls.set_kueue_quota("gpu-queue", {"nvidia.com/gpu": 1})
    core = client.CoreV1Api(k8s_api)
    victim = pod("victim", gpus=1, labels=QUEUE)
    victim["metadata"]["finalizers"] = ["example.com/hold"]
    await core.create_namespaced_pod("default", victim)
    await until_running(core, "victim")

    # When Kueue preempts it
    k8s_controls.preempt_by_kueue("default", "victim")

    # Then it is being deleted, with Kueue's TerminationTarget condition saying why
    current = await read(core, "victim")
    assert current["metadata"].get("deletionTimestamp")
    condition = next(c for c in current["status"]["conditions"] if c["type"] == "TerminationTarget")
    assert (condition["status"], condition["reason"]) == ("True", "StoppedByKueue")
    assert condition["message"] == "Preempted to accommodate a higher priority Workload"
    await core.patch_namespaced_pod(
        "victim",
        "default",
        {"metadata": {"finalizers": None}},
        _content_type="application/merge-patch+json",
    )
    await wait_for(
        lambda: k8s_controls.get("pods", "victim", "default") is None, what="victim deleted"
    )
