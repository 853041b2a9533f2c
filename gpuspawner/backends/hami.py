"""HAMi (CNCF): memory caps and compute limits per container, enforced by HAMi-core.

A slice asks for ``nvidia.com/gpu: 1`` (one physical GPU), ``nvidia.com/gpumem`` (MiB) or
``nvidia.com/gpumem-percentage``, and ``nvidia.com/gpucores``; how a share maps onto them is
in :mod:`gpuspawner.backends.vgpu`. A whole GPU is ``nvidia.com/gpu: N`` alone: HAMi's
webhook then adds ``gpucores: 100``, which keeps other tasks off the GPU
(``examples/nvidia/use_as_normal.yaml``).

The pod names ``hami-scheduler`` itself instead of relying on the webhook to rewrite
``schedulerName`` (the webhook's ``failurePolicy`` is ``Ignore``: when it is down, pods
silently go to the default scheduler; HAMi #661, #1536). GPU models are chosen with the
``nvidia.com/use-gputype`` annotation, which HAMi matches as a case-insensitive part of each
GPU's type (``checkGPUtype`` in ``pkg/device/nvidia/device.go``), like the catalog's
``model:`` list. ``hami.io/gpu-scheduler-policy: binpack`` packs student slices onto few GPUs,
keeping whole GPUs free (HAMi's own default is ``spread``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, ClassVar

from gpuspawner.policy.share import GPUShare

from .base import PodGPUPlan, SharingBackend
from .framework_limits import share_environment
from .vgpu import check_vgpu_settings, compute_notes, set_vgpu_limits, vgpu_request

GPU_SCHEDULER_POLICIES = ("binpack", "spread", "topology-aware", "mutex", "numa")


class HAMiBackend(SharingBackend):
    """``make_backend("hami")``; ``priority=1`` for student profiles (0 is high, 1 is low)."""

    name: ClassVar[str] = "hami"
    default_resource_names = {
        "gpu": "nvidia.com/gpu",
        "memory": "nvidia.com/gpumem",
        "memory_percentage": "nvidia.com/gpumem-percentage",
        "cores": "nvidia.com/gpucores",
        "priority": "nvidia.com/priority",
    }

    def __init__(
        self,
        *,
        scheduler_name: str = "hami-scheduler",
        gpu_scheduler_policy: str | None = "binpack",
        memory_as: str = "mib",
        core_policy: str = "default",
        priority: int | None = None,
        **common: Any,
    ) -> None:
        """``memory_as``: ``mib`` (default) or ``percentage`` for fraction-only shares;
        ``core_policy``: the cluster's ``GPU_CORE_UTILIZATION_POLICY`` (``default``/``force``);
        ``gpu_scheduler_policy``: None leaves HAMi's default."""
        check_vgpu_settings(memory_as, core_policy)
        if gpu_scheduler_policy is not None:
            parts = [part.strip() for part in gpu_scheduler_policy.split(",")]
            unknown = [part for part in parts if part not in GPU_SCHEDULER_POLICIES]
            if unknown:
                raise ValueError(
                    f"HAMi has no GPU scheduler policy {', '.join(unknown)}; use "
                    f"{', '.join(GPU_SCHEDULER_POLICIES)}, or several joined by commas."
                )
        if priority is not None and priority not in (0, 1):
            raise ValueError(f"HAMi's priority is 0 (high) or 1 (low), got {priority!r}.")
        super().__init__(**common)
        self.scheduler_name = scheduler_name
        self.gpu_scheduler_policy = gpu_scheduler_policy
        self.memory_as = memory_as
        self.core_policy = core_policy
        self.priority = priority

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
        if self.gpu_scheduler_policy:
            plan.annotations["hami.io/gpu-scheduler-policy"] = self.gpu_scheduler_policy
        # The plan's numbers are for gpu_model when one was chosen; otherwise any listed model.
        gpu_types = gpu_model or ",".join(share.models)
        if gpu_types:
            plan.annotations["nvidia.com/use-gputype"] = gpu_types
        limits = plan.resource_limits
        if share.is_whole:
            limits[self.resource_names["gpu"]] = str(share.count)
            self._add_priority(plan)
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
        set_vgpu_limits(limits, self.resource_names, "gpu", request)
        self._add_priority(plan)
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
            compute_notes(share, request.cores_pct, core_policy=self.core_policy, technology="HAMi")
        )
        return plan

    def _add_priority(self, plan: PodGPUPlan) -> None:
        if self.priority is not None:
            plan.resource_limits[self.resource_names["priority"]] = str(self.priority)
