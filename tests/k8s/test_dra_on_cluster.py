"""Scenarios: GPUs claimed through Dynamic Resource Allocation, on the real scheduler.

The cluster's own components do DRA here: the resource claim controller makes each pod's
ResourceClaim from its template and deletes it with the pod, and kube-scheduler's
DynamicResources plugin allocates it a GPU from the ResourceSlices. The nodes' GPUs are
published, and the claims prepared, by the test cluster's stand-in for NVIDIA's DRA
driver (tests/support/cluster/dra.py): ``add_gpu_nodes(..., dra=True)``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from gpuspawner.backends import make_backend
from gpuspawner.core.allocation_record import devices_from_nodes
from gpuspawner.policy.share import GPUShare
from gpuspawner.spawners.kubernetes import GPUSpawner
from tests.support import eventually
from tests.support.cluster.control_plane import tools_folder
from tests.support.cluster.dra import DRIVER, PublishedGPU, device_class
from tests.support.k8s_spawners import make_gpu_spawner, write_class_catalog

Object = dict[str, Any]
DRA = "/apis/resource.k8s.io/v1"
SECURE = {
    "allowPrivilegeEscalation": False,
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def one_gpu_template(name: str) -> Object:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}
            }
        },
    }


def claiming_pod(name: str, template: str) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "containers": [
                {
                    "name": "main",
                    "image": "quay.io/jupyter/base-notebook:2025-01-06",
                    "resources": {"claims": [{"name": "gpu"}]},
                    "securityContext": SECURE,
                }
            ],
        },
    }


async def api(k8s_api: client.ApiClient, method: str, path: str, body: Any = None) -> Any:
    """A request to the API as the admin; None for a 404."""
    response = await k8s_api.call_api(
        path,
        method,
        body=body,
        header_params={"Content-Type": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    if response.status == 404:
        return None
    assert response.status < 300, await response.text()
    return json.loads(await response.read())


async def claim_of(k8s_api: client.ApiClient, pod: str) -> Object:
    """The ResourceClaim the controller made for ``pod``'s claim ``gpu``."""
    current = await api(k8s_api, "GET", f"/api/v1/namespaces/default/pods/{pod}")
    (status,) = current["status"]["resourceClaimStatuses"]
    assert status["name"] == "gpu"
    claim: Object = await api(
        k8s_api, "GET", f"{DRA}/namespaces/default/resourceclaims/{status['resourceClaimName']}"
    )
    return claim


async def claims(k8s_api: client.ApiClient) -> list[str]:
    listed = await api(k8s_api, "GET", f"{DRA}/namespaces/default/resourceclaims")
    return [item["metadata"]["name"] for item in listed["items"]]


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


async def phase(k8s_api: client.ApiClient, pod: str) -> str:
    current = await client.CoreV1Api(k8s_api).read_namespaced_pod(pod, "default")
    return str(current.status.phase)


def published(k8s_controls: Any, node: str) -> dict[str, PublishedGPU]:
    """The GPUs the driver published on ``node``, with what prepared claims set on them."""
    return k8s_controls.call(lambda: dict(k8s_controls.agent.dra.gpus[node]))  # type: ignore[no-any-return]


def prepared_claims(k8s_controls: Any) -> dict[str, Any]:
    return k8s_controls.call(lambda: dict(k8s_controls.agent.dra.claims))  # type: ignore[no-any-return]


async def test_a_pod_waits_for_a_dra_gpu_then_sees_the_one_allocated_to_its_claim(
    k8s_api, k8s_controls
):
    # Given a cluster with NVIDIA's DRA driver installed but no GPU node yet, a claim
    # template for one GPU of its class, and a pod that uses it
    k8s_controls.add_gpu_nodes(1, prefix="cpu-node", gpu_count=0, extended_resources={})
    await api(k8s_api, "POST", f"{DRA}/deviceclasses", device_class())
    await api(
        k8s_api,
        "POST",
        f"{DRA}/namespaces/default/resourceclaimtemplates",
        one_gpu_template("one-gpu"),
    )
    await client.CoreV1Api(k8s_api).create_namespaced_pod(
        "default", claiming_pod("trainer", "one-gpu")
    )

    # Then the claim controller makes its claim, and the scheduler leaves the pod Pending
    claim = await eventually(lambda: _claim_if_made(k8s_api, "trainer"), what="the claim")
    assert claim["metadata"]["ownerReferences"][0]["name"] == "trainer"
    condition = await eventually(
        lambda: _scheduled_condition(k8s_api, "trainer"), what="the pod to be unschedulable"
    )
    assert condition.status == "False" and condition.reason == "Unschedulable"
    assert condition.message.startswith("0/1 nodes are available: 1 cannot allocate all claims.")

    # When a GPU node whose driver publishes its two GPUs joins
    k8s_controls.add_gpu_nodes(1, dra=True, gpu_count=2)

    # Then the pod runs there with one GPU allocated to its claim and reserved for it
    await eventually(lambda: _is_running(k8s_api, "trainer"), what="the pod to run")
    claim = await claim_of(k8s_api, "trainer")
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"]) == (DRIVER, "gpu-node-0")
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["trainer"]
    # and its container sees that GPU, and only it
    gpu = published(k8s_controls, "gpu-node-0")[result["device"]]
    env = await environment(k8s_controls.kubeconfig, "trainer")
    assert env["CUDA_VISIBLE_DEVICES"] == gpu.uuid
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"

    # When the pod is deleted, its claim goes with it and the node unprepares it
    await client.CoreV1Api(k8s_api).delete_namespaced_pod("trainer", "default")
    await eventually(lambda: _none_left(k8s_api), what="the claim to be deleted")
    await eventually(lambda: not prepared_claims(k8s_controls), what="the node to unprepare")


