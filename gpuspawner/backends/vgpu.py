"""What HAMi and Volcano vGPU have in common: HAMi-core limits asked for per container.

Design notes: docs/design/backends.md, "gpuspawner.backends.vgpu".
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from gpuspawner.policy.share import GPUShare

from .base import PodGPUPlan, SharingBackend

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


class HAMiCoreBackend(SharingBackend):
    """Base for the back ends whose slices HAMi-core enforces: HAMi and Volcano vGPU.

    A plan names the technology's scheduler; subclasses add what steers the pod to the right
    GPUs (:meth:`_add_placement`) and the limits of whole GPUs (:meth:`_whole_gpu_limits`),
    and a slice is asked for the same way for both (:meth:`_add_slice`).
    """

    technology: ClassVar[str]
    """The technology's name within a sentence (``HAMi``, ``Volcano vGPU``)."""
    gpu_count_key: ClassVar[str]
    """The key in ``resource_names`` of the number of physical GPUs a container spans."""

    def __init__(
        self,
        *,
        scheduler_name: str,
        memory_as: str = "mib",
        core_policy: str = "default",
        **common: Any,
    ) -> None:
        """``memory_as``: ``mib`` (default) or ``percentage`` for fraction-only shares;
        ``core_policy``: the cluster's ``GPU_CORE_UTILIZATION_POLICY`` (``default``/``force``)."""
        check_vgpu_settings(memory_as, core_policy)
        super().__init__(**common)
        self.scheduler_name = scheduler_name
        self.memory_as = memory_as
        self.core_policy = core_policy

    @abstractmethod
    def _add_placement(self, plan: PodGPUPlan, share: GPUShare, gpu_model: str | None) -> None:
        """Add what puts the pod on ``gpu_model`` (or the share's models) and orders it there."""

    @abstractmethod
    def _whole_gpu_limits(self, count: int) -> dict[str, str]:
        """The container limits for ``count`` whole GPUs that no slice may share."""

    def _render(
        self, share: GPUShare, *, gpu_model: str | None, gpu_memory_mib: int | None, name: str
    ) -> PodGPUPlan:
        plan = self._new_plan()
        plan.scheduler_name = self.scheduler_name
        self._add_placement(plan, share, gpu_model)
        if share.is_whole:
            plan.resource_limits.update(self._whole_gpu_limits(share.count))
            self._add_whole_gpu_environment(plan, share, gpu_model, gpu_memory_mib)
        else:
            self._add_slice(plan, share, gpu_model, gpu_memory_mib)
        return plan

    def _add_slice(
        self, plan: PodGPUPlan, share: GPUShare, gpu_model: str | None, gpu_memory_mib: int | None
    ) -> None:
        """Ask for one vGPU with the slice's memory and cores, and note what is not enforced."""
        self._refuse_memory_beyond_device(share, gpu_model, gpu_memory_mib)
        request = vgpu_request(share, gpu_memory_mib, memory_as=self.memory_as)
        set_vgpu_limits(plan.resource_limits, self.resource_names, self.gpu_count_key, request)
        # HAMi-core reports the cap as the GPU's total: no soft fractions (module docstring).
        self._add_share_environment(
            plan, share, gpu_model, gpu_memory_mib, share.fraction, request.memory_mib
        )
        plan.unhonoured.extend(
            compute_notes(
                share, request.cores_pct, core_policy=self.core_policy, technology=self.technology
            )
        )
