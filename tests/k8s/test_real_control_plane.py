"""Scenarios: the test cluster refuses what a real cluster refuses, where the emulator did not.

Each is what a university cluster admin would try first: a stranger's token, a manifest
with a typo'd field, a privileged pod in the users' namespace, a pod naming an account,
Secret, ConfigMap or image that does not exist, a namespace over its quota.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

import pytest
from kubernetes_asyncio import client

from ..support.k8s_cluster import status_body, wait_for

Object = dict[str, Any]


def plain_pod(name: str, **spec: Any) -> Object:
    container = {
        "name": "main",
        "image": "quay.io/jupyter/base-notebook:2025-01-06",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    container.update(spec.pop("container", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [container], **spec},
    }


def call(url: str, token: str | None, ca: str) -> tuple[int, Object]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    context = ssl.create_default_context(cafile=ca)
    try:
        with urllib.request.urlopen(request, context=context) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_stranger_s_token_is_refused_and_no_token_reads_nothing(k8s_controls):
    ca = str(k8s_controls.plane.pki.cert_path)
    pods = f"{k8s_controls.url}/api/v1/namespaces/default/pods"

    forged = call(pods, "not-a-token-this-cluster-issued", ca)
    anonymous = call(pods, None, ca)

    assert forged[0] == 401 and forged[1]["reason"] == "Unauthorized"
    assert anonymous[0] == 403
    assert 'User "system:anonymous" cannot list resource "pods"' in anonymous[1]["message"]


async def test_an_unknown_field_is_refused_under_strict_field_validation(k8s_api):
    core = client.CoreV1Api(k8s_api)
    pod = plain_pod("typo")
    pod["spec"]["containers"][0]["resource"] = {"limits": {"cpu": "1"}}  # "resources"

    with pytest.raises(client.ApiException) as refused:
        await core.create_namespaced_pod("default", pod, field_validation="Strict")

    assert refused.value.status == 400
    assert 'unknown field "spec.containers[0].resource"' in status_body(refused.value)["message"]


async def test_a_privileged_root_host_network_pod_is_refused_in_the_users_namespace(k8s_api):
    core = client.CoreV1Api(k8s_api)
    pod = plain_pod(
        "escape",
        hostNetwork=True,
        container={"securityContext": {"privileged": True, "runAsUser": 0}},
    )

    with pytest.raises(client.ApiException) as refused:
        await core.create_namespaced_pod("default", pod)

    message = status_body(refused.value)["message"]
    assert refused.value.status == 403
    assert 'violates PodSecurity "baseline:latest"' in message
    assert "host namespaces (hostNetwork=true)" in message and "privileged" in message


async def test_a_pod_naming_a_missing_service_account_is_refused(k8s_api):
    core = client.CoreV1Api(k8s_api)

    with pytest.raises(client.ApiException) as refused:
        await core.create_namespaced_pod(
            "default", plain_pod("orphan", serviceAccountName="nobody")
        )

    assert refused.value.status == 403
    assert 'serviceaccount "nobody" not found' in status_body(refused.value)["message"]


async def test_a_pod_naming_a_missing_secret_never_starts_its_container(k8s_api, k8s_controls):
    k8s_controls.add_gpu_nodes(1)
    core = client.CoreV1Api(k8s_api)
    env = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "token"}}}]
    await core.create_namespaced_pod("default", plain_pod("needs-secret", container={"env": env}))

    async def waiting_reason() -> str | None:
        pod = await core.read_namespaced_pod("needs-secret", "default")
        statuses = pod.status.container_statuses or []
        waiting = statuses[0].state.waiting if statuses else None
        return waiting.reason if waiting and waiting.reason != "ContainerCreating" else None

    reason = await wait_for(waiting_reason, timeout=30, what="the container's waiting reason")
    pod = await core.read_namespaced_pod("needs-secret", "default")

    assert reason == "CreateContainerConfigError"
    assert pod.status.container_statuses[0].state.waiting.message == 'secret "absent" not found'
    assert pod.status.phase == "Pending"


async def test_a_pod_mounting_a_missing_configmap_waits_with_failed_mount(k8s_api, k8s_controls):
    k8s_controls.add_gpu_nodes(1)
    core = client.CoreV1Api(k8s_api)
    pod = plain_pod(
        "needs-config",
        volumes=[{"name": "settings", "configMap": {"name": "absent"}}],
        container={"volumeMounts": [{"name": "settings", "mountPath": "/etc/settings"}]},
    )
    await core.create_namespaced_pod("default", pod)

    async def failed_mount() -> Any:
        events = await core.list_namespaced_event(
            "default", field_selector="involvedObject.name=needs-config,reason=FailedMount"
        )
        return events.items

    events = await wait_for(failed_mount, timeout=30, what="a FailedMount event")

    assert 'configmap "absent" not found' in events[0].message
    assert (await core.read_namespaced_pod("needs-config", "default")).status.phase == "Pending"


async def test_an_image_the_registry_does_not_have_is_not_pulled(k8s_api, k8s_controls):
    k8s_controls.add_gpu_nodes(1)
    k8s_controls.fail_image_pull("registry.example.org/missing:1")
    core = client.CoreV1Api(k8s_api)
    pod = plain_pod("typo-image", container={"image": "registry.example.org/missing:1"})
    await core.create_namespaced_pod("default", pod)

    async def pull_backoff() -> bool:
        found = await core.read_namespaced_pod("typo-image", "default")
        statuses = found.status.container_statuses or []
        waiting = statuses[0].state.waiting if statuses else None
        return bool(waiting and waiting.reason == "ImagePullBackOff")

    await wait_for(pull_backoff, timeout=30, what="ImagePullBackOff")


async def test_a_namespace_over_its_quota_refuses_the_next_pod(k8s_api, k8s_namespace):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_resource_quota(
        k8s_namespace,
        {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "1"}}},
    )
    gpu = {"resources": {"limits": {"nvidia.com/gpu": "1"}}}

    async def quota_counted() -> bool:
        quota = await core.read_namespaced_resource_quota("gpus", k8s_namespace)
        return bool(quota.status and quota.status.hard)

    await wait_for(quota_counted, timeout=30, what="the quota controller")
    await core.create_namespaced_pod(k8s_namespace, plain_pod("first", container=gpu))
    with pytest.raises(client.ApiException) as refused:
        await core.create_namespaced_pod(k8s_namespace, plain_pod("second", container=gpu))

    assert refused.value.status == 403
    assert "exceeded quota: gpus" in status_body(refused.value)["message"]


async def test_roles_deployments_and_network_policies_are_served(k8s_api):
    groups = {g.name for g in (await client.ApisApi(k8s_api).get_api_versions()).groups}

    assert {"rbac.authorization.k8s.io", "apps", "networking.k8s.io", "batch"} <= groups
