"""One GPU pool on Kubernetes: the allocation record that server and job pods both carry.

Design notes: docs/design/core.md, "gpuspawner.core.allocation_record".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..backends.base import GPU_COUNT_LABEL, GPU_MEMORY_LABEL, GPU_PRODUCT_LABEL
from ..policy import Allocation, CapacityPool, GPUDevice

ALLOCATION_ANNOTATION = "gpuspawner.campus-gpu-hub.org/allocation"

MIG_CONFIG_LABEL = "nvidia.com/mig.config"
# GFD's label per MIG slice kind under the device plugin's mixed strategy.
_MIG_SLICE_COUNT_LABEL = re.compile(r"^nvidia\.com/mig-\d+g\.\d+gb\.count$")

# A pod in one of these phases holds no GPU any more.
ENDED_PHASES = frozenset({"Succeeded", "Failed"})


def encode_allocation(allocation: Allocation | Mapping[str, Any]) -> str:
    """The annotation value for ``allocation``: compact JSON with sorted keys."""
    data = allocation.to_dict() if isinstance(allocation, Allocation) else dict(allocation)
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


def decode_allocation(raw: str) -> Allocation:
    """The allocation an annotation value records; raises ValueError when unreadable."""
    try:
        return Allocation.from_dict(json.loads(raw))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"The allocation record {raw[:80]!r} cannot be read: {error}.") from None


def devices_from_nodes(nodes: Iterable[Mapping[str, Any]]) -> list[GPUDevice]:
    """GPUs from node labels written by GPU Feature Discovery; ids are ``<node>/<index>``."""
    devices: list[GPUDevice] = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        labels = node["metadata"].get("labels") or {}
        product = labels.get(GPU_PRODUCT_LABEL)
        try:
            count = int(labels.get(GPU_COUNT_LABEL, "0"))
            memory = int(labels.get(GPU_MEMORY_LABEL, "0"))
        except ValueError:
            continue
        if not product or count <= 0 or memory <= 0:
            continue
        if (node.get("spec") or {}).get("unschedulable"):
            continue
        model = re.sub(r"-(SHARED|MIG-.*)$", "", product)
        model = model.replace("NVIDIA-", "", 1).replace("GeForce-", "", 1)
        name = node["metadata"]["name"]
        mig = _split_into_mig_slices(labels, product)
        driver, cuda = _versions(labels)
        for index in range(count):
            devices.append(
                GPUDevice(
                    id=f"{name}/{index}",
                    index=len(devices),
                    model=model,
                    memory_mib=memory,
                    mig=mig,
                    driver=driver,
                    cuda=cuda,
                )
            )
    return devices


def _versions(labels: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The node's driver and CUDA versions from GFD's labels (``nvidia.com/cuda.driver.major``
    and friends, or the newer ``cuda.driver-version.*``/``cuda.runtime-version.*``); None
    where GFD does not say."""

    def joined(*prefixes: str) -> str | None:
        for prefix in prefixes:
            parts = [labels.get(f"{prefix}.{p}") for p in ("major", "minor", "revision", "rev")]
            found = [p for p in parts if p not in (None, "")]
            if found and all(str(p).isdigit() for p in found):
                return ".".join(str(p) for p in found)
        return None

    return (
        joined("nvidia.com/cuda.driver-version", "nvidia.com/cuda.driver"),
        joined("nvidia.com/cuda.runtime-version", "nvidia.com/cuda.runtime"),
    )


def _split_into_mig_slices(labels: Mapping[str, str], product: str) -> bool:
    """Whether a node's GPUs are whole cards handed out as MIG slices (the device plugin's
    mixed strategy): GFD counts each slice kind, or the MIG Manager's layout
    (``nvidia.com/mig.config``) is not ``all-disabled``. Under the single strategy GFD lists
    each slice as a GPU of its own (``<product>-MIG-<profile>``), so those are not split."""
    if "-MIG-" in product:
        return False
    if any(
        _MIG_SLICE_COUNT_LABEL.match(key) and str(value) not in ("", "0")
        for key, value in labels.items()
    ):
        return True
    config = labels.get(MIG_CONFIG_LABEL)
    return bool(config) and config != "all-disabled"


def allocations_from_pods(pods: Iterable[Mapping[str, Any]]) -> tuple[list[Allocation], list[str]]:
    """The allocations recorded on pods that still hold their GPU, and warnings.

    Ended pods (Succeeded, Failed) hold nothing; a job's retried pods record the same
    allocation once.
    """
    found: dict[str, Allocation] = {}
    warnings: list[str] = []
    for pod in pods:
        metadata = pod.get("metadata") or {}
        raw = (metadata.get("annotations") or {}).get(ALLOCATION_ANNOTATION)
        if not raw:
            continue
        if (pod.get("status") or {}).get("phase") in ENDED_PHASES:
            continue
        if metadata.get("deletionTimestamp"):
            continue
        try:
            allocation = decode_allocation(raw)
        except ValueError as error:
            warnings.append(f"Pod {metadata.get('name')} has an unreadable allocation: {error}")
            continue
        found.setdefault(allocation.key, allocation)
    return list(found.values()), warnings


def pods_by_allocation(pods: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """The pod holding each recorded allocation, by key: ``(namespace, name)``.

    Only pods that still hold their GPU count (as in :func:`allocations_from_pods`); a job's
    retried pods name the live one. The metrics join the DCGM exporter's per-pod readings
    to holders with it.
    """
    found: dict[str, tuple[str, str]] = {}
    for key, _, namespace, name in _live_pods(pods):
        found.setdefault(key, (namespace, name))
    return found


def pods_by_allocation_node(
    pods: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, str], tuple[str, str]]:
    """The pod holding each recorded allocation on each node, by ``(key, node)``: a job on
    several nodes has one pod per node, each holding the GPUs of its node (device ids are
    ``<node>/<index>``). Pods not on a node yet are left out."""
    found: dict[tuple[str, str], tuple[str, str]] = {}
    for key, node, namespace, name in _live_pods(pods):
        if node:
            found.setdefault((key, node), (namespace, name))
    return found


def _live_pods(pods: Iterable[Mapping[str, Any]]) -> Iterator[tuple[str, str, str, str]]:
    """``(key, node, namespace, pod)`` of each live pod that holds a recorded allocation."""
    for pod in pods:
        metadata = pod.get("metadata") or {}
        raw = (metadata.get("annotations") or {}).get(ALLOCATION_ANNOTATION)
        if not raw or metadata.get("deletionTimestamp"):
            continue
        if (pod.get("status") or {}).get("phase") in ENDED_PHASES:
            continue
        try:
            key = json.loads(raw)["key"]
        except (ValueError, KeyError, TypeError):
            continue
        node = (pod.get("spec") or {}).get("nodeName") or ""
        namespace = metadata.get("namespace") or ""
        yield str(key), str(node), str(namespace), str(metadata["name"])


def pool_from_cluster(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    *,
    also: Iterable[Allocation] = (),
) -> tuple[CapacityPool, list[str]]:
    """The one GPU pool of a cluster: GPUs from node labels, slices from pods' records.

    ``also`` adds allocations decided but not yet visible as pods (a job admitted a moment
    ago); a pod's record of the same key wins. Returns the pool and the warnings of
    allocations that do not fit any more.
    """
    pool = CapacityPool(devices_from_nodes(nodes))
    allocations, warnings = allocations_from_pods(pods)
    for allocation in allocations:
        warnings.extend(pool.restore(allocation))
    for allocation in also:
        if allocation.key not in pool.allocations:
            warnings.extend(pool.restore(allocation))
    return pool, warnings
