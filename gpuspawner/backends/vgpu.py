"""What HAMi and Volcano vGPU have in common: HAMi-core limits asked for per container.

Both take three numbers per container: physical GPUs, memory and cores. How a share maps:

- **GPUs**: 1 for a slice (the count for whole GPUs); it is the number of *physical* GPUs
  the container spans, not a fraction.
- **memory**: the share's memory in MiB. A fraction-only share becomes ``fraction × device
  memory`` in MiB when the device memory is known, otherwise (or with
  ``memory_as="percentage"``, portable across models) a percentage. Percentages round down,
  so that shares add up: four quarters are 25 each, three thirds 33 each.
- **cores**: the compute **minimum** when the share has one, else the fraction as a
  percentage (rounded down), else nothing (no compute limit). Why the minimum: cores are
  counted against the GPU's 100 when placing a pod (HAMi's ``Fit`` skips a GPU when
  ``Totalcore - Usedcores < Coresreq``), and HAMi-core applies them as an
  SM-utilisation limit *only while another task on the GPU is computing* (the default
  policy; maintainers in HAMi #737). So "25% under contention, up to 100% alone" is what a
  minimum of 25 and a maximum of 100 ask for. With ``GPU_CORE_UTILIZATION_POLICY=force`` the
  limit always applies: then it is a hard cap and the maximum is lost (noted).

Memory is a hard cap, and HAMi-core reports the cap as the GPU's total (hooked
``cuMemGetInfo`` and NVML), so frameworks already see only their share: the soft fractions
of :mod:`gpuspawner.backends.framework_limits` would shrink it a second time and are not set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuspawner.policy.share import GPUShare

MEMORY_UNITS = ("mib", "percentage")
CORE_POLICIES = ("default", "force")


@dataclass(frozen=True)
class VGPURequest:
    """The per-GPU numbers a slice asks HAMi-core for; None leaves a resource out."""

    memory_mib: int | None
    memory_pct: int | None
    cores_pct: int | None


def check_vgpu_settings(memory_as: str, core_policy: str) -> None:
    """Raise ValueError for settings other than the known units and policies."""
    if memory_as not in MEMORY_UNITS:
        raise ValueError(f"memory_as must be mib or percentage, got {memory_as!r}.")
    if core_policy not in CORE_POLICIES:
        raise ValueError(
            "core_policy must be default or force, as the cluster's GPU_CORE_UTILIZATION_POLICY "
            f"(HAMi chart devices.nvidia.gpuCorePolicy), got {core_policy!r}."
        )


def _floor_percent(share: GPUShare) -> int:
    assert share.fraction is not None
    return max(1, int(share.fraction * 100))


def vgpu_request(share: GPUShare, gpu_memory_mib: int | None, *, memory_as: str) -> VGPURequest:
    """The memory and cores a slice share asks for (see the module docstring)."""
    memory_mib: int | None = None
    memory_pct: int | None = None
    if share.memory_mib is not None:
        memory_mib = share.memory_mib
    elif memory_as == "mib" and gpu_memory_mib is not None:
        assert share.fraction is not None
        memory_mib = int(share.fraction * gpu_memory_mib)
    else:
        memory_pct = _floor_percent(share)
    if share.compute_min_pct:
        cores_pct: int | None = share.compute_min_pct
    elif share.fraction is not None:
        cores_pct = _floor_percent(share)
    else:
        cores_pct = None
    return VGPURequest(memory_mib, memory_pct, cores_pct)


def compute_notes(
    share: GPUShare, cores_pct: int | None, *, core_policy: str, technology: str
) -> list[str]:
    """What of the share's compute bounds HAMi-core cannot enforce, in sentences."""
    notes = []
    if share.compute_min_pct:
        notes.append(
            f"{technology} reserves no compute: the {share.compute_min_pct}% minimum is a limit "
            f"{technology} applies to every server on the GPU while they compete, and a long "
            "kernel that is already running is not interrupted."
        )
    ceiling = share.compute_max_pct
    if cores_pct is None:
        if ceiling is not None and ceiling < 100:
            notes.append(
                f"A compute maximum of {ceiling}% is not enforced: {technology} limits compute "
                "only through a compute minimum or a fraction, and this share has neither."
            )
        return notes
    if core_policy == "force":
        if ceiling is not None and ceiling > cores_pct:
            notes.append(
                f"Compute cannot go above {cores_pct}%: the cluster runs {technology} with "
                f"GPU_CORE_UTILIZATION_POLICY=force, which makes {cores_pct}% a hard cap even "
                "when the GPU is otherwise idle."
            )
        elif ceiling is not None and ceiling < cores_pct:
            notes.append(
                f"A compute maximum of {ceiling}% is not applied: {technology} caps this server "
                f"at {cores_pct}%."
            )
        return notes
    if ceiling is not None and ceiling < 100:
        notes.append(
            f"A compute maximum of {ceiling}% is not enforced: {technology} applies one compute "
            f"limit per server ({cores_pct}%), and only while other servers compute, so a "
            "server alone on the GPU can use all of it."
        )
    elif ceiling is not None and cores_pct < 100:
        notes.append(
            f"Compute above {cores_pct}% (up to {ceiling}%) is available only while no other "
            "server on the same GPU is computing."
        )
    return notes


def set_vgpu_limits(
    limits: dict[str, str], names: Mapping[str, str], count_key: str, request: VGPURequest
) -> None:
    """One vGPU with the request's memory (MiB or percent) and cores: HAMi and Volcano alike."""
    limits[names[count_key]] = "1"
    if request.memory_mib is not None:
        limits[names["memory"]] = str(request.memory_mib)
    if request.memory_pct is not None:
        limits[names["memory_percentage"]] = str(request.memory_pct)
    if request.cores_pct is not None:
        limits[names["cores"]] = str(request.cores_pct)
