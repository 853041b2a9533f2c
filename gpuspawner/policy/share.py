"""GPU shares: what a profile asks of a GPU, and the devices that can give it.

Design notes: docs/design/policy.md, "gpuspawner.policy.share".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from .units import format_fraction, format_mib

# Tolerance-free arithmetic: fractions add up exactly, so four quarters fill a GPU.
WHOLE = Fraction(1)


@dataclass(frozen=True)
class GPUDevice:
    """One physical GPU (or a simulated one, labelled as such)."""

    id: str
    """Stable identifier: the NVML UUID (``GPU-…``) or ``sim-N`` for simulated devices."""
    index: int
    model: str
    memory_mib: int
    simulated: bool = False
    mig: bool = False
    """Split into MIG slices: the pool books the slice each share becomes there (see
    :func:`gpuspawner.policy.mig_profiles.mig_demand`), and it takes no whole-GPU request."""
    driver: str | None = None
    """The NVIDIA driver version (``"550.54.15"``), where known."""
    cuda: str | None = None
    """The highest CUDA version the driver supports (``"12.4"``), where known."""

    def matches_model(self, models: tuple[str, ...]) -> bool:
        """True when ``models`` is empty or one of them is a case-insensitive part of ours."""
        if not models:
            return True
        ours = self.model.lower()
        return any(wanted.lower() in ours for wanted in models)

    @property
    def label(self) -> str:
        """``GPU 0 (RTX 4090, 24 GiB)`` with ``simulated`` when it is not real."""
        kind = (", MIG" if self.mig else "") + (", simulated" if self.simulated else "")
        return f"GPU {self.index} ({self.model}, {format_mib(self.memory_mib)}{kind})"


def _article(name: str) -> str:
    """``a`` or ``an`` before a GPU name, as it is said aloud ("an RTX 4090", "a T4")."""
    first = name.split()[0] if name.split() else name
    if first.isupper() or any(ch.isdigit() for ch in first):
        # Spoken letter by letter: "an H100", "an L4", "a T4", "a GPU".
        return "an" if first[:1].upper() in "AEFHILMNORSX8" else "a"
    return "an" if first[:1].lower() in "aeiou" else "a"


@dataclass(frozen=True)
class SliceDemand:
    """What one share takes from one particular device."""

    fraction: Fraction
    memory_mib: int
    compute_min_pct: int


@dataclass(frozen=True)
class GPUShare:
    """A validated, normalised GPU request.

    Either ``count`` whole GPUs, or a slice given by ``fraction`` and/or
    ``memory_mib``. ``compute_min_pct``/``compute_max_pct`` bound the share of
    the GPU's compute (streaming multiprocessors) when several tenants run at
    once; back ends that cannot honour them say so.
    """

    fraction: Fraction | None = None
    memory_mib: int | None = None
    compute_min_pct: int | None = None
    compute_max_pct: int | None = None
    models: tuple[str, ...] = field(default_factory=tuple)
    count: int = 0

    def __post_init__(self) -> None:
        if self.fraction is not None and self.fraction == WHOLE and self.memory_mib is None:
            # A share of exactly one GPU is a whole GPU.
            object.__setattr__(self, "fraction", None)
            object.__setattr__(self, "count", max(self.count, 1))
        if self.count < 0:
            raise ValueError("a count of whole GPUs cannot be negative")
        if self.count and (self.fraction is not None or self.memory_mib is not None):
            raise ValueError(
                "give either a count of whole GPUs or a fraction and/or memory, not both"
            )
        if not self.count and self.fraction is None and self.memory_mib is None:
            raise ValueError("a GPU share needs a count of whole GPUs, a fraction, or memory")
        if self.fraction is not None and not 0 < self.fraction <= 1:
            raise ValueError("a fraction of a GPU must be greater than 0 and at most 1")
        if self.memory_mib is not None and self.memory_mib <= 0:
            raise ValueError("GPU memory must be greater than zero")
        for name in ("compute_min_pct", "compute_max_pct"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 100:
                raise ValueError(f"{name.replace('_pct', '')} must be a percentage from 0 to 100")
        if (
            self.compute_min_pct is not None
            and self.compute_max_pct is not None
            and self.compute_min_pct > self.compute_max_pct
        ):
            raise ValueError("the compute minimum cannot be larger than the compute maximum")
        if self.compute_max_pct == 0:
            raise ValueError("a compute maximum of 0 percent would leave the GPU unusable")

    @property
    def is_whole(self) -> bool:
        """True for whole-GPU shares."""
        return self.count > 0

    def demand_on(self, device: GPUDevice) -> SliceDemand:
        """What this share takes from ``device`` (see the module docstring for the rule)."""
        if self.is_whole:
            return SliceDemand(WHOLE, device.memory_mib, 100)
        if self.memory_mib is not None:
            memory = self.memory_mib
        else:
            assert self.fraction is not None
            memory = int(self.fraction * device.memory_mib)
        if self.fraction is not None:
            fraction = self.fraction
        else:
            # Round up to a hundredth so memory-only slices never over-subscribe a device.
            fraction = Fraction(-(-memory * 100 // device.memory_mib), 100)
            fraction = min(fraction, WHOLE)
        return SliceDemand(fraction, memory, self.compute_min_pct or 0)

    def describe(
        self, device_model: str | None = None, device_memory_mib: int | None = None
    ) -> str:
        """The share in words: ``1/4 of an RTX 4090, 6 GiB`` or ``2 whole A100 GPUs``."""
        gpu = device_model or (" or ".join(self.models) if self.models else "GPU")
        article = _article(gpu)
        if self.is_whole:
            if self.count == 1:
                text = f"1 whole {gpu}"
            else:
                text = (
                    f"{self.count} whole {gpu}s"
                    if gpu == "GPU"
                    else f"{self.count} whole {gpu} GPUs"
                )
            if device_memory_mib:
                text += f", {format_mib(device_memory_mib)}"
                if self.count != 1:
                    text += " each"
            return text
        parts = []
        if self.fraction is not None:
            parts.append(f"{format_fraction(self.fraction)} of {article} {gpu}")
        else:
            parts.append(f"a slice of {article} {gpu}")
        memory = self.memory_mib
        if memory is None and self.fraction is not None and device_memory_mib:
            memory = int(self.fraction * device_memory_mib)
        if memory is not None:
            parts.append(format_mib(memory))
        if self.compute_min_pct is not None or self.compute_max_pct is not None:
            low = self.compute_min_pct or 0
            high = self.compute_max_pct if self.compute_max_pct is not None else 100
            parts.append(f"compute {low}-{high}%")
        return ", ".join(parts)

    def to_dict(self) -> dict:
        """A JSON-ready form, for spawner state and annotations."""
        return {
            "fraction": format_fraction(self.fraction) if self.fraction is not None else None,
            "memory_mib": self.memory_mib,
            "compute_min_pct": self.compute_min_pct,
            "compute_max_pct": self.compute_max_pct,
            "models": list(self.models),
            "count": self.count,
        }

    @classmethod
    def from_dict(cls, data: dict) -> GPUShare:
        """Inverse of :meth:`to_dict`."""
        fraction = data.get("fraction")
        return cls(
            fraction=Fraction(fraction) if fraction is not None else None,
            memory_mib=data.get("memory_mib"),
            compute_min_pct=data.get("compute_min_pct"),
            compute_max_pct=data.get("compute_max_pct"),
            models=tuple(data.get("models") or ()),
            count=int(data.get("count") or 0),
        )
