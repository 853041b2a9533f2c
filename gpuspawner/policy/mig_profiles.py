"""MIG slices per GPU model, how to recognise a model from its name, and which slice a share gets.

Design notes: docs/design/policy.md, "gpuspawner.policy.mig_profiles".
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from fractions import Fraction

from .share import GPUDevice, GPUShare, SliceDemand
from .units import format_mib

_PROFILE_RE = re.compile(r"^([1-8])g\.(\d+)gb$")


@dataclass(frozen=True)
class MIGProfile:
    """One MIG slice kind, such as ``2g.20gb``: compute slices and nominal memory in GB."""

    name: str
    slices: int
    memory_gb: int

    @classmethod
    def parse(cls, name: str) -> MIGProfile:
        """``MIGProfile.parse("2g.20gb")``; raises ValueError for anything else."""
        match = _PROFILE_RE.match(name.strip())
        if not match:
            raise ValueError(
                f"{name!r} is not a MIG profile; expected a name like 1g.10gb or 3g.40gb, as "
                "nvidia-smi mig -lgip prints it (media-extension +me profiles are not supported)."
            )
        return cls(name.strip(), int(match.group(1)), int(match.group(2)))

    @property
    def memory_mib(self) -> int:
        """The nominal memory in MiB (``10gb`` counts as 10 GiB)."""
        return self.memory_gb * 1024


@dataclass(frozen=True)
class MIGModel:
    """A MIG-capable GPU model: its names, nominal memory, compute slices and profiles."""

    name: str
    families: tuple[str, ...]
    """Words that name the model family in NVML names (``A100`` in ``NVIDIA A100-SXM4-80GB``)."""
    memory_gb: int
    compute_slices: int
    profiles: tuple[MIGProfile, ...]
    variant: str | None = None
    """A word that must also appear in the name (``NVL``), telling apart models of one family."""

    @property
    def memory_mib(self) -> int:
        return self.memory_gb * 1024

    def profile(self, name: str) -> MIGProfile | None:
        """The profile called ``name``, or None when this model has no such slice."""
        return next((p for p in self.profiles if p.name == name), None)


def mig_model(
    name: str,
    families: tuple[str, ...],
    memory_gb: int,
    profiles: Sequence[str],
    *,
    compute_slices: int = 7,
    variant: str | None = None,
) -> MIGModel:
    """A :class:`MIGModel` from profile names, for the table and for admins' own entries."""
    parsed = tuple(MIGProfile.parse(p) for p in profiles)
    too_big = [p.name for p in parsed if p.slices > compute_slices]
    if too_big:
        raise ValueError(
            f"The MIG profiles {', '.join(too_big)} have more compute slices than the "
            f"{compute_slices} of {name}."
        )
    return MIGModel(name, families, memory_gb, compute_slices, parsed, variant)


_80GB_PROFILES = ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")

MIG_MODELS: tuple[MIGModel, ...] = (
    mig_model("A30 24GB", ("A30",), 24, ("1g.6gb", "2g.12gb", "4g.24gb"), compute_slices=4),
    mig_model(
        "A100 40GB",
        ("A100", "A800"),
        40,
        ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    ),
    mig_model("A100 80GB", ("A100", "A800"), 80, _80GB_PROFILES),
    mig_model("H100 80GB", ("H100", "H800"), 80, _80GB_PROFILES),
    mig_model(
        "H100 NVL 94GB",
        ("H100", "H800"),
        94,
        ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
        variant="NVL",
    ),
    mig_model(
        "H200 141GB",
        ("H200",),
        141,
        ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    ),
)
"""Built-in MIG models; extend with ``make_backend("mig", models=[mig_model(...)])``."""


class UnknownMIGModel(LookupError):
    """The GPU model has no MIG, or its name does not say which MIG model it is."""