async def _claim_if_made(k8s_api: client.ApiClient, pod: str) -> Object | None:
    current = await api(k8s_api, "GET", f"/api/v1/namespaces/default/pods/{pod}")
    if not (current.get("status") or {}).get("resourceClaimStatuses"):
        return None
    return await claim_of(k8s_api, pod)


async def _scheduled_condition(k8s_api: client.ApiClient, pod: str) -> Any:
    current = await client.CoreV1Api(k8s_api).read_namespaced_pod(pod, "default")
    return next((c for c in current.status.conditions or [] if c.type == "PodScheduled"), None)


async def _is_running(k8s_api: client.ApiClient, pod: str) -> bool:
    return await phase(k8s_api, pod) == "Running"


async def _none_left(k8s_api: client.ApiClient) -> bool:
    return not await claims(k8s_api)


@pytest.mark.usefixtures("kubespawner_env")
async def test_a_dra_server_start_and_stop_on_the_real_scheduler(k8s_api, k8s_controls, tmp_path):
    # Given a DRA cluster with one A100 node, and a course that gives ana 1/4 of a GPU by MPS
    k8s_controls.add_gpu_nodes(1, dra=True, gpu_count=1)
    GPUSpawner._inventories.clear()
    spawner = make_gpu_spawner(
        "ana",
        write_class_catalog(tmp_path / "catalog.yaml", ["ana"], share="{fraction: 1/4}"),
        sharing_backend="dra",
        sharing_backend_config={},
    )

    # When her server starts, with the hub's identity
    await spawner.start()

    # Then its claim is allocated the node's GPU, with the MPS settings of her share
    claim = await claim_of(k8s_api, spawner.pod_name)
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"], result["device"]) == (DRIVER, "gpu-node-0", "gpu-0")
    (config,) = claim["status"]["allocation"]["devices"]["config"]
    assert config["source"] == "FromClaim"
    assert config["opaque"]["parameters"]["sharing"] == {
        "strategy": "MPS",
        "mpsConfig": {
            "defaultActiveThreadPercentage": 25,
            "defaultPinnedDeviceMemoryLimit": "20Gi",
        },
    }
    # and her server sees that GPU, through the MPS daemon the node started for her claim
    gpu = published(k8s_controls, "gpu-node-0")["gpu-0"]
    env = await environment(k8s_controls.kubeconfig, spawner.pod_name)
    assert env["CUDA_VISIBLE_DEVICES"] == gpu.uuid
    daemon = Path(env["CUDA_MPS_PIPE_DIRECTORY"]).parent
    assert (daemon / "control-daemon").read_text().splitlines() == [
        f"CUDA_VISIBLE_DEVICES={gpu.uuid}",
        "nvidia-cuda-mps-control -d",
        "set_default_active_thread_percentage 25",
        f"set_default_device_pinned_mem_limit {gpu.uuid} 20480M",
    ]
    assert gpu.compute_mode == "EXCLUSIVE_PROCESS"
    assert env["GPUSPAWNER_GPU_FRACTION"] == "1/4"

    # When she stops it
    await spawner.stop()

    # Then her claim and its template are gone, and the node stopped her MPS daemon
    await eventually(lambda: _none_left(k8s_api), what="the claim to be deleted")
    templates = await api(k8s_api, "GET", f"{DRA}/namespaces/default/resourceclaimtemplates")
    assert templates["items"] == []
    await eventually(lambda: not prepared_claims(k8s_controls), what="the node to unprepare")
    assert not daemon.exists()


