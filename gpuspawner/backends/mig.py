"""MIG with the NVIDIA device plugin: a share becomes the smallest hardware slice that holds it.

Design notes: docs/design/backends.md, "gpuspawner.backends.mig".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, ClassVar

from gpuspawner.policy.mig_profiles import (
    MIG_MODELS,
    MIGModel,
    MIGProfile,
    NoMIGProfile,
    UnknownMIGModel,
    choose_mig_profile,
    find_mig_model,
)
from gpuspawner.policy.share import GPUShare

from .base import (
    GPU_PRODUCT_LABEL,
    NodeLabelBackend,
    PodGPUPlan,
    UnsupportedShare,
    percent,
    product_label_value,
)

STRATEGIES = ("mixed", "single")


class MIGBackend(NodeLabelBackend):
    """``make_backend("mig", strategy="mixed")``; ``profiles=["1g.10gb", "3g.40gb"]`` limits
    choices to the slices the cluster's GPUs are actually partitioned into."""

    name: ClassVar[str] = "mig"
    default_resource_names = {"gpu": "nvidia.com/gpu", "mig": "nvidia.com/mig-{profile}"}

    def __init__(
        self,
        *,
        strategy: str = "mixed",
        profiles: Sequence[str] | None = None,
        models: Sequence[MIGModel] = (),
        **common: Any,
    ) -> None:
        """``strategy``: the device plugin's MIG strategy; ``profiles``: the slices that exist on
        the cluster (default: any slice of the model); ``models``: extra MIG models, checked
        before the built-in table."""
        if strategy not in STRATEGIES:
            raise ValueError(
                f"The MIG strategy must be mixed or single, as in the device plugin's "
                f"MIG_STRATEGY, got {strategy!r}."
            )
        super().__init__(**common)
        if strategy == "single" and not self.gfd_labels:
            raise ValueError(
                "MIG strategy single needs GPU Feature Discovery labels: every slice is called "
                "nvidia.com/gpu, and only the nvidia.com/gpu.product label tells slice sizes "
                "and whole GPUs apart. Turn gfd_labels back on, or use strategy mixed."
            )
        if "{profile}" not in self.resource_names["mig"]:
            raise ValueError(
                "The MIG resource name must contain {profile}, as in nvidia.com/mig-{profile}."
            )
        self.strategy = strategy
        self.allowed = (
            frozenset(MIGProfile.parse(p).name for p in profiles) if profiles is not None else None
        )
        self.table: tuple[MIGModel, ...] = (*models, *MIG_MODELS)

    def check_configuration(self, gpu_models: Mapping[str, int]) -> list[str]:
        """Configured ``profiles`` that none of the cluster's GPU models has."""
        if not self.allowed:
            return []
        known: dict[str, MIGModel] = {}
        for gpu_model, memory_mib in gpu_models.items():
            try:
                known[gpu_model] = find_mig_model(gpu_model, memory_mib, self.table)
            except UnknownMIGModel:
                continue
        if not gpu_models:
            known = {model.name: model for model in self.table}
        offered = {profile.name for model in known.values() for profile in model.profiles}
        errors = []
        for profile in sorted(self.allowed - offered):
            if known:
                listing = "; ".join(
                    f"{gpu_model} offers {', '.join(p.name for p in model.profiles)}"
                    for gpu_model, model in known.items()
                )
                errors.append(
                    f"The MIG profile {profile} is not a slice of any MIG-capable GPU model on "
                    f"this cluster ({listing}). Remove it from the MIG profiles, or fix its name."
                )
            else:
                errors.append(
                    f"The MIG profile {profile} is configured, but no GPU model on this cluster "
                    "can be split into MIG slices."
                )
        return errors

    def _render(
        self, share: GPUShare, *, gpu_model: str | None, gpu_memory_mib: int | None, name: str
    ) -> PodGPUPlan:
        if share.is_whole:
            if self.strategy == "single" and not gpu_model:
                raise UnsupportedShare(
                    f"With MIG strategy single, MIG slices are also called nvidia.com/gpu, so the "
                    f"share {share.describe()} needs a chosen GPU model to be told apart from a "
                    "slice. List the cluster's GPU models in the hub configuration."
                )
            return self._render_whole(share, gpu_model=gpu_model, gpu_memory_mib=gpu_memory_mib)
        if not gpu_model:
            raise UnsupportedShare(
                f"MIG slices differ between GPU models, so the share {share.describe()} can only "
                "be given once the GPU model is known. List the cluster's GPU models in the hub "
                "configuration, or limit the profile to one model."
            )
        try:
            model = find_mig_model(gpu_model, gpu_memory_mib, self.table)
        except UnknownMIGModel as error:
            raise UnsupportedShare(
                f"The share {share.describe()} needs a MIG slice, but {error}. Give the profile "
                "a whole GPU, or limit it to a MIG-capable model such as an A100, H100 or H200."
            ) from None
        device_memory = gpu_memory_mib or model.memory_mib
        self._refuse_memory_beyond_device(share, gpu_model, device_memory)
        profile = self._choose_profile(share, model, gpu_model, device_memory)
        compute = Fraction(profile.slices, model.compute_slices)

        plan = self._new_plan()
        if self.strategy == "mixed":
            plan.resource_limits[self.resource_names["mig"].format(profile=profile.name)] = "1"
            self._select_model(plan, share, gpu_model)
        else:
            plan.resource_limits[self.resource_names["gpu"]] = "1"
            label = f"{product_label_value(gpu_model)}-MIG-{profile.name}"
            plan.node_selector[GPU_PRODUCT_LABEL] = label
        self._add_share_environment(
            plan, share, gpu_model, device_memory, compute, profile.memory_mib
        )
        plan.environment["GPUSPAWNER_GPU_MIG_PROFILE"] = profile.name
        # Frameworks see the slice as the whole GPU, so no soft memory fractions are needed.
        share_pct = percent(compute)
        slices = f"{profile.slices}/{model.compute_slices} ({share_pct}%)"
        if share.compute_max_pct is not None and share.compute_max_pct > share_pct:
            plan.unhonoured.append(
                f"Compute is fixed at {slices} of the GPU by the {profile.name} MIG slice: it "
                f"cannot burst to {share.compute_max_pct}%."
            )
        elif share.compute_max_pct is not None and share.compute_max_pct < share_pct:
            plan.unhonoured.append(
                f"A compute maximum of {share.compute_max_pct}% is not applied: the "
                f"{profile.name} MIG slice always has {slices} of the GPU's compute."
            )
        return plan

    def _choose_profile(
        self, share: GPUShare, model: MIGModel, gpu_model: str, device_memory: int
    ) -> MIGProfile:
        # The capacity pool books the same slice (mig_demand): one rule, so admission never
        # counts on a MIG GPU a share other than the one the pod asks for.
        try:
            return choose_mig_profile(
                share,
                model,
                gpu_model=gpu_model,
                device_memory_mib=device_memory,
                allowed=self.allowed,
            )
        except NoMIGProfile as error:
            raise UnsupportedShare(error.message) from None