def find_mig_model(
    gpu_model: str, gpu_memory_mib: int | None, table: Sequence[MIGModel] = MIG_MODELS
) -> MIGModel:
    """The MIG model a GPU name (and memory) stands for; raises :class:`UnknownMIGModel`.

    Matches family words (``A100``), then a variant word (``NVL``), then a size word
    (``80GB``), then the memory closest to ``gpu_memory_mib``.
    """
    words = set(re.findall(r"[A-Z0-9]+", gpu_model.upper()))
    family = [m for m in table if words & set(m.families)]
    if not family:
        raise UnknownMIGModel(f"the {gpu_model} cannot be split into MIG slices")
    with_variant = [m for m in family if m.variant and m.variant in words]
    candidates = with_variant or [m for m in family if not m.variant] or family
    if len(candidates) > 1:
        sized = [m for m in candidates if f"{m.memory_gb}GB" in words]
        if sized:
            candidates = sized
    if len(candidates) > 1 and gpu_memory_mib:
        closest = min(candidates, key=lambda m: abs(m.memory_mib - gpu_memory_mib))
        candidates = [closest]
    if len(candidates) > 1:
        options = " or ".join(m.name for m in candidates)
        raise UnknownMIGModel(
            f"the name {gpu_model} does not say whether it is the {options}; give the GPU's "
            "full name or its memory"
        )
    return candidates[0]


class NoMIGProfile(ValueError):
    """No MIG slice holds a share; the message says why and what to do."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _percent(value: Fraction) -> int:
    return int(value * 100 + 0.5)


def choose_mig_profile(
    share: GPUShare,
    model: MIGModel,
    *,
    gpu_model: str,
    device_memory_mib: int,
    allowed: Collection[str] | None = None,
) -> MIGProfile:
    """The smallest MIG slice of ``model`` that holds ``share`` (not a whole GPU).

    - memory needed: the share's ``memory``, else ``fraction`` times ``device_memory_mib``;
    - compute needed: the larger of ``fraction`` and the compute minimum, against
      ``slices / model.compute_slices``;
    - the smallest slice (fewest compute slices, then least memory) with both, among
      ``allowed`` (None: every slice of the model).

    So "1/4 GPU" on an A100 80 GB is a ``2g.20gb`` (a ``1g`` slice is only 1/7). Raises
    :class:`NoMIGProfile` when no slice holds it.
    """
    offered = [p for p in model.profiles if allowed is None or p.name in allowed]
    if not offered:
        raise NoMIGProfile(
            f"None of the MIG slices this cluster is partitioned into "
            f"({', '.join(sorted(allowed or ()))}) exists on the {gpu_model}, which "
            f"offers {', '.join(p.name for p in model.profiles)}. Fix the MIG profiles, or "
            "limit the profile to another GPU model."
        )
    if share.memory_mib is not None:
        memory = share.memory_mib
    else:
        assert share.fraction is not None
        memory = int(share.fraction * device_memory_mib)
    compute = max(share.fraction or Fraction(0), Fraction(share.compute_min_pct or 0, 100))
    fitting = [
        p
        for p in offered
        if p.memory_mib >= memory and Fraction(p.slices, model.compute_slices) >= compute
    ]
    if fitting:
        return min(fitting, key=lambda p: (p.slices, p.memory_gb))
    largest = max(offered, key=lambda p: (p.slices, p.memory_gb))
    needs = format_mib(memory)
    if compute:
        needs += f" and {_percent(compute)}% of the compute"
    which = "of those configured" if allowed is not None else "of the model"
    raise NoMIGProfile(
        f"No MIG slice of the {gpu_model} holds the share {share.describe()}: it needs "
        f"{needs}, and the largest slice {which}, {largest.name}, has "
        f"{format_mib(largest.memory_mib)} and {largest.slices}/{model.compute_slices} of the "
        "compute. Lower the share, or give a whole GPU."
    )


def mig_demand(share: GPUShare, device: GPUDevice) -> SliceDemand | None:
    """What ``share`` takes from a MIG-partitioned ``device``: its slice's compute slices (as a
    fraction of the card) and memory; None when the card cannot give it at all (a whole GPU,
    which the back end asks for as an unpartitioned ``nvidia.com/gpu``, or a share larger
    than every slice)."""
    if share.is_whole:
        return None
    try:
        model = find_mig_model(device.model, device.memory_mib)
        profile = choose_mig_profile(
            share, model, gpu_model=device.model, device_memory_mib=device.memory_mib
        )
    except (UnknownMIGModel, NoMIGProfile):
        return None
    # The slice's memory as its part of the card's nominal memory, so slices that fit the
    # model's table also fit a card that reports a little less than the nominal size.
    return SliceDemand(
        Fraction(profile.slices, model.compute_slices),
        device.memory_mib * profile.memory_gb // model.memory_gb,
        share.compute_min_pct or 0,
    )
