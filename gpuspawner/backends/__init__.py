"""GPU sharing back ends: render a GPU share as pod-spec changes for one sharing technology.

Design notes: docs/design/backends.md, "gpuspawner.backends.__init__".
"""

from __future__ import annotations

from typing import Any

from .base import PodGPUPlan, SharingBackend, UnsupportedShare, cpu_only_plan
from .dra import DRABackend
from .hami import HAMiBackend
from .kai import KAISchedulerBackend
from .mig import MIGBackend
from .mps import MPSBackend
from .protect import merge_environment, strip_protected
from .timeslicing import TimeSlicingBackend
from .volcano import VolcanoVGPUBackend
from .whole import WholeGPUBackend

BACKENDS: dict[str, type[SharingBackend]] = {
    "whole": WholeGPUBackend,
    "time-slicing": TimeSlicingBackend,
    "mps": MPSBackend,
    "mig": MIGBackend,
    "hami": HAMiBackend,
    "volcano": VolcanoVGPUBackend,
    "dra": DRABackend,
    "kai": KAISchedulerBackend,
}


def make_backend(name: str, **config: Any) -> SharingBackend:
    """The back end called ``name``, configured with ``config``; ValueError names the choices."""
    try:
        backend_class = BACKENDS[name]
    except KeyError:
        raise ValueError(
            f"There is no GPU sharing backend called {name!r}; choose one of {', '.join(BACKENDS)}."
        ) from None
    try:
        return backend_class(**config)
    except TypeError as error:
        # A misspelt or missing setting: say which back end, in a sentence.
        raise ValueError(
            f"The {name} sharing backend cannot use these settings: {error}."
        ) from None


__all__ = [
    "BACKENDS",
    "DRABackend",
    "HAMiBackend",
    "KAISchedulerBackend",
    "MIGBackend",
    "MPSBackend",
    "PodGPUPlan",
    "SharingBackend",
    "TimeSlicingBackend",
    "UnsupportedShare",
    "VolcanoVGPUBackend",
    "WholeGPUBackend",
    "cpu_only_plan",
    "make_backend",
    "merge_environment",
    "strip_protected",
]
