"""Whole GPUs only: ``nvidia.com/gpu: N`` from the NVIDIA device plugin, no sharing.

The baseline for clusters that do not share GPUs. A slice of a GPU (a fraction or an amount
of memory) cannot be given, and :meth:`WholeGPUBackend.check` reports such profiles at
startup; the profile needs ``count: 1`` or another back end.
"""

from __future__ import annotations

from typing import ClassVar

from gpuspawner.policy.share import GPUShare

from .base import NodeLabelBackend, PodGPUPlan, UnsupportedShare


class WholeGPUBackend(NodeLabelBackend):
    """``make_backend("whole")``: every GPU share is a number of whole GPUs."""

    name: ClassVar[str] = "whole"
    default_resource_names = {"gpu": "nvidia.com/gpu"}

    def _render(
        self, share: GPUShare, *, gpu_model: str | None, gpu_memory_mib: int | None, name: str
    ) -> PodGPUPlan:
        if not share.is_whole:
            raise UnsupportedShare(
                f"This cluster gives out whole GPUs only, so the share {share.describe()} cannot "
                "be given. Change the profile to a whole GPU (count: 1), or configure a sharing "
                "backend such as time-slicing, MIG or HAMi."
            )
        return self._render_whole(share, gpu_model=gpu_model, gpu_memory_mib=gpu_memory_mib)