@pytest.mark.usefixtures("kubespawner_env")
async def test_a_dra_server_gets_an_h100_whose_name_nvml_spells_with_spaces(
    k8s_api, k8s_controls, tmp_path
):
    # Given a DRA node of H100s: GPU feature discovery labels them NVIDIA-H100-80GB-HBM3,
    # and NVIDIA's driver publishes NVML's name, "NVIDIA H100 80GB HBM3"
    k8s_controls.add_gpu_nodes(1, dra=True, gpu_count=1, product="NVIDIA-H100-80GB-HBM3")
    assert published(k8s_controls, "gpu-node-0")["gpu-0"].product == "NVIDIA H100 80GB HBM3"
    GPUSpawner._inventories.clear()
    spawner = make_gpu_spawner(
        "ana",
        write_class_catalog(tmp_path / "catalog.yaml", ["ana"], share="{count: 1}"),
        sharing_backend="dra",
        sharing_backend_config={},
    )

    # When her server starts
    await spawner.start()

    # Then the scheduler found the H100 her claim asks for, and her server sees it
    claim = await claim_of(k8s_api, spawner.pod_name)
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["device"] == "gpu-0"
    env = await environment(k8s_controls.kubeconfig, spawner.pod_name)
    assert env["CUDA_VISIBLE_DEVICES"] == published(k8s_controls, "gpu-node-0")["gpu-0"].uuid
    await spawner.stop()


async def test_each_claim_gets_a_gpu_of_the_model_the_hub_chose_as_the_driver_names_it(
    k8s_api, k8s_controls
):
    # Given DRA nodes whose GPUs NVML names otherwise than GPU feature discovery's labels
    # ("Tesla T4", "NVIDIA A100 80GB PCIe", "NVIDIA GeForce RTX 4090"), and an L40S node
    products = {
        "t4": "Tesla-T4",
        "a100": "NVIDIA-A100-80GB-PCIe",
        "rtx": "NVIDIA-GeForce-RTX-4090",
        "l40s": "NVIDIA-L40S",
    }
    for prefix, product in products.items():
        k8s_controls.add_gpu_nodes(1, prefix=prefix, dra=True, gpu_count=1, product=product)
    nodes = await api(k8s_api, "GET", "/api/v1/nodes")
    models = {d.id.split("/")[0]: d.model for d in devices_from_nodes(nodes["items"])}

    # When a pod claims a whole GPU of each model the hub knows from the labels but the L40S,
    # through the DRA back end's claim template, and one more pod claims an L4
    wanted = {f"on-{node}": model for node, model in models.items() if "L40S" not in model}
    wanted["on-l4"] = "L4"
    for pod, model in wanted.items():
        plan = make_backend("dra").render(
            GPUShare(count=1), gpu_model=f"NVIDIA {model}", name=f"{pod}-gpu"
        )
        (template,) = plan.resource_claim_templates
        await api(k8s_api, "POST", f"{DRA}/namespaces/default/resourceclaimtemplates", template)
        await client.CoreV1Api(k8s_api).create_namespaced_pod(
            "default", claiming_pod(pod, template["metadata"]["name"])
        )

    # Then each runs on the node of its model
    for pod in ("on-t4-0", "on-a100-0", "on-rtx-0"):
        await eventually(lambda pod=pod: _is_running(k8s_api, pod), what=f"{pod} to run")
        current = await client.CoreV1Api(k8s_api).read_namespaced_pod(pod, "default")
        assert current.spec.node_name == pod.removeprefix("on-")
    # and the L4 claim is not given the free L40S: it waits for an L4
    condition = await eventually(
        lambda: _scheduled_condition(k8s_api, "on-l4"), what="the L4 pod to be unschedulable"
    )
    assert condition.reason == "Unschedulable"
    assert "cannot allocate all claims" in condition.message
    k8s_controls.add_gpu_nodes(1, prefix="l4", dra=True, gpu_count=1, product="NVIDIA-L4")
    await eventually(lambda: _is_running(k8s_api, "on-l4"), what="the L4 pod to run")
    current = await client.CoreV1Api(k8s_api).read_namespaced_pod("on-l4", "default")
    assert current.spec.node_name == "l4-0"


