"""The catalog's field types: ids, variable names, sizes and durations, a GPU spec and the
model base every block shares, with the rule for the variables a catalog may not set.
"""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    model_validator,
)
from pydantic.functional_validators import AfterValidator

from .share import GPUShare
from .units import (
    parse_duration,
    parse_fraction,
    parse_size_bytes,
    parse_size_mib,
)

MAX_JOB_NODES = 64
"""The most nodes one job may run on (``gpu.nodes`` of a job flavor)."""
ID_PATTERN = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
VERSION_PATTERN = re.compile(r"^\d+(\.\d+){0,3}$")

# Variables that enforce a GPU share: a catalog (or a user) may never set them.
PROTECTED_VARIABLE_PREFIXES = ("CUDA_", "NVIDIA_", "GPUSPAWNER_", "HAMI_", "JUPYTERHUB_")
PROTECTED_VARIABLES = frozenset(
    {
        "LD_PRELOAD",
        "ACTIVE_OOM_KILLER",
        "LD_LIBRARY_PATH",
        "GPU_CORE_UTILIZATION_POLICY",
        "RUNAI_GPU_MEMORY_LIMIT",
        "PYTHONPATH",
        "XLA_PYTHON_CLIENT_MEM_FRACTION",
        "XLA_CLIENT_MEM_FRACTION",
        "PYTORCH_CUDA_ALLOC_CONF",
        "PYTORCH_ALLOC_CONF",
        "TF_FORCE_GPU_ALLOW_GROWTH",
        "XLA_PYTHON_CLIENT_PREALLOCATE",
    }
)


class FieldError(ValueError):
    """A check of a whole block that is about one of its fields: raised by a model
    validator, it is reported at that field's line (``field`` is relative to the block),
    as a field validator's error would be, rather than at the block's first line."""

    def __init__(self, message: str, *field: str | int):
        super().__init__(message)
        self.field = field


def is_protected_variable(name: str) -> bool:
    """True for environment variables that enforce or describe a GPU share."""
    upper = name.upper()
    return upper in PROTECTED_VARIABLES or upper.startswith(PROTECTED_VARIABLE_PREFIXES)


def _check_id(value: str) -> str:
    if not isinstance(value, str) or not ID_PATTERN.match(value):
        raise ValueError(
            "expected an id of lowercase letters, digits and dashes (at most 63, "
            f"starting and ending with a letter or digit), such as ml101 or vision-lab, got {value!r}"
        )
    return value


def _check_variable_name(name: str) -> str:
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
        raise ValueError(
            f"{name!r} is not a valid environment variable name; use letters, digits and _"
        )
    if is_protected_variable(name):
        raise ValueError(
            f"{name} enforces or describes the GPU share and is set by the hub; "
            "remove it from the catalog"
        )
    return name


def _names(value: Any) -> Any:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return value


Identifier = Annotated[str, AfterValidator(_check_id)]
Duration = Annotated[timedelta, BeforeValidator(parse_duration)]
SizeBytes = Annotated[int, BeforeValidator(parse_size_bytes)]
SizeMiB = Annotated[int, BeforeValidator(parse_size_mib)]
GPUFraction = Annotated[Fraction, BeforeValidator(parse_fraction)]
NameList = Annotated[list[str], BeforeValidator(_names)]
# Checked as a mapping key, so an error points at the variable's own line.
VariableName = Annotated[str, AfterValidator(_check_variable_name)]


class CatalogModel(BaseModel):
    """Base: unknown keys are errors (they are usually typos)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class Compute(CatalogModel):
    """Bounds on the share of the GPU's compute, in percent."""

    min: int | None = Field(default=None, ge=0, le=100)
    max: int | None = Field(default=None, ge=1, le=100)

    @model_validator(mode="after")
    def _ordered(self) -> Compute:
        # Checked here (GPUShare checks it too) so the error points at the compute block.
        if self.min is not None and self.max is not None and self.min > self.max:
            raise FieldError(
                f"the compute min ({self.min}%) cannot be larger than its max ({self.max}%)",
                "min",
            )
        return self


class GPUSpec(CatalogModel):
    """A GPU share as written in YAML: ``count`` whole GPUs, or ``fraction`` and/or ``memory``.

    ``nodes`` (job flavors only): the job runs as that many pods on as many nodes, each
    with the share (``{count: 2, nodes: 2}``: four GPUs as two pods of two).
    """

    count: int | None = Field(default=None, ge=1, le=16)
    fraction: GPUFraction | None = None
    memory: SizeMiB | None = None
    compute: Compute | None = None
    model: NameList = Field(default_factory=list)
    nodes: int = Field(default=1, ge=1, le=MAX_JOB_NODES)

    @model_validator(mode="after")
    def _consistent(self) -> GPUSpec:
        self.to_share()
        if self.nodes > 1 and not self.count:
            raise FieldError(
                f"a job on {self.nodes} nodes takes whole GPUs on each of them: give count "
                "(the GPUs of each node, such as count: 2), not fraction or memory; or "
                "remove nodes",
                "nodes",
            )
        return self

    @property
    def total_gpus(self) -> int:
        """The whole GPUs of all the nodes (0 for a slice)."""
        return (self.count or 0) * self.nodes

    def to_share(self) -> GPUShare:
        """The normalised :class:`GPUShare`; raises ValueError with a readable reason."""
        return GPUShare(
            fraction=self.fraction,
            memory_mib=self.memory,
            compute_min_pct=self.compute.min if self.compute else None,
            compute_max_pct=self.compute.max if self.compute else None,
            models=tuple(self.model),
            count=self.count or 0,
        )


class Resources(CatalogModel):
    """CPU cores and memory of the server."""

    cpu: float | None = Field(default=None, gt=0, le=256)
    memory: SizeBytes | None = None


class Environment(CatalogModel):
    """What the server runs.

    ``image`` is used on Kubernetes; ``python`` (a Python environment's prefix,
    whose ``bin/jupyterhub-singleuser`` starts the server) on one machine. Extra
    ``variables`` may not touch the GPU enforcement variables.
    """

    image: str | None = None
    python: str | None = None
    default_url: str | None = None
    variables: dict[VariableName, str] = Field(default_factory=dict)


def _check_version(value: Any) -> str:
    # YAML reads 12.4 as a number and 535.104.05 as a string: both are versions here.
    text = str(value).strip() if isinstance(value, int | float | str) else ""
    if not VERSION_PATTERN.match(text):
        raise ValueError(
            f'expected a version of numbers and dots, such as "12.4" or "535.104", '
            f"got {value!r}; quote it in the YAML"
        )
    return text


Version = Annotated[str, BeforeValidator(_check_version)]
