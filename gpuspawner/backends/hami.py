"""HAMi (CNCF): memory caps and compute limits per container, enforced by HAMi-core.

Design notes: docs/design/backends.md, "gpuspawner.backends.hami".
"""

from __future__ import annotations

from typing import Any, ClassVar

from gpuspawner.policy.share import GPUShare

from .base import PodGPUPlan
from .vgpu import HAMiCoreBackend

GPU_SCHEDULER_POLICIES = ("binpack", "spread", "topology-aware", "mutex", "numa")


class HAMiBackend(HAMiCoreBackend):
    """``make_backend("hami")``; ``priority=1`` for student profiles (0 is high, 1 is low)."""

    name: ClassVar[str] = "hami"
    technology: ClassVar[str] = "HAMi"
    gpu_count_key: ClassVar[str] = "gpu"
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
        priority: int | None = None,
        **common: Any,
    ) -> None:
        """``gpu_scheduler_policy``: None leaves HAMi's default; ``memory_as`` and
        ``core_policy``: see :class:`~gpuspawner.backends.vgpu.HAMiCoreBackend`."""
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
        super().__init__(scheduler_name=scheduler_name, **common)
        self.gpu_scheduler_policy = gpu_scheduler_policy
        self.priority = priority

    def _add_placement(self, plan: PodGPUPlan, share: GPUShare, gpu_model: str | None) -> None:
        if self.gpu_scheduler_policy:
            plan.annotations["hami.io/gpu-scheduler-policy"] = self.gpu_scheduler_policy
        # The plan's numbers are for gpu_model when one was chosen; otherwise any listed model.
        gpu_types = gpu_model or ",".join(share.models)
        if gpu_types:
            plan.annotations["nvidia.com/use-gputype"] = gpu_types
        if self.priority is not None:
            plan.resource_limits[self.resource_names["priority"]] = str(self.priority)

    def _whole_gpu_limits(self, count: int) -> dict[str, str]:
        # HAMi's webhook adds gpucores: 100 to a plain nvidia.com/gpu, keeping slices off it.
        return {self.resource_names["gpu"]: str(count)}
