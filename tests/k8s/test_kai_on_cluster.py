"""KAI-scheduler for real: GPU fractions placed by it.

KAI-scheduler v0.12.0 runs in the test cluster (the ``kai`` fixture, tests/support/cluster/
kai.py): its CRDs, RBAC, PriorityClasses and default queues from its chart, its admission,
pod group and queue webhooks, its podgrouper, pod group and queue controllers, binder and
scheduler, with GPU sharing on. The node runs the reservation pods KAI's binder makes for
each shared GPU, with the GPU the device plugin would give them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from kubernetes_asyncio import client

from tests.support.cluster.control_plane import tools_folder
from tests.support.cluster.kai import GPU_INDEX_ANNOTATION, RESERVATION_NAMESPACE
from tests.support.k8s_cluster import wait_for

HANG_GUARD = 90.0  # seconds; no assertion is about time
GPU_GROUP_LABEL = "runai-gpu-group"


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
