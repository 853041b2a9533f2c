"""Keep users from switching off the enforcement of their GPU share through the environment.

HAMi skips its ``/etc/ld.so.preload`` hook when a container has ``CUDA_DISABLE_CONTROL=true``;
``NVIDIA_VISIBLE_DEVICES`` chooses the GPUs the container runtime injects; ``LD_PRELOAD``,
``CUDA_DEVICE_MEMORY_LIMIT`` and ``GPU_CORE_UTILIZATION_POLICY`` change HAMi-core's limits.
So whatever a user asks for in the spawn form or their options, these names are dropped, and
the plan's own environment is laid on top.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from gpuspawner.policy.catalog_fields import is_protected_variable

Value = TypeVar("Value")

# HAMi-core knobs outside the catalog's protected names; ACTIVE_OOM_KILLER=false would keep
# a container running past its memory limit.
EXTRA_PROTECTED_VARIABLES = frozenset({"ACTIVE_OOM_KILLER"})


def is_enforcement_variable(name: str) -> bool:
    """True for variables a user may not set: they enforce or describe the GPU share."""
    return is_protected_variable(name) or name.upper() in EXTRA_PROTECTED_VARIABLES


def strip_protected(env: Mapping[str, Value]) -> dict[str, Value]:
    """``env`` without the variables that enforce or describe a GPU share."""
    return {name: value for name, value in env.items() if not is_enforcement_variable(name)}


def merge_environment(
    user_env: Mapping[str, Value], plan_env: Mapping[str, str]
) -> dict[str, Value | str]:
    """The user's variables, minus protected ones, with the plan's variables always winning."""
    merged: dict[str, Value | str] = dict(strip_protected(user_env))
    merged.update(plan_env)
    return merged
