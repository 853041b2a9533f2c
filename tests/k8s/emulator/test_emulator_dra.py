"""Simulated DRA: a pod's claims keep it Pending until a device is allocated to them."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from gpuspawner.kubernetes import GPUSpawner
from tests.support.k8s_cluster import wait_for
from tests.support.k8s_manifests import pod
from tests.support.k8s_spawners import make_gpu_spawner, write_class_catalog

DRA = "/apis/resource.k8s.io/v1"


def gpu_template(name: str = "one-gpu", count: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count},
                        }
                    ]
                }
            }
        },
    }


def claiming_pod(name: str, template: str = "one-gpu") -> dict[str, Any]:
    manifest = pod(name)
    manifest["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    manifest["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    return manifest


async def call(cluster: Any, method: str, path: str, body: Any = None) -> Any:
    async with aiohttp.ClientSession() as session:
        async with session.request(method, f"{cluster.url}{path}", json=body) as response:
            assert response.status < 300, await response.text()
            return await response.json()


async def scheduled_condition(core: client.CoreV1Api, name: str) -> Any:
    current = await core.read_namespaced_pod(name, "default")
    return next((c for c in current.status.conditions or [] if c.type == "PodScheduled"), None)


async def phase(core: client.CoreV1Api, name: str) -> str:
    return (await core.read_namespaced_pod(name, "default")).status.phase


async def test_a_claiming_pod_waits_for_a_device_then_runs_on_its_node(k8s_api, k8s_controls):
    # Given a cluster that simulates DRA, with two nodes and no devices published yet
    k8s_controls.add_gpu_nodes(2, gpu_count=0)
    k8s_controls.simulate_dra()
    core = client.CoreV1Api(k8s_api)
    await call(
        k8s_controls, "POST", f"{DRA}/namespaces/default/resourceclaimtemplates", gpu_template()
    )

    # When a pod asks for one GPU through a claim template
    await core.create_namespaced_pod("default", claiming_pod("trainer"))

    # Then its claim is made from the template, and the pod stays Pending, unschedulable
    async def unschedulable() -> Any:
        condition = await scheduled_condition(core, "trainer")
        return condition if condition and condition.reason == "Unschedulable" else None

    condition = await wait_for(unschedulable, what="PodScheduled False")
    assert condition.status == "False"
    assert condition.message.startswith("0/2 nodes are available: 2 cannot allocate all claims.")
    current = await core.read_namespaced_pod("trainer", "default")
    (claim_status,) = current.status.resource_claim_statuses
    assert claim_status.name == "gpu" and claim_status.resource_claim_name.startswith(
        "trainer-gpu-"
    )
    claim = await call(
        k8s_controls,
        "GET",
        f"{DRA}/namespaces/default/resourceclaims/{claim_status.resource_claim_name}",
    )
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/pod-claim-name": "gpu"}
    assert claim["metadata"]["ownerReferences"][0]["uid"] == current.metadata.uid
    assert "allocation" not in (claim.get("status") or {})

    # When a GPU driver publishes one device on the second node
    k8s_controls.add_dra_devices("gpu-node-1", 1)

    # Then the claim is allocated that device and the pod runs there
    await wait_for(lambda: _is(phase(core, "trainer"), "Running"), what="Running")
    current = await core.read_namespaced_pod("trainer", "default")
    assert current.spec.node_name == "gpu-node-1"
    claim = await call(
        k8s_controls,
        "GET",
        f"{DRA}/namespaces/default/resourceclaims/{claim_status.resource_claim_name}",
    )
    assert claim["status"]["allocation"]["devices"]["results"] == [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "gpu-node-1", "device": "gpu-0"}
    ]
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "trainer", "uid": current.metadata.uid}
    ]


async def _is(value: Any, expected: Any) -> bool:
    return (await value) == expected


async def test_a_device_is_not_given_twice_and_is_free_again_when_its_pod_goes(
    k8s_api, k8s_controls
):
    k8s_controls.add_gpu_nodes(1, gpu_count=0)
    k8s_controls.simulate_dra()
    k8s_controls.add_dra_devices("gpu-node-0", 1)
    core = client.CoreV1Api(k8s_api)
    await call(
        k8s_controls, "POST", f"{DRA}/namespaces/default/resourceclaimtemplates", gpu_template()
    )
    await core.create_namespaced_pod("default", claiming_pod("first"))
    await wait_for(lambda: _is(phase(core, "first"), "Running"), what="first Running")

    await core.create_namespaced_pod("default", claiming_pod("second"))
    await wait_for(
        lambda: _reason(core, "second", "Unschedulable"), what="second waiting for a device"
    )

    await core.delete_namespaced_pod("first", "default", grace_period_seconds=0)
    await wait_for(lambda: _is(phase(core, "second"), "Running"), what="second Running")


async def _reason(core: client.CoreV1Api, name: str, reason: str) -> bool:
    condition = await scheduled_condition(core, name)
    return condition is not None and condition.reason == reason


async def test_a_missing_claim_template_keeps_the_pod_pending_and_says_so(k8s_api, k8s_controls):
    k8s_controls.add_gpu_nodes(1, gpu_count=0)
    k8s_controls.simulate_dra()
    k8s_controls.add_dra_devices("gpu-node-0", 4)
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_pod("default", claiming_pod("orphan", template="nowhere"))
    await wait_for(lambda: _reason(core, "orphan", "Unschedulable"), what="unschedulable")
    condition = await scheduled_condition(core, "orphan")
    assert 'resourceclaimtemplate "nowhere" not found' in condition.message
    # Once the template exists, the pod gets its device.
    await call(
        k8s_controls,
        "POST",
        f"{DRA}/namespaces/default/resourceclaimtemplates",
        gpu_template("nowhere"),
    )
    k8s_controls.add_dra_devices("gpu-node-0", 1)  # any slice change makes the scheduler retry
    await wait_for(lambda: _is(phase(core, "orphan"), "Running"), what="Running")


async def test_without_simulated_dra_claims_do_not_hold_a_pod(k8s_api, k8s_controls):
    k8s_controls.add_gpu_nodes(1, gpu_count=0)
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_pod("default", claiming_pod("plain", template="nowhere"))
    await wait_for(lambda: _is(phase(core, "plain"), "Running"), what="Running")


@pytest.mark.usefixtures("kubespawner_env")
async def test_a_gpuspawner_dra_server_runs_once_its_claim_gets_a_gpu(
    k8s_api, k8s_controls, tmp_path
):
    # Given a DRA cluster whose GPU driver publishes one device on the only GPU node
    k8s_controls.add_gpu_nodes(1, gpu_count=1)
    k8s_controls.simulate_dra()
    k8s_controls.add_dra_devices("gpu-node-0", 1)
    GPUSpawner._inventories.clear()
    spawner = make_gpu_spawner(
        "ana",
        write_class_catalog(tmp_path / "catalog.yaml", ["ana"], share="{count: 1}"),
        sharing_backend="dra",
        sharing_backend_config={},
        start_timeout=20,
    )
    # When her server starts with the back end's ResourceClaimTemplate
    await spawner.start()
    # Then the pod runs on that node with the device allocated to its claim
    core = client.CoreV1Api(k8s_api)
    current = await core.read_namespaced_pod(spawner.pod_name, "default")
    assert current.status.phase == "Running" and current.spec.node_name == "gpu-node-0"
    (status,) = current.status.resource_claim_statuses
    claim = await call(
        k8s_controls, "GET", f"{DRA}/namespaces/default/resourceclaims/{status.resource_claim_name}"
    )
    assert claim["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    await spawner.stop()
