"""User pods of the shipped values on the real control plane (issue 23, defect 2).

GPUSpawner is configured by z2jh 4.4.0's own hub configuration run with
hub_config/kubernetes/values.yaml, as the hub pod runs it; the pod it makes is sent to the
API server with the hub's identity (the chart's hub Role), as KubeSpawner sends it
(``create_namespaced_pod``). The users' namespace enforces Pod Security "baseline"; a
namespace enforcing "restricted" shows that the values meet it too (README.md: baseline
enforced, restricted met by the shipped values where the image runs as uid 1000).
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from gpuspawner.spawners.kubernetes import GPUSpawner
from tests.support.cluster.session import ControlPlaneCluster
from tests.support.k8s_cluster import status_body
from tests.support.k8s_spawners import without_a_hub
from tests.support.z2jh_chart import (
    DEMO_CATALOG,
    K8S,
    ChartHub,
    catalog_mount_path,
    render_campus,
    render_z2jh,
    shipped_values,
    z2jh_missing,
)

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.skipif(z2jh_missing() is not None, reason=z2jh_missing() or ""),
    pytest.mark.usefixtures("kubespawner_env"),
]

USERS_NAMESPACE = "default"
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}


@pytest.fixture
def catalog_mount(tmp_path: Path) -> Path:
    """The course-catalog ConfigMap as mounted: made from the demo catalog."""
    folder = tmp_path / "course-catalog"
    folder.mkdir()
    (folder / "catalog.yaml").write_text(DEMO_CATALOG.read_text())
    return folder


@pytest.fixture
def hub_config(tmp_path, monkeypatch, catalog_mount):
    """The hub pod's configuration, installed in the users' namespace of the test cluster."""
    values = shipped_values()
    config = ChartHub(tmp_path, monkeypatch).run(
        values, mounts={catalog_mount_path(values): catalog_mount}, namespace=USERS_NAMESPACE
    )
    config.GPUAdmission.catalog_path = str(catalog_mount)
    return config


@pytest.fixture
async def as_the_hub(hub_kubeconfig: Path) -> AsyncIterator[client.CoreV1Api]:
    """The core API with the hub's credentials (its service account's token)."""
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(hub_kubeconfig), client_configuration=configuration
    )
    async with client.ApiClient(configuration) as api:
        yield client.CoreV1Api(api)


@pytest.fixture
async def restricted_namespace(k8s_cluster, k8s_api) -> AsyncIterator[str]:
    """A namespace enforcing Pod Security "restricted", where the hub may do what its Role
    lets it do in the users' namespace (the same rules, bound to the hub's account)."""
    core, rbac = client.CoreV1Api(k8s_api), client.RbacAuthorizationV1Api(k8s_api)
    name = f"restricted-{secrets.token_hex(4)}"
    await core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=RESTRICTED))
    )
    if isinstance(k8s_cluster, ControlPlaneCluster):
        hub = k8s_cluster.identities["hub"]
        role = await rbac.read_namespaced_role("hub", hub.namespace)
        await rbac.create_namespaced_role(
            name, client.V1Role(metadata=client.V1ObjectMeta(name="hub"), rules=role.rules)
        )
        await rbac.create_namespaced_role_binding(
            name,
            client.V1RoleBinding(
                metadata=client.V1ObjectMeta(name="hub"),
                role_ref=client.V1RoleRef(
                    api_group="rbac.authorization.k8s.io", kind="Role", name="hub"
                ),
                subjects=[
                    client.RbacV1Subject(
                        kind="ServiceAccount", name=hub.name, namespace=hub.namespace
                    )
                ],
            ),
        )
    yield name
    await core.delete_namespace(name)


async def users_pod(hub_config, namespace: str = USERS_NAMESPACE) -> client.V1Pod:
    """The pod GPUSpawner, configured by the chart, makes for Ada's default profile."""
    spawner_config = copy.deepcopy(hub_config)
    spawner_config.KubeSpawner.namespace = namespace
    spawner = without_a_hub(GPUSpawner, "ada", spawner_config)
    return await spawner.get_pod_manifest()


async def created_by_the_hub(api: client.CoreV1Api, namespace: str, pod: client.V1Pod):
    """The pod as the API server stored it, sent as KubeSpawner sends it; a refusal fails
    the test with the API server's own sentence."""
    try:
        return await api.create_namespaced_pod(namespace, pod)
    except client.ApiException as error:
        pytest.fail(
            f"The API server refused the user pod in {namespace}: {status_body(error)['message']}"
        )


async def test_the_users_pod_meets_pod_security_baseline_with_the_hubs_identity(
    hub_config, as_the_hub, k8s_api
):
    # Given the users' namespace, which enforces Pod Security "baseline"
    namespace = await client.CoreV1Api(k8s_api).read_namespace(USERS_NAMESPACE)
    assert namespace.metadata.labels["pod-security.kubernetes.io/enforce"] == "baseline"
    # When the hub sends the pod GPUSpawner makes for Ada with the shipped values
    created = await created_by_the_hub(as_the_hub, USERS_NAMESPACE, await users_pod(hub_config))
    # Then the API server takes it: no privileged container, no added capability
    containers = [*(created.spec.init_containers or []), *created.spec.containers]
    assert [c.name for c in containers] == ["notebook"]
    for container in containers:
        context = container.security_context
        assert not context.privileged
        assert not (context.capabilities and context.capabilities.add)
    # and no service-account token was mounted (the ServiceAccount admission adds none)
    assert created.spec.automount_service_account_token is False
    assert not [v.name for v in created.spec.volumes or [] if v.projected]