@pytest.mark.usefixtures("kubespawner_env")
async def test_a_time_sliced_dra_server_sets_its_gpu_s_time_slice(k8s_api, k8s_controls, tmp_path):
    # Given a DRA cluster whose hub shares GPUs by time-slicing with long slices
    k8s_controls.add_gpu_nodes(1, dra=True, gpu_count=1)
    GPUSpawner._inventories.clear()
    spawner = make_gpu_spawner(
        "ana",
        write_class_catalog(tmp_path / "catalog.yaml", ["ana"], share="{fraction: 1/4}"),
        sharing_backend="dra",
        sharing_backend_config={"sharing_strategy": "TimeSlicing", "time_slicing_interval": "Long"},
    )

    # When her server starts
    await spawner.start()

    # Then the node set her GPU's time slice as the claim's config says, and started no MPS
    gpu = published(k8s_controls, "gpu-node-0")["gpu-0"]
    assert (gpu.compute_mode, gpu.time_slice) == ("DEFAULT", "Long")
    env = await environment(k8s_controls.kubeconfig, spawner.pod_name)
    assert env["CUDA_VISIBLE_DEVICES"] == gpu.uuid
    assert "CUDA_MPS_PIPE_DIRECTORY" not in env
    await spawner.stop()
    await eventually(lambda: _none_left(k8s_api), what="the claim to be deleted")


@pytest.mark.usefixtures("kubespawner_env")
async def test_a_second_dra_server_on_a_taken_gpu_is_refused_and_leaves_nothing(
    k8s_api, k8s_controls, tmp_path
):
    # Given a one-GPU DRA node, where ana's 1/4 server holds the GPU: her claim is
    # allocated the whole device, which no other claim can share
    k8s_controls.add_gpu_nodes(1, dra=True, gpu_count=1)
    GPUSpawner._inventories.clear()
    catalog = write_class_catalog(tmp_path / "catalog.yaml", ["ana", "ben"])
    ana = make_gpu_spawner("ana", catalog, sharing_backend="dra", sharing_backend_config={})
    await ana.start()

    # When ben starts his 1/4 server too
    ben = make_gpu_spawner("ben", catalog, sharing_backend="dra", sharing_backend_config={})
    with pytest.raises(Exception) as refused:
        await ben.start()

    # Then his start is refused, and neither his pod, claim nor template is left
    assert getattr(refused.value, "status_code", None) == 409, refused.value
    pods = await client.CoreV1Api(k8s_api).list_namespaced_pod("default")
    assert [p.metadata.name for p in pods.items] == [ana.pod_name]
    await eventually(lambda: _only_claims_of(k8s_api, ana.pod_name), what="ben's claim to go")
    templates = await api(k8s_api, "GET", f"{DRA}/namespaces/default/resourceclaimtemplates")
    assert [t["metadata"]["name"] for t in templates["items"]] == [f"{ana.pod_name}-gpu"]
    await ana.stop()


async def _only_claims_of(k8s_api: client.ApiClient, pod: str) -> bool:
    return all(name.startswith(f"{pod}-gpu-") for name in await claims(k8s_api))


async def test_a_claim_whose_gpu_config_the_driver_cannot_read_keeps_its_pod_creating(
    k8s_api, k8s_controls
):
    # Given a DRA node, and a claim template whose MPS settings have a field NVIDIA's driver
    # does not know (the API server stores opaque parameters unread: only the driver reads them)
    k8s_controls.add_gpu_nodes(1, dra=True, gpu_count=1)
    template = one_gpu_template("typo")
    template["spec"]["spec"]["devices"]["config"] = [
        {
            "requests": ["gpu"],
            "opaque": {
                "driver": DRIVER,
                "parameters": {
                    "apiVersion": "resource.nvidia.com/v1beta1",
                    "kind": "GpuConfig",
                    "sharing": {"strategy": "MPS", "mpsConfig": {"activeThreadPercentage": 25}},
                },
            },
        }
    ]
    await api(k8s_api, "POST", f"{DRA}/namespaces/default/resourceclaimtemplates", template)

    # When a pod uses it
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_pod("default", claiming_pod("trainer", "typo"))

    # Then the scheduler allocates its claim the GPU, but the node cannot prepare the claim:
    # the pod waits in ContainerCreating, and its events say why
    event = await eventually(
        lambda: _event(core, "trainer", "FailedPrepareDynamicResources"), what="the event"
    )
    claim = await claim_of(k8s_api, "trainer")
    assert claim["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert event.type == "Warning"
    assert event.message == (
        f"Failed to prepare dynamic resources: ResourceClaim {claim['metadata']['name']}: "
        "error decoding config: strict decoding error: unknown field "
        '"sharing.mpsConfig.activeThreadPercentage"'
    )
    current = await core.read_namespaced_pod("trainer", "default")
    assert current.status.phase == "Pending"
    (status,) = current.status.container_statuses
    assert status.state.waiting.reason == "ContainerCreating"


async def _event(core: client.CoreV1Api, pod: str, reason: str) -> Any:
    events = await core.list_namespaced_event(
        "default", field_selector=f"involvedObject.name={pod},reason={reason}"
    )
    return events.items[0] if events.items else None
