"""Dynamic Resource Allocation on the test cluster's nodes: NVIDIA's GPU kubelet plugin, played.

On Kubernetes 1.34 DRA is the cluster's own (``DynamicResourceAllocation`` is GA and on by
default, ``resource.k8s.io/v1`` is served): kube-controller-manager's resource claim
controller makes a pod's ResourceClaims from its templates (``<pod>-<entry>-xxxxx``, owned
by the pod, named in ``status.resourceClaimStatuses``) and deletes them once the pod is
done; kube-scheduler's DynamicResources plugin keeps the pod Pending until it can allocate
every claim from the ResourceSlices, then writes ``status.allocation`` (devices, node,
the claim's and class's config) and ``status.reservedFor`` before it binds the pod. What a
GPU node adds is NVIDIA's DRA driver (k8s-dra-driver-gpu, driver ``gpu.nvidia.com``): its
Helm chart installs the DeviceClass ``gpu.nvidia.com``, and its kubelet plugin on each node
publishes the node's GPUs and prepares the claims of the pods the node runs. This module
plays that part for the node agent's nodes (``add_gpu_nodes(..., dra=True)``):

- **publish**: one ResourceSlice per node (``<node>-gpu.nvidia.com-xxxxx``, pool = the
  node, owned by the Node), written under the node's own identity, which NodeRestriction
  lets write only slices of its own ``nodeName``. Each GPU is a device ``gpu-<i>`` with the
  attributes the driver publishes (``cmd/gpu-kubelet-plugin/deviceinfo.go``): ``type``
  (``gpu``), ``uuid``, ``productName`` (NVML's name: ``NVIDIA H100 80GB HBM3`` where GPU
  feature discovery's label says ``NVIDIA-H100-80GB-HBM3``), ``brand``, ``architecture``,
  ``cudaComputeCapability``, ``driverVersion``, ``cudaDriverVersion``, ``pcieBusID``, and
  the capacity ``memory``.
- **prepare** (the kubelet's ``PrepareDynamicResources`` and the plugin's
  ``NodePrepareResources``, after the pod's volumes and before its containers): each claim
  of the pod is read as the node, must be reserved for the pod (and owned by it when made
  from a template), and its allocated devices must be this node's; otherwise the pod waits
  in ContainerCreating with a ``FailedPrepareDynamicResources`` event, as on a real node.
  The claim's opaque ``GpuConfig`` (``resource.nvidia.com/v1beta1``, read strictly, as the
  driver decodes it) is applied as the driver would: **MPS** starts a control daemon per
  claim (here: its pipe, shm and log folders and a ``control-daemon`` file with the
  commands and ``CUDA_VISIBLE_DEVICES`` the driver's daemon Deployment runs, such as
  ``set_default_active_thread_percentage 25``) and puts the GPU in ``EXCLUSIVE_PROCESS``;
  **TimeSlicing** sets the GPU's compute mode ``DEFAULT`` and its time slice (recorded on
  the GPU: ``PublishedGPU.compute_mode``/``time_slice``).
- **the container's environment** (what the driver's CDI spec edits make of a container
  that lists the claim in ``resources.claims``): ``NVIDIA_VISIBLE_DEVICES=void`` (the
  driver's common edit), ``CUDA_MPS_PIPE_DIRECTORY`` for an MPS claim (the daemon's pipe
  folder; the driver bind-mounts it at ``/tmp/nvidia-mps``), and ``CUDA_VISIBLE_DEVICES``
  with the allocated GPUs' UUIDs. The last one is this node's stand-in: the driver injects
  the GPUs' device nodes (``/dev/nvidia<N>``), so CUDA in the container sees only them; a
  local process has no device nodes to be given, so it is told their UUIDs instead.
- **unprepare**: when the pod is gone the claim's daemon folders are removed and the
  claim forgotten (``NodeUnprepareResources``).

What only a node with the driver and GPUs does: the device nodes and CDI spec files, the
MPS control daemon itself (its thread and pinned-memory limits enforced), nvidia-smi's
compute mode and time slice on the GPU, MIG devices (``mig.nvidia.com``), the driver's
health checks and its feature gates (``MPSSupport`` and ``TimeSlicingSettings`` are taken
as enabled here, as an admin using sharing sets them).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import uuid
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..k8s_emulator.client import ClientError, KubeClient
from ..k8s_emulator.kubelet import VolumeMountError

Object = dict[str, Any]

DRIVER = "gpu.nvidia.com"
RESOURCE_API = "/apis/resource.k8s.io/v1"
CONFIG_API_VERSION = "resource.nvidia.com/v1beta1"
DRIVER_VERSION = "570.133.20"
CUDA_DRIVER_VERSION = "12.8.0"
TIME_SLICE_INTERVALS = ("Default", "Short", "Medium", "Long")

# NVML's names where GPU feature discovery's label (spaces made dashes) hides more than
# the first space; otherwise the first dash of the label was NVML's space.
NVML_NAMES = {
    "NVIDIA-H100-80GB-HBM3": "NVIDIA H100 80GB HBM3",
    "NVIDIA-H100-PCIe": "NVIDIA H100 PCIe",
    "NVIDIA-H100-NVL": "NVIDIA H100 NVL",
    "NVIDIA-A100-80GB-PCIe": "NVIDIA A100 80GB PCIe",
    "NVIDIA-GeForce-RTX-4090": "NVIDIA GeForce RTX 4090",
    "NVIDIA-RTX-A6000": "NVIDIA RTX A6000",
    "NVIDIA-RTX-6000-Ada-Generation": "NVIDIA RTX 6000 Ada Generation",
}
# (architecture, CUDA compute capability) by the model in the product's name.
ARCHITECTURES = (
    ("A100", "Ampere", "8.0"),
    ("A30", "Ampere", "8.0"),
    ("A10", "Ampere", "8.6"),
    ("A40", "Ampere", "8.6"),
    ("RTX A", "Ampere", "8.6"),
    ("H100", "Hopper", "9.0"),
    ("H200", "Hopper", "9.0"),
    ("B200", "Blackwell", "10.0"),
    ("L40", "Ada Lovelace", "8.9"),
    ("L4", "Ada Lovelace", "8.9"),
    ("RTX 4090", "Ada Lovelace", "8.9"),
    ("Ada", "Ada Lovelace", "8.9"),
    ("T4", "Turing", "7.5"),
    ("V100", "Volta", "7.0"),
)


def nvml_name(product_label: str) -> str:
    """The GPU's name as NVML says it (and the driver publishes it) for GPU feature
    discovery's ``nvidia.com/gpu.product`` label."""
    return NVML_NAMES.get(product_label) or product_label.replace("-", " ", 1)


