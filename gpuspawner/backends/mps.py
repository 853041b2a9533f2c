"""MPS with the NVIDIA device plugin: one slot with fixed memory and compute caps.

Design notes: docs/design/backends.md, "gpuspawner.backends.mps".
"""

from __future__ import annotations

from typing import ClassVar

from gpuspawner.policy.share import GPUShare
from gpuspawner.policy.units import format_mib

from .base import PodGPUPlan, UnsupportedShare
from .device_plugin import DevicePluginSlots
from .framework_limits import framework_memory_limits


class MPSBackend(DevicePluginSlots):
    """``make_backend("mps", replicas=4)``: each server gets one MPS slot of its GPU."""

    name: ClassVar[str] = "mps"
    sharing_strategy: ClassVar[str] = "mps"
    technology: ClassVar[str] = "MPS"

    @property
    def compute_cap_pct(self) -> int:
        """The percentage of the GPU's threads every slot is capped at."""
        return 100 // self.replicas

    def _fill_slot(
        self, plan: PodGPUPlan, share: GPUShare, gpu_model: str | None, gpu_memory_mib: int | None
    ) -> None:
        cap = self.compute_cap_pct
        if share.compute_min_pct is not None and share.compute_min_pct > cap:
            raise UnsupportedShare(
                f"MPS caps every server at {cap}% of the GPU's compute ({self.replicas} slots per "
                f"GPU), so the share {share.describe()} with a compute minimum of "
                f"{share.compute_min_pct}% can never be given. Lower the minimum to {cap}% or "
                "less, give a whole GPU, or configure fewer replicas."
            )
        memory = share.memory_mib
        if gpu_memory_mib is not None:
            # The slot's hard cap is what the server has; soft limits keep JAX from trying to
            # preallocate 75% of the whole device and failing.
            memory = gpu_memory_mib // self.replicas
            plan.environment.update(framework_memory_limits(memory, gpu_memory_mib))
        elif share.memory_mib is not None:
            plan.unhonoured.append(
                f"The {format_mib(share.memory_mib)} memory share could not be checked against "
                "the MPS slot, because the GPU's memory size is unknown."
            )
        self._add_share_environment(plan, share, gpu_model, gpu_memory_mib, self.slot, memory)
        if share.compute_min_pct:
            plan.unhonoured.append(
                f"MPS sets aside no compute for a server: the {share.compute_min_pct}% minimum "
                f"holds only because every server on the GPU is capped at {cap}% of its threads."
            )
        if share.compute_max_pct is not None and share.compute_max_pct > cap:
            plan.unhonoured.append(
                f"Compute cannot burst above {cap}%: MPS caps every server on this GPU at {cap}% "
                f"of its threads, even when the GPU is otherwise idle, so the "
                f"{share.compute_max_pct}% maximum is never reached."
            )
        elif share.compute_max_pct is not None and share.compute_max_pct < cap:
            plan.unhonoured.append(
                f"A compute maximum of {share.compute_max_pct}% is not applied: MPS gives every "
                f"server on this GPU the same {cap}% of its threads."
            )
