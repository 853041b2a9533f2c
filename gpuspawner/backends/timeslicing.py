"""Time-slicing with the NVIDIA device plugin: one slot of ``1/replicas`` of a GPU, no isolation.

"Nothing special is done to isolate workloads … each workload has access to the GPU memory
and runs in the same fault-domain" (device plugin README). So the memory share is applied
only as framework soft limits (fractions of the whole device, which is what frameworks see)
and reported in ``unhonoured``, as are compute bounds: every process gets an equal turn.
Slot rules and node selection: :mod:`gpuspawner.backends.device_plugin`.
"""

from __future__ import annotations

from typing import ClassVar

from gpuspawner.policy.share import GPUShare

from .base import PodGPUPlan
from .device_plugin import DevicePluginSlots
from .framework_limits import memory_not_isolated


class TimeSlicingBackend(DevicePluginSlots):
    """``make_backend("time-slicing", replicas=4)``; rename slots with
    ``resource_names={"shared": "nvidia.com/gpu.shared"}`` when the plugin uses ``renameByDefault``."""

    name: ClassVar[str] = "time-slicing"
    sharing_strategy: ClassVar[str] = "time-slicing"
    technology: ClassVar[str] = "time-slicing"

    def _fill_slot(
        self, plan: PodGPUPlan, share: GPUShare, gpu_model: str | None, gpu_memory_mib: int | None
    ) -> None:
        memory = self._add_soft_memory_limits(plan, share, gpu_model, gpu_memory_mib, self.slot)
        if memory is not None and gpu_memory_mib is not None:
            plan.unhonoured.append(memory_not_isolated(self.technology, memory))
        else:
            plan.unhonoured.append(
                "GPU memory is not isolated by time-slicing, and no memory limit is set for "
                "PyTorch, JAX or TensorFlow because the GPU's memory size is unknown."
            )
        if share.compute_min_pct:
            plan.unhonoured.append(
                f"A compute minimum of {share.compute_min_pct}% is not guaranteed by "
                "time-slicing: every process on the GPU gets an equal turn, however many "
                "servers share it."
            )
        if share.compute_max_pct is not None and share.compute_max_pct < 100:
            plan.unhonoured.append(
                f"A compute maximum of {share.compute_max_pct}% is not enforced by time-slicing: "
                "a server alone on the GPU can use all of it."
            )