def device_class() -> Object:
    """The DeviceClass the driver's Helm chart installs: every full GPU of the driver.

    (The chart also sets ``extendedResourceName: nvidia.com/gpu``, a field of the
    ``DRAExtendedResource`` feature, alpha and off in 1.34: the API server drops it.)
    """
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DRIVER},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.driver == '{DRIVER}' && "
                        f"device.attributes['{DRIVER}'].type == 'gpu'"
                    }
                }
            ]
        },
    }


@dataclass
class PublishedGPU:
    """One GPU of a node, as the driver publishes it, and what preparing claims set on it."""

    node: str
    index: int
    product: str
    memory_mib: int
    compute_mode: str = "DEFAULT"
    time_slice: str = "Default"

    @property
    def name(self) -> str:
        return f"gpu-{self.index}"

    @property
    def uuid(self) -> str:
        return f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'campus-test:{self.node}/{self.index}')}"

    def device(self) -> Object:
        """The device entry of the node's ResourceSlice."""
        architecture, capability = next(
            ((arch, cc) for model, arch, cc in ARCHITECTURES if model in self.product),
            ("Unknown", "0.0"),
        )
        brand = "Tesla" if self.product.startswith("Tesla") else "Nvidia"
        return {
            "name": self.name,
            "attributes": {
                "type": {"string": "gpu"},
                "uuid": {"string": self.uuid},
                "productName": {"string": self.product},
                "brand": {"string": brand},
                "architecture": {"string": architecture},
                "cudaComputeCapability": {"version": f"{capability}.0"},
                "driverVersion": {"version": DRIVER_VERSION},
                "cudaDriverVersion": {"version": CUDA_DRIVER_VERSION},
                "pcieBusID": {"string": f"0000:{0x18 + self.index:02x}:00.0"},
            },
            "capacity": {"memory": {"value": f"{self.memory_mib}Mi"}},
        }


def resource_slice(node: Object, gpus: list[PublishedGPU]) -> Object:
    """The ResourceSlice the driver's kubelet plugin publishes for ``node``'s ``gpus``."""
    name = node["metadata"]["name"]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "generateName": f"{name}-{DRIVER}-",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": name,
                    "uid": node["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "driver": DRIVER,
            "nodeName": name,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [gpu.device() for gpu in gpus],
        },
    }


