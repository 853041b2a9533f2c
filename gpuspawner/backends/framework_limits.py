"""The environment that describes a GPU share, and the soft limits frameworks honour.

Design notes: docs/design/backends.md, "gpuspawner.backends.framework_limits".
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from types import MappingProxyType

from gpuspawner.policy.share import GPUShare
from gpuspawner.policy.units import format_mib

NO_GPU_ENVIRONMENT: Mapping[str, str] = MappingProxyType(
    {
        "CUDA_VISIBLE_DEVICES": "",
        # "void" makes the NVIDIA container runtime behave like runc: no GPU device at all.
        "NVIDIA_VISIBLE_DEVICES": "void",
        "GPUSPAWNER_GPU_SHARE": "No GPU",
    }
)
"""What a server without a GPU share gets: it sees no GPU, even in a CUDA image."""


JAX_MEMORY_FRACTION = "XLA_PYTHON_CLIENT_MEM_FRACTION"
"""JAX's memory fraction, by the name every JAX version reads (alone; see the module's note)."""
JAX_MEMORY_FRACTION_NAMES = ("XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_CLIENT_MEM_FRACTION")
"""Both names JAX has read its memory fraction by; an environment may hold at most one."""


def memory_fraction(memory_mib: int, visible_memory_mib: int) -> float:
    """The share's memory as a part of the memory frameworks see, at most 1."""
    return min(memory_mib / visible_memory_mib, 1.0)


def framework_memory_limits(memory_mib: int, visible_memory_mib: int) -> dict[str, str]:
    """Soft limits that keep PyTorch, JAX and TensorFlow within ``memory_mib``.

    ``visible_memory_mib`` is the total the frameworks see (the whole device when memory
    is not isolated). The fraction is written with three decimals, ``0.125``.
    """
    text = f"{memory_fraction(memory_mib, visible_memory_mib):.3f}"
    return {
        "GPUSPAWNER_TORCH_MEMORY_FRACTION": text,
        JAX_MEMORY_FRACTION: text,
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    }


def memory_not_isolated(technology: str, memory_mib: int) -> str:
    """The note for a memory limit that only the frameworks' soft limits apply."""
    return (
        f"GPU memory is not isolated by {technology}: the {format_mib(memory_mib)} limit is "
        "applied only through PyTorch, JAX and TensorFlow settings, which a notebook can change."
    )


def share_environment(
    share: GPUShare,
    *,
    gpu_model: str | None,
    gpu_memory_mib: int | None,
    fraction: Fraction | None,
    memory_mib: int | None,
) -> dict[str, str]:
    """``GPUSPAWNER_*`` variables that describe the share to the server (status bar, hooks).

    ``fraction`` and ``memory_mib`` are what the server actually gets on this back end (a
    time-slicing slot, a MIG slice), which may be more than the share asked for.
    """
    env = {"GPUSPAWNER_GPU_SHARE": share.describe(gpu_model, gpu_memory_mib)}
    if fraction is not None:
        env["GPUSPAWNER_GPU_FRACTION"] = f"{fraction.numerator}/{fraction.denominator}"
    if memory_mib is not None:
        env["GPUSPAWNER_GPU_MEMORY_MIB"] = str(memory_mib)
    if share.compute_max_pct is not None:
        env["GPUSPAWNER_GPU_COMPUTE_MAX_PCT"] = str(share.compute_max_pct)
    return env
