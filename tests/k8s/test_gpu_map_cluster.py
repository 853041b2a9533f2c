"""The GPU map on Kubernetes: the course-sessions service reads the GPU nodes and the
allocation records of the hub's server and job pods, with the hub's identity (the z2jh hub
Role and hub_config/kubernetes/rbac.yaml) on the real control plane, and each role sees the
names it may.

The slices are those of tests/support/gpu_map_scene.py, recorded on pods as GPUSpawner
(server pods) and the job service's Kubernetes executor (job pods) record them.
"""

from __future__ import annotations

from kubernetes_asyncio import client

from gpuspawner.core.allocation_record import ALLOCATION_ANNOTATION, encode_allocation
from gpuspawner.gpu_map import gpu_map_json, map_viewer
from gpuspawner.policy import Allocation, UserIdentity, load_catalog
from gpuspawner.sessions.gpu_pools import pool_source
from tests.support import gpu_map_scene as scene
from tests.support.k8s_cluster import wait_for
from tests.support.k8s_manifests import pod

NODE = "gpu-map-node"
NAMESPACE = "default"  # the users' namespace, where the hub's Role holds


def recorded_pod(key: str, owner: str, course, profile: str, share, device: str) -> dict:
    """A pod carrying ``key``'s allocation record on ``device``, labelled like the hub's."""
    allocation = Allocation(
        key=key,
        owner=owner,
        profile_id=profile,
        course_id=course,
        device_ids=(device,),
        fraction=share,
        memory_mib=0,
        compute_min_pct=0,
    )
    is_job = key.startswith("job:")
    name = f"job-{key[4:]}" if is_job else f"jupyter-{owner}"
    body = pod(
        name,
        labels={"component": "jupyter-to-job" if is_job else "singleuser-server"},
        command=["sleep", "3600"],
    )
    body["metadata"]["annotations"] = {ALLOCATION_ANNOTATION: encode_allocation(allocation)}
    return body


async def test_the_map_on_kubernetes_holds_servers_and_jobs_with_names_by_role(
    k8s_controls, k8s_api, hub_kubeconfig, tmp_path
):
    # Given a node with two RTX 4090s, and pods of three course servers and a research job
    k8s_controls.add_gpu_nodes(
        1, prefix=NODE, product="NVIDIA-GeForce-RTX-4090", gpu_count=2, gpu_memory_mib=24576
    )
    core = client.CoreV1Api(k8s_api)

    def in_phase(name: str, phase: str):
        async def check() -> bool:
            return (await core.read_namespaced_pod(name, NAMESPACE)).status.phase == phase

        return check

    devices = [f"{NODE}-0/0", f"{NODE}-0/0", f"{NODE}-0/0", f"{NODE}-0/1"]
    for (key, owner, course, profile, share), device in zip(scene.SLICES, devices, strict=True):
        await core.create_namespaced_pod(
            NAMESPACE, recorded_pod(key, owner, course, profile, share, device)
        )
    # And a finished job's pod, which holds nothing any more
    # (its container exits 0, as the kubelet reports it; writing the status by hand would
    # race the kubelet, which owns it)
    done = recorded_pod("job:old1", "rex", None, "vision-lab", scene.SLICES[3][4], f"{NODE}-0/1")
    done["metadata"]["name"] = "job-finished"
    done["spec"]["restartPolicy"] = "Never"
    await core.create_namespaced_pod(NAMESPACE, done)
    await wait_for(in_phase("job-finished", "Running"), what="job-finished running")
    k8s_controls.complete_container(NAMESPACE, "job-finished")
    await wait_for(in_phase("job-finished", "Succeeded"), what="job-finished done")

    # When the service's GPU map reads the cluster
    source = pool_source(
        allocation_ledger=None,
        simulated=None,
        namespace=NAMESPACE,
        kubeconfig=str(hub_kubeconfig),
    )
    catalog_path = tmp_path / "catalog.yaml"
    catalog_path.write_text(scene.CATALOG)
    catalog = load_catalog(catalog_path)
    try:
        assert source is not None and source.where == "Kubernetes"
        pool = await source.read()
    finally:
        await source.close()

    # Then both GPUs are on the map with the three servers and the running job
    admin = gpu_map_json(pool, map_viewer(catalog, UserIdentity("root", frozenset(), admin=True)))
    assert [gpu["label"] for gpu in admin["gpus"]] == [
        "GPU 0 (RTX-4090, 24 GiB)",
        "GPU 1 (RTX-4090, 24 GiB)",
    ]
    assert admin["totals"] == {"gpus": 2, "slices": 4, "servers": 3, "jobs": 1, "free_gpus": 0}
    assert [gpu["shared_out"] for gpu in admin["gpus"]] == ["3/4", "1/2"]
    # And each role sees the names it may: the admin all (with the job's id), the
    # instructors their own course's students, a student only themselves
    assert scene.names_in(admin) == scene.EXPECTED_NAMES["root"]
    job = next(s for s in admin["gpus"][1]["slices"] if s["kind"] == "job")
    assert (job["holder"], job["job_id"]) == ("rex", "7f3a")
    groups = {
        person: frozenset(g for g, members in scene.INSTRUCTOR_GROUPS.items() if person in members)
        for person in scene.PEOPLE
    }
    for person in ("mila", "tom", "ana", "rex"):
        picture = gpu_map_json(pool, map_viewer(catalog, UserIdentity(person, groups[person])))
        assert scene.names_in(picture) == scene.EXPECTED_NAMES[person], person
