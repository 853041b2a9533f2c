"""Volcano vGPU (Project-HAMi/volcano-vgpu-device-plugin): HAMi-core limits, Volcano scheduling.

Design notes: docs/design/backends.md, "gpuspawner.backends.volcano".
"""

from __future__ import annotations

from typing import Any, ClassVar

from gpuspawner.policy.share import GPUShare

from .base import NodeLabelBackend, PodGPUPlan
from .vgpu import HAMiCoreBackend

VGPU_MODE_ANNOTATION = "volcano.sh/vgpu-mode"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


class VolcanoVGPUBackend(HAMiCoreBackend, NodeLabelBackend):
    """``make_backend("volcano", queue="ml101")``: vGPU slices scheduled by Volcano."""

    name: ClassVar[str] = "volcano"
    technology: ClassVar[str] = "Volcano vGPU"
    gpu_count_key: ClassVar[str] = "number"
    default_resource_names = {
        "number": "volcano.sh/vgpu-number",
        "memory": "volcano.sh/vgpu-memory",
        "memory_percentage": "volcano.sh/vgpu-memory-percentage",
        "cores": "volcano.sh/vgpu-cores",
    }

    def __init__(
        self,
        *,
        scheduler_name: str = "volcano",
        mode: str | None = "hami-core",
        queue: str | None = None,
        **common: Any,
    ) -> None:
        """``mode``: the ``volcano.sh/vgpu-mode`` annotation (None leaves it out); ``queue``:
        a Volcano queue; ``memory_as`` and ``core_policy`` as for HAMi."""
        super().__init__(scheduler_name=scheduler_name, **common)
        self.mode = mode
        self.queue = queue

    def _add_placement(self, plan: PodGPUPlan, share: GPUShare, gpu_model: str | None) -> None:
        if self.mode:
            plan.annotations[VGPU_MODE_ANNOTATION] = self.mode
        if self.queue:
            plan.annotations[QUEUE_ANNOTATION] = self.queue
        self._select_model(plan, share, gpu_model)

    def _whole_gpu_limits(self, count: int) -> dict[str, str]:
        # All memory and cores, so that no other vGPU is placed on the GPU (see the docstring).
        return {
            self.resource_names["number"]: str(count),
            self.resource_names["memory_percentage"]: "100",
            self.resource_names["cores"]: "100",
        }
