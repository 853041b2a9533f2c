"""Plain KubeSpawner 7.1.0 starts, polls and stops servers on the real control plane, with
the hub's identity (the z2jh hub Role and hub_config/kubernetes/rbac.yaml)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from kubernetes_asyncio import client
from kubespawner import KubeSpawner

from tests.support.cluster.identities import chart_hub_rbac
from tests.support.k8s_cluster import wait_for
from tests.support.k8s_spawners import make_kube_spawner, provide_storage_class, provide_volume

pytestmark = pytest.mark.usefixtures("kubespawner_env")


async def test_kubespawner_starts_polls_and_stops_a_gpu_server(k8s_controls):
    k8s_controls.add_gpu_nodes(2, gpu_count=4)
    spawner = make_kube_spawner("alice", extra_resource_limits={"nvidia.com/gpu": "1"})
    start = spawner.start()
    progress = []
    async for event in spawner.progress():
        json.dumps(event)  # JupyterHub serializes every progress event
        progress.append(event["message"])
    url = await start
    pod = k8s_controls.get("pods", spawner.pod_name, "default")
    assert url == f"http://{pod['status']['podIP']}:8888"
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    text = "\n".join(progress)
    for fragment in (
        "[Normal] Successfully assigned default/jupyter-alice to gpu-node-",
        "Pulling image",
        "Created container: notebook",
        "Started container notebook",
    ):
        assert fragment in text
    assert await spawner.poll() is None
    await spawner.stop()
    assert k8s_controls.get("pods", spawner.pod_name, "default") is None
    assert await spawner.poll() == 1


async def test_poll_reports_the_exit_code_when_the_notebook_ends(k8s_controls):
    k8s_controls.add_gpu_nodes(1)
    spawner = make_kube_spawner("bob")
    await spawner.start()
    k8s_controls.complete_container("default", spawner.pod_name, "notebook", exit_code=0)
    assert await wait_for(lambda: _polled(spawner), what="poll to see the exit") == (0,)
    await wait_for(
        lambda: k8s_controls.get("pods", spawner.pod_name, "default") is None,
        what="KubeSpawner deleting the stopped pod",
    )


async def _polled(spawner: KubeSpawner) -> tuple[int] | None:
    status = await spawner.poll()
    return None if status is None else (status,)


async def test_a_spawn_that_cannot_fit_shows_the_schedulers_reason_and_times_out(k8s_controls):
    k8s_controls.add_gpu_nodes(2, gpu_count=1)
    spawner = make_kube_spawner(
        "carol", extra_resource_limits={"nvidia.com/gpu": "4"}, start_timeout=1
    )
    start = spawner.start()
    messages = [event["message"] async for event in spawner.progress()]
    with pytest.raises(TimeoutError):
        await start
    assert any(
        "[Warning] 0/2 nodes are available: 2 Insufficient nvidia.com/gpu." in m for m in messages
    )
    await spawner.stop(now=True)


async def test_forty_users_start_poll_and_stop_concurrently(k8s_controls):
    k8s_controls.add_gpu_nodes(10, gpu_count=4)
    spawners = [
        make_kube_spawner(f"student-{i:02d}", extra_resource_limits={"nvidia.com/gpu": "1"})
        for i in range(40)
    ]
    started = time.perf_counter()
    urls = await asyncio.gather(*(s.start() for s in spawners))
    ready = time.perf_counter()
    assert len(set(urls)) == 40
    assert await asyncio.gather(*(s.poll() for s in spawners)) == [None] * 40
    await asyncio.gather(*(s.stop() for s in spawners))
    done = time.perf_counter()
    print(
        f"\n40 concurrent KubeSpawner starts: {ready - started:.2f} s; start+poll+stop: {done - started:.2f} s"
    )
    assert [k8s_controls.get("pods", s.pod_name, "default") for s in spawners] == [None] * 40


async def test_owned_services_go_with_the_pod_and_the_pvc_stays(k8s_controls, k8s_api):
    k8s_controls.add_gpu_nodes(1)
    # The cluster's storage: a class whose claims bind when their first pod is scheduled,
    # with a volume its admin provisioned
    await provide_storage_class(k8s_api, "campus-local")
    await provide_volume(k8s_api, storage_class="campus-local")
    spawner = make_kube_spawner(
        "dana",
        services_enabled=True,
        storage_pvc_ensure=True,
        storage_capacity="10Gi",
        storage_class="campus-local",
        # as z2jh's dynamic storage does; the claim binds when its first consumer is scheduled
        volumes=[{"name": "home", "persistentVolumeClaim": {"claimName": "{pvc_name}"}}],
        volume_mounts=[{"name": "home", "mountPath": "/home/jovyan"}],
    )
    await spawner.start()
    service = k8s_controls.get("services", spawner.pod_name, "default")
    pod = k8s_controls.get("pods", spawner.pod_name, "default")
    assert service["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    assert (
        k8s_controls.get("persistentvolumeclaims", spawner.pvc_name, "default")["status"]["phase"]
        == "Bound"
    )
    await spawner.stop()
    await wait_for(
        lambda: k8s_controls.get("services", spawner.pod_name, "default") is None,
        what="the garbage collector",
    )
    assert k8s_controls.get("persistentvolumeclaims", spawner.pvc_name, "default") is not None


async def test_user_namespaces_are_created_and_watched_across_namespaces(k8s_controls, k8s_api):
    # Given a hub that its admin gave what KubeSpawner documents for user namespaces:
    # ClusterRoles analogous to its usual Roles, and the right to create namespaces
    k8s_controls.add_gpu_nodes(1)
    await grant_the_hub_its_role_cluster_wide(k8s_controls, k8s_api)
    spawner = make_kube_spawner(
        "erin", enable_user_namespaces=True, user_namespace_template="hub-{username}"
    )
    url = await spawner.start()
    assert spawner.namespace == "hub-erin"
    assert k8s_controls.get("namespaces", "hub-erin")["status"]["phase"] == "Active"
    assert (
        url
        == f"http://{k8s_controls.get('pods', spawner.pod_name, 'hub-erin')['status']['podIP']}:8888"
    )
    await spawner.stop()


async def grant_the_hub_its_role_cluster_wide(k8s_controls, admin: client.ApiClient) -> None:
    """A ClusterRole with the z2jh hub Role's rules (as ``helm template`` renders it) and
    ``create`` on namespaces, bound to the hub's service account, as its admin would."""
    hub = k8s_controls.identities["hub"]
    chart = chart_hub_rbac(k8s_controls.plane.bin / "helm", hub.namespace)
    role = next(doc for doc in chart if doc["kind"] == "Role")
    rules = [*role["rules"], {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create"]}]
    rbac = client.RbacAuthorizationV1Api(admin)
    await rbac.create_cluster_role({"metadata": {"name": "hub-user-namespaces"}, "rules": rules})
    await rbac.create_cluster_role_binding(
        {
            "metadata": {"name": "hub-user-namespaces"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "hub-user-namespaces",
            },
            "subjects": [{"kind": "ServiceAccount", "name": hub.name, "namespace": hub.namespace}],
        }
    )
