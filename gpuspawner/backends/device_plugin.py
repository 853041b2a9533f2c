"""What time-slicing and MPS of the NVIDIA device plugin have in common: slots of 1/replicas.

Design notes: docs/design/backends.md, "gpuspawner.backends.device_plugin".
"""

from __future__ import annotations

from abc import abstractmethod
from fractions import Fraction
from typing import Any, ClassVar

from gpuspawner.policy.share import GPUShare
from gpuspawner.policy.units import format_fraction, format_mib

from .base import (
    GPU_REPLICAS_LABEL,
    GPU_SHARING_STRATEGY_LABEL,
    NodeLabelBackend,
    PodGPUPlan,
    UnsupportedShare,
)


class DevicePluginSlots(NodeLabelBackend):
    """Base for the device plugin's sharing strategies; subclasses fill in a slot's plan."""

    sharing_strategy: ClassVar[str]
    """The value of GFD's ``nvidia.com/gpu.sharing-strategy`` label on the shared nodes."""
    technology: ClassVar[str]
    """The technology's name within a sentence (``time-slicing``, ``MPS``)."""
    default_resource_names = {"gpu": "nvidia.com/gpu", "shared": "nvidia.com/gpu"}

    def __init__(self, *, replicas: int, **common: Any) -> None:
        """``replicas``: how many slots each GPU is split into, as in the device plugin config."""
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 2:
            raise ValueError(
                f"{self.technology_first} needs replicas of 2 or more (the number of slots per GPU in "
                f"the device plugin's configuration), got {replicas!r}."
            )
        super().__init__(**common)
        self.replicas = replicas

    @property
    def technology_first(self) -> str:
        """The technology's name at the start of a sentence."""
        return self.technology[:1].upper() + self.technology[1:]

    @property
    def slot(self) -> Fraction:
        """The part of a GPU one slot is."""
        return Fraction(1, self.replicas)

    @property
    def renamed(self) -> bool:
        """True when shared slots have their own resource name (``renameByDefault``)."""
        return self.resource_names["shared"] != self.resource_names["gpu"]

    def _render(
        self, share: GPUShare, *, gpu_model: str | None, gpu_memory_mib: int | None, name: str
    ) -> PodGPUPlan:
        if share.is_whole:
            return self._render_whole_gpu(share, gpu_model, gpu_memory_mib)
        self._refuse_memory_beyond_device(share, gpu_model, gpu_memory_mib)
        slot = format_fraction(self.slot)
        if share.fraction is not None and share.fraction > self.slot:
            raise UnsupportedShare(
                f"{self.technology_first} splits every GPU into {self.replicas} slots of {slot}, "
                "and a "
                f"server gets one slot, so the share {share.describe()} cannot be given. Lower "
                f"the share to {slot} of a GPU, give a whole GPU, or configure fewer replicas."
            )
        if share.memory_mib is not None and gpu_memory_mib is not None:
            slot_memory = gpu_memory_mib // self.replicas
            if share.memory_mib > slot_memory:
                gpu = gpu_model or "this GPU"
                raise UnsupportedShare(
                    f"{self.technology_first} splits every GPU into {self.replicas} slots, so a "
                    "slot of "
                    f"{gpu} has {format_mib(slot_memory)} of its memory, and the share "
                    f"{share.describe()} asks for {format_mib(share.memory_mib)}. Lower the "
                    f"memory to {format_mib(slot_memory)} or less, give a whole GPU, or "
                    "configure fewer replicas."
                )
        plan = self._new_plan()
        plan.resource_limits[self.resource_names["shared"]] = "1"
        self._select_model(plan, share, gpu_model, suffix="" if self.renamed else "-SHARED")
        if self.gfd_labels:
            plan.node_selector[GPU_SHARING_STRATEGY_LABEL] = self.sharing_strategy
            plan.node_selector[GPU_REPLICAS_LABEL] = str(self.replicas)
        if share.fraction is not None and share.fraction < self.slot:
            plan.unhonoured.append(
                f"The share of {format_fraction(share.fraction)} of a GPU is rounded up to one "
                f"{self.technology} slot, {slot} of the GPU: the cluster splits every GPU into "
                f"{self.replicas} slots."
            )
        self._fill_slot(plan, share, gpu_model, gpu_memory_mib)
        return plan

    @abstractmethod
    def _fill_slot(
        self, plan: PodGPUPlan, share: GPUShare, gpu_model: str | None, gpu_memory_mib: int | None
    ) -> None:
        """Add the environment and notes for one slot; raise for what it can never give."""

    def _render_whole_gpu(
        self, share: GPUShare, gpu_model: str | None, gpu_memory_mib: int | None
    ) -> PodGPUPlan:
        unshared = {GPU_SHARING_STRATEGY_LABEL: "none"} if self.gfd_labels else None
        plan = self._render_whole(
            share, gpu_model=gpu_model, gpu_memory_mib=gpu_memory_mib, node_selector=unshared
        )
        if not self.gfd_labels and not self.renamed:
            plan.unhonoured.append(
                f"A whole GPU is not guaranteed: {self.technology} slots are also called "
                f"{self.resource_names['gpu']}, and without GPU Feature Discovery labels the "
                "server cannot be kept off shared nodes."
            )
        return plan
