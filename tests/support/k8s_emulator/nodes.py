"""Node objects as a GPU cluster registers them: labels from NVIDIA GPU feature discovery,
allocatable cpu/memory/pods and extended resources from device plugins."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .timestamps import rfc3339


def node(
    name: str,
    *,
    cpu: str = "32",
    memory: str = "256Gi",
    pods: int = 110,
    extended_resources: Mapping[str, int | str] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    address: str = "10.0.0.1",
    ready: bool = True,
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A Ready node with ``status.allocatable`` (= capacity) holding cpu, memory, pods,
    ephemeral-storage and ``extended_resources`` such as {"nvidia.com/gpu": 4}."""
    allocatable: dict[str, str] = {
        "cpu": cpu,
        "memory": memory,
        "pods": str(pods),
        "ephemeral-storage": "500Gi",
    }
    allocatable.update({k: str(v) for k, v in (extended_resources or {}).items()})
    moment = rfc3339()
    spec: dict[str, Any] = {"podCIDR": "10.244.0.0/24"}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                **(labels or {}),
            },
        },
        "spec": spec,
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "message": "kubelet is posting ready status"
                    if ready
                    else "container runtime network not ready",
                    "lastHeartbeatTime": moment,
                    "lastTransitionTime": moment,
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": address},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "kubeletVersion": "v1.34.0",
                "kubeProxyVersion": "v1.34.0",
                "containerRuntimeVersion": "containerd://1.7.27",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": "Ubuntu 24.04 LTS",
                "kernelVersion": "6.8.0",
                "machineID": name,
                "systemUUID": name,
                "bootID": name,
            },
        },
    }


def gpu_node(
    name: str,
    *,
    product: str = "NVIDIA-A100-SXM4-80GB",
    gpu_count: int = 4,
    gpu_memory_mib: int = 81920,
    mig_capable: bool = False,
    extended_resources: Mapping[str, int | str] | None = None,
    labels: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """A GPU node: GPU feature discovery labels (``nvidia.com/gpu.product``,
    ``nvidia.com/gpu.memory`` in MiB, ``nvidia.com/gpu.count``, ``nvidia.com/mig.capable``)
    and, unless ``extended_resources`` says otherwise, ``nvidia.com/gpu: gpu_count``.
    Pass ``extended_resources`` for MIG slices, HAMi (nvidia.com/gpumem, gpucores) or
    time-slicing replicas."""
    gpu_labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.memory": str(gpu_memory_mib),
        "nvidia.com/gpu.count": str(gpu_count),
        "nvidia.com/mig.capable": "true" if mig_capable else "false",
        **(labels or {}),
    }
    resources = (
        {"nvidia.com/gpu": gpu_count} if extended_resources is None else dict(extended_resources)
    )
    return node(name, labels=gpu_labels, extended_resources=resources, **kwargs)
