"""Volcano vGPU (Project-HAMi/volcano-vgpu-device-plugin): HAMi-core limits, Volcano scheduling.

The pod sets ``schedulerName: volcano`` and asks for ``volcano.sh/vgpu-number`` (physical
GPUs), ``volcano.sh/vgpu-memory`` (MiB) or ``volcano.sh/vgpu-memory-percentage``, and
``volcano.sh/vgpu-cores``; the numbers follow :mod:`gpuspawner.backends.vgpu`, as for HAMi.
The annotation ``volcano.sh/vgpu-mode: hami-core`` keeps slices off dynamic-MIG nodes, whose
slices would not match the numbers. A whole GPU asks for 100% of memory and cores, so no
other vGPU is placed on it (Volcano's webhook does not add that by itself, unlike HAMi's).

GPU models are chosen with GFD's ``nvidia.com/gpu.product`` node label, which assumes GPU
Feature Discovery runs on the vGPU nodes (``gfd_labels=False`` otherwise). A Volcano queue
is set with the ``scheduling.volcano.sh/queue-name`` annotation.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, ClassVar

from gpuspawner.policy.share import GPUShare

from .base import NodeLabelBackend, PodGPUPlan
from .framework_limits import share_environment
from .vgpu import check_vgpu_settings, compute_notes, set_vgpu_limits, vgpu_request

VGPU_MODE_ANNOTATION = "volcano.sh/vgpu-mode"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


class VolcanoVGPUBackend(NodeLabelBackend):
    """``make_backend("volcano", queue="ml101")``: vGPU slices scheduled by Volcano."""

    name: ClassVar[str] = "volcano"
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
        memory_as: str = "mib",
        core_policy: str = "default",
        **common: Any,
    ) -> None:
        """``mode``: the ``volcano.sh/vgpu-mode`` annotation (None leaves it out); ``queue``:
        a Volcano queue; ``memory_as`` and ``core_policy`` as for HAMi."""
        check_vgpu_settings(memory_as, core_policy)
        super().__init__(**common)
        self.scheduler_name = scheduler_name
        self.mode = mode
        self.queue = queue
        self.memory_as = memory_as
        self.core_policy = core_policy

    def _render(
        self,
        share: GPUShare,
        *,
        gpu_model: str | None = None,
        gpu_memory_mib: int | None = None,
        name: str,
    ) -> PodGPUPlan:
        plan = self._new_plan()
        plan.scheduler_name = self.scheduler_name
        if self.mode:
            plan.annotations[VGPU_MODE_ANNOTATION] = self.mode
        if self.queue:
            plan.annotations[QUEUE_ANNOTATION] = self.queue
        limits = plan.resource_limits
        if share.is_whole:
            limits[self.resource_names["number"]] = str(share.count)
            limits[self.resource_names["memory_percentage"]] = "100"
            limits[self.resource_names["cores"]] = "100"
            self._select_model(plan, share, gpu_model)
            plan.environment.update(
                share_environment(
                    share,
                    gpu_model=gpu_model,
                    gpu_memory_mib=gpu_memory_mib,
                    fraction=Fraction(1),
                    memory_mib=gpu_memory_mib,
                )
            )
            return plan
        self._refuse_memory_beyond_device(share, gpu_model, gpu_memory_mib)
        request = vgpu_request(share, gpu_memory_mib, memory_as=self.memory_as)
        set_vgpu_limits(limits, self.resource_names, "number", request)
        self._select_model(plan, share, gpu_model)
        plan.environment.update(
            share_environment(
                share,
                gpu_model=gpu_model,
                gpu_memory_mib=gpu_memory_mib,
                fraction=share.fraction,
                memory_mib=request.memory_mib,
            )
        )
        plan.unhonoured.extend(
            compute_notes(
                share, request.cores_pct, core_policy=self.core_policy, technology="Volcano vGPU"
            )
        )
        return plan