async def test_the_users_pod_meets_pod_security_restricted(
    hub_config, as_the_hub, restricted_namespace
):
    # Given a namespace enforcing Pod Security "restricted"
    # When the hub sends the same pod there
    pod = await users_pod(hub_config, restricted_namespace)
    created = await created_by_the_hub(as_the_hub, restricted_namespace, pod)
    # Then the API server takes it: not root, the runtime's seccomp profile, no
    # capabilities, no privilege escalation
    [container] = created.spec.containers
    assert created.spec.security_context.run_as_non_root is True
    assert created.spec.security_context.seccomp_profile.type == "RuntimeDefault"
    assert container.security_context.run_as_user == 1000
    assert container.security_context.capabilities.drop == ["ALL"]
    assert container.security_context.allow_privilege_escalation is False


async def test_without_the_setting_the_api_server_would_mount_a_token(hub_config, as_the_hub):
    # The token check above can fail: with a service account and no setting, the API
    # server's ServiceAccount admission mounts the account's token into the pod.
    hub_config = copy.deepcopy(hub_config)
    del hub_config.KubeSpawner["automount_service_account_token"]
    hub_config.KubeSpawner.service_account = "default"
    created = await created_by_the_hub(as_the_hub, USERS_NAMESPACE, await users_pod(hub_config))
    assert [v.name for v in created.spec.volumes if v.projected][0].startswith("kube-api-access")


async def test_with_z2jhs_metadata_block_the_api_server_refuses_the_users_pod(
    tmp_path, monkeypatch, catalog_mount, as_the_hub
):
    # The baseline check above can fail: with z2jh's default iptables block, the pod has a
    # privileged init container with NET_ADMIN, which "baseline" refuses.
    values = shipped_values()
    values["singleuser"]["cloudMetadata"]["blockWithIptables"] = True
    hub_config = ChartHub(tmp_path, monkeypatch).run(
        values, mounts={catalog_mount_path(values): catalog_mount}, namespace=USERS_NAMESPACE
    )
    hub_config.GPUAdmission.catalog_path = str(catalog_mount)
    with pytest.raises(client.ApiException) as refused:
        await as_the_hub.create_namespaced_pod(USERS_NAMESPACE, await users_pod(hub_config))
    message = status_body(refused.value)["message"]
    assert refused.value.status == 403
    assert 'violates PodSecurity "baseline:latest"' in message
    assert 'container "block-cloud-metadata" must not set securityContext.privileged' in message


def pods_of(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The pod each workload of ``objects`` makes, by workload (its service account left
    out, which the namespace of this test has not; a claim template as its claim)."""
    pods = {}
    for obj in objects:
        template = (obj.get("spec") or {}).get("template")
        if obj["kind"] not in ("Deployment", "StatefulSet", "DaemonSet", "Job") or not template:
            continue
        spec = copy.deepcopy(template["spec"])
        spec.pop("serviceAccountName", None)
        for claim in obj["spec"].get("volumeClaimTemplates", []):
            name = claim["metadata"]["name"]
            spec.setdefault("volumes", []).append(
                {"name": name, "persistentVolumeClaim": {"claimName": f"{name}-0"}}
            )
        name = f"{obj['kind'].lower()}-{obj['metadata']['name']}"
        pods[name] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    return pods


async def test_every_pod_of_the_installation_meets_pod_security_restricted(
    k8s_api, restricted_namespace, tmp_path
):
    from gpuspawner.backends import cpu_only_plan
    from jupyter_to_job.k8s_objects import make_job

    # Given the z2jh release and this folder's chart, rendered with the admin's images, and
    # a job's pod as the job service makes its Job
    values = tmp_path / "values.yaml"
    values.write_text((K8S / "values.yaml").read_text().replace("REGISTRY/", "registry.test/"))
    objects = render_z2jh(values) + render_campus(values, images=None)
    objects.append(make_job(job_id="j1", owner="ada", image="user", plan=cpu_only_plan()))
    pods = pods_of(objects)
    assert {"deployment-hub", "deployment-jupyter-to-job", "statefulset-gpu-usage-db"} <= set(pods)
    # When each is sent to a namespace enforcing Pod Security "restricted" (dry run)
    core = client.CoreV1Api(k8s_api)
    refused = {}
    for name, pod in pods.items():
        try:
            await core.create_namespaced_pod(restricted_namespace, pod, dry_run="All")
        except client.ApiException as error:
            refused[name] = status_body(error)["message"]
    # Then the API server takes every one (and so "baseline", the users' namespace's, too)
    assert refused == {}