class ClaimNotPrepared(VolumeMountError):
    """A claim of the pod cannot be prepared yet: the pod waits in ContainerCreating."""

    reason = "FailedPrepareDynamicResources"

    def __init__(self, problem: str) -> None:
        super().__init__(f"Failed to prepare dynamic resources: {problem}")


@dataclass
class PreparedClaim:
    """What the node made of one ResourceClaim for the pods that use it."""

    uid: str
    namespace: str
    name: str
    gpus: dict[str, list[PublishedGPU]]
    """The claim's GPUs, by the request they were allocated for."""
    sharing: Object | None
    """The ``sharing`` part of the driver's GpuConfig that applies, if any."""
    environment: dict[str, str]
    """What the driver's CDI edits for the claim add to its containers' environment."""
    mps_folder: Path | None = None
    pods: set[str] = field(default_factory=set)


class GPUKubeletPlugin:
    """NVIDIA's GPU kubelet plugin on each of the node agent's DRA nodes (module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.gpus: dict[str, dict[str, PublishedGPU]] = {}
        self.claims: dict[str, PreparedClaim] = {}

    # -- publishing ------------------------------------------------------------------------

    async def publish(self, node_client: KubeClient, admin: KubeClient, node: Object) -> Object:
        """Publish ``node``'s GPUs (from its GPU feature discovery labels) as one
        ResourceSlice, as the node; the DeviceClass is installed once, as the chart does."""
        with contextlib.suppress(ClientError):
            await admin.create(f"{RESOURCE_API}/deviceclasses", device_class())
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        gpus = [
            PublishedGPU(
                node=name,
                index=index,
                product=nvml_name(labels["nvidia.com/gpu.product"]),
                memory_mib=int(labels["nvidia.com/gpu.memory"]),
            )
            for index in range(int(labels.get("nvidia.com/gpu.count", "0")))
        ]
        self.gpus[name] = {gpu.name: gpu for gpu in gpus}
        created: Object = await node_client.create(
            f"{RESOURCE_API}/resourceslices", resource_slice(node, gpus)
        )
        return created

    # -- preparing -------------------------------------------------------------------------

    async def prepare(self, pod: Object, node: str, client: KubeClient) -> None:
        """Prepare every claim of ``pod`` on ``node`` (read with the node's ``client``);
        raises :class:`ClaimNotPrepared` while one cannot be."""
        uid = pod["metadata"]["uid"]
        for entry in pod["spec"].get("resourceClaims") or []:
            claim = await self._claim(pod, entry, client)
            if claim is None:
                continue
            meta = claim["metadata"]
            prepared = self.claims.get(meta["uid"])
            if prepared is None:
                prepared = self._prepare_claim(claim, node)
                self.claims[meta["uid"]] = prepared
            prepared.pods.add(uid)

    async def _claim(self, pod: Object, entry: Object, client: KubeClient) -> Object | None:
        """The pod's claim for ``entry``, checked as the kubelet checks it."""
        meta = pod["metadata"]
        name = entry.get("resourceClaimName")
        from_template = name is None
        if from_template:
            statuses = {
                s["name"]: s for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
            }
            if entry["name"] not in statuses:
                raise ClaimNotPrepared(
                    f'pod "{meta["namespace"]}/{meta["name"]}": ResourceClaim for pod claim '
                    f'"{entry["name"]}" not created yet'
                )
            name = statuses[entry["name"]].get("resourceClaimName")
            if name is None:
                return None  # the controller decided that no claim is needed
        try:
            claim: Object = await client.get(
                f"{RESOURCE_API}/namespaces/{meta['namespace']}/resourceclaims/{name}"
            )
        except ClientError as error:
            raise ClaimNotPrepared(f"fetch ResourceClaim {name}: {error}") from None
        if from_template and not any(
            ref.get("uid") == meta["uid"] for ref in claim["metadata"].get("ownerReferences") or []
        ):
            raise ClaimNotPrepared(
                f"ResourceClaim {meta['namespace']}/{name} was not created for pod "
                f"{meta['namespace']}/{meta['name']} (pod is not owner)"
            )
        reserved = (claim.get("status") or {}).get("reservedFor") or []
        if not any(r.get("uid") == meta["uid"] for r in reserved):
            raise ClaimNotPrepared(
                f"pod {meta['name']} ({meta['uid']}) is not allowed to use ResourceClaim "
                f"{name} ({claim['metadata']['uid']})"
            )
        return claim

    def _prepare_claim(self, claim: Object, node: str) -> PreparedClaim:
        meta = claim["metadata"]
        allocation = (claim.get("status") or {}).get("allocation") or {}
        devices = allocation.get("devices") or {}
        published = self.gpus.get(node, {})
        gpus: dict[str, list[PublishedGPU]] = {}
        for result in devices.get("results") or []:
            if result.get("driver") != DRIVER:
                raise ClaimNotPrepared(
                    f"DRA driver {result.get('driver')} is not registered on node {node}"
                )
            gpu = published.get(result.get("device", ""))
            if result.get("pool") != node or gpu is None:
                raise ClaimNotPrepared(
                    f"ResourceClaim {meta['name']}: requested device is not allocatable: "
                    f"{result.get('pool')}/{result.get('device')}"
                )
            gpus.setdefault(result["request"], []).append(gpu)
        sharing = _sharing(devices.get("config") or [], list(gpus), meta["name"])
        prepared = PreparedClaim(
            uid=meta["uid"],
            namespace=meta["namespace"],
            name=meta["name"],
            gpus=gpus,
            sharing=sharing,
            environment={"NVIDIA_VISIBLE_DEVICES": "void"},
        )
        everything = [gpu for request in gpus.values() for gpu in request]
        if sharing is not None and sharing["strategy"] == "TimeSlicing":
            interval = (sharing.get("timeSlicingConfig") or {}).get("interval", "Default")
            for gpu in everything:
                gpu.compute_mode, gpu.time_slice = "DEFAULT", interval
        elif sharing is not None and sharing["strategy"] == "MPS":
            prepared.mps_folder = self._start_mps_daemon(
                node, meta["uid"], everything, sharing.get("mpsConfig") or {}
            )
            prepared.environment["CUDA_MPS_PIPE_DIRECTORY"] = str(prepared.mps_folder / "pipe")
            for gpu in everything:
                gpu.compute_mode = "EXCLUSIVE_PROCESS"
        return prepared

    def _start_mps_daemon(
        self, node: str, claim_uid: str, gpus: list[PublishedGPU], config: Object
    ) -> Path:
        """The claim's MPS control daemon: its folders, and what the driver's daemon
        Deployment would run (``templates/mps-control-daemon.tmpl.yaml``)."""
        folder = self.folder / node / DRIVER / "mps" / claim_uid
        for part in ("pipe", "shm", "log"):
            (folder / part).mkdir(parents=True, exist_ok=True)
        uuids = [gpu.uuid for gpu in gpus]
        lines = [f"CUDA_VISIBLE_DEVICES={','.join(uuids)}", "nvidia-cuda-mps-control -d"]
        if config.get("defaultActiveThreadPercentage") is not None:
            lines.append(
                f"set_default_active_thread_percentage {config['defaultActiveThreadPercentage']}"
            )
        limits = dict.fromkeys(uuids, config.get("defaultPinnedDeviceMemoryLimit"))
        for key, value in (config.get("defaultPerDevicePinnedMemoryLimit") or {}).items():
            limits[uuids[int(key)] if key.isdigit() else key] = value
        for device, limit in limits.items():
            if limit is not None:
                lines.append(f"set_default_device_pinned_mem_limit {device} {_megabytes(limit)}")
        (folder / "control-daemon").write_text("\n".join(lines) + "\n")
        return folder

    def container_environment(self, pod: Object, container: Object) -> dict[str, str]:
        """What the CDI edits of the claims ``container`` lists add to its environment."""
        statuses = {
            s["name"]: s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        }
        entries = {e["name"]: e for e in pod["spec"].get("resourceClaims") or []}
        namespace = pod["metadata"]["namespace"]
        environment: dict[str, str] = {}
        visible: list[str] = []
        for wanted in (container.get("resources") or {}).get("claims") or []:
            entry = entries.get(wanted["name"], {})
            name = entry.get("resourceClaimName") or statuses.get(wanted["name"])
            prepared = next(
                (c for c in self.claims.values() if (c.namespace, c.name) == (namespace, name)),
                None,
            )
            if prepared is None:
                continue
            environment.update(prepared.environment)
            for request, gpus in prepared.gpus.items():
                if wanted.get("request") in (None, request):
                    visible.extend(gpu.uuid for gpu in gpus if gpu.uuid not in visible)
        if visible:
            environment["CUDA_VISIBLE_DEVICES"] = ",".join(visible)
        return environment

    def unprepare(self, pod_uid: str) -> None:
        """The pod is gone: claims no other pod of this node uses are unprepared."""
        for claim_uid, prepared in list(self.claims.items()):
            prepared.pods.discard(pod_uid)
            if prepared.pods:
                continue
            if prepared.mps_folder is not None:
                shutil.rmtree(prepared.mps_folder, ignore_errors=True)
            del self.claims[claim_uid]


def _sharing(configs: list[Object], requests: list[str], claim: str) -> Object | None:
    """The GpuConfig sharing that applies to the claim's requests: the class's config, then
    the claim's (later wins), each decoded strictly as the driver decodes it."""
    chosen: Object | None = None
    for source in ("FromClass", "FromClaim"):
        for config in configs:
            opaque = config.get("opaque") or {}
            if config.get("source") != source or opaque.get("driver") != DRIVER:
                continue
            applies_to = config.get("requests") or requests
            if not set(applies_to) & set(requests):
                continue
            chosen = _decode_gpu_config(opaque.get("parameters") or {}, claim)
    return chosen


def _decode_gpu_config(parameters: Object, claim: str) -> Object | None:
    def refuse(problem: str) -> ClaimNotPrepared:
        return ClaimNotPrepared(f"ResourceClaim {claim}: error decoding config: {problem}")

    kind = f"{parameters.get('apiVersion')}, Kind={parameters.get('kind')}"
    if kind != f"{CONFIG_API_VERSION}, Kind=GpuConfig":
        raise refuse(f'no kind "{parameters.get("kind")}" is registered for version "{kind}"')
    _strict(parameters, {"apiVersion", "kind", "sharing"}, "", refuse)
    sharing = parameters.get("sharing")
    if sharing is None:
        return None
    _strict(sharing, {"strategy", "timeSlicingConfig", "mpsConfig"}, "sharing.", refuse)
    strategy = sharing.get("strategy")
    if strategy == "TimeSlicing":
        if "mpsConfig" in sharing:
            raise refuse("cannot use MpsConfig with the 'TimeSlicing' strategy")
        settings = sharing.get("timeSlicingConfig") or {}
        _strict(settings, {"interval"}, "sharing.timeSlicingConfig.", refuse)
        if settings.get("interval", "Default") not in TIME_SLICE_INTERVALS:
            raise refuse(f"unknown time-slice interval: {settings.get('interval')}")
    elif strategy == "MPS":
        if "timeSlicingConfig" in sharing:
            raise refuse("cannot use TimeSlicingConfig with the 'MPS' strategy")
        settings = sharing.get("mpsConfig") or {}
        allowed = {
            "defaultActiveThreadPercentage",
            "defaultPinnedDeviceMemoryLimit",
            "defaultPerDevicePinnedMemoryLimit",
        }
        _strict(settings, allowed, "sharing.mpsConfig.", refuse)
        threads = settings.get("defaultActiveThreadPercentage")
        if threads is not None and (not isinstance(threads, int) or not 0 <= threads <= 100):
            raise refuse("active thread percentage must be an integer from 0 to 100")
        for limit in [
            settings.get("defaultPinnedDeviceMemoryLimit"),
            *(settings.get("defaultPerDevicePinnedMemoryLimit") or {}).values(),
        ]:
            try:
                too_low = limit is not None and _megabytes(limit) == "0M"
            except ValueError as error:
                raise refuse(str(error)) from None
            if too_low:
                raise refuse(f"invalid limit: value set too low: {limit}")
    else:
        raise refuse(f"unknown GPU sharing strategy: {strategy}")
    return dict(sharing)


def _strict(section: Object, allowed: set[str], prefix: str, refuse: Any) -> None:
    unknown = sorted(set(section) - allowed)
    if unknown:
        raise refuse(f'strict decoding error: unknown field "{prefix}{unknown[0]}"')


UNITS = {"": 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6}
UNITS.update({"G": 10**9, "T": 10**12})


def _megabytes(quantity: str) -> str:
    """A memory quantity as the driver gives it to ``nvidia-cuda-mps-control`` (``10240M``:
    whole MiB, which MPS calls M)."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]i?|k)?", str(quantity))
    if match is None:
        raise ValueError(f"quantities must match the regular expression: {quantity!r}")
    size = Fraction(match.group(1)) * UNITS[match.group(2) or ""]
    return f"{int(size) // 2**20}M"
