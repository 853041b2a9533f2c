"""MIG slices per GPU model, and how to recognise a model from its name.

Sources (read for this table; ``nvidia-smi mig -lgip`` on the node is authoritative):

- NVIDIA/mig-parted ``deployments/systemd/config-default.yaml``: the ``all-<profile>``
  layouts with the models each applies to (A100-40GB, A100-80GB/H100-80GB, A30-24GB,
  H100 NVL, H200-141GB);
- NVIDIA MIG User Guide, "Supported MIG Profiles": the A30 is split in **4** compute slices
  (1g.6gb is 1/4 of its SMs), the A100 and later in 7; A100-80GB profile names;
- HAMi's MIG allow-list per model (reference gpu_sharing.md §2.5), which agrees for the
  profiles it lists.

Media-extension profiles (``+me``) are left out. Profile names carry *nominal* memory: the
usable memory nvidia-smi shows is slightly less (for example about 9.5-9.75 GiB for
``1g.10gb``; exact values not verified here), and the back end matches a request against
the nominal size, which is what instructors and admins read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

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
