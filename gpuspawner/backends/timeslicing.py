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
from gpuspawner.policy.units import format_mib

from .base import PodGPUPlan
from .device_plugin import DevicePluginSlots
from .framework_limits import framework_memory_limits, share_environment


class TimeSlicingBackend(DevicePluginSlots):
    """``make_backend("time-slicing", replicas=4)``; rename slots with
    ``resource_names={"shared": "nvidia.com/gpu.shared"}`` when the plugin uses ``renameByDefault``."""

    name: ClassVar[str] = "time-slicing"
    sharing_strategy: ClassVar[str] = "time-slicing"
    technology: ClassVar[str] = "time-slicing"

    def _fill_slot(
        self,
        plan: PodGPUPlan,
        share: GPUShare,
        gpu_model: str | None,
        gpu_memory_mib: int | None,
    ) -> None:
        memory = share.memory_mib
        if memory is None and gpu_memory_mib is not None:
            memory = int(self.slot * gpu_memory_mib)
        plan.environment.update(
            share_environment(
                share,
                gpu_model=gpu_model,
                gpu_memory_mib=gpu_memory_mib,
                fraction=self.slot,
                memory_mib=memory,
            )
        )
        if memory is not None and gpu_memory_mib is not None:
            plan.environment.update(framework_memory_limits(memory, gpu_memory_mib))
            plan.unhonoured.append(
                f"GPU memory is not isolated by time-slicing: the {format_mib(memory)} limit is "
                "applied only through PyTorch, JAX and TensorFlow settings, which a notebook can "
                "change."
            )
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
