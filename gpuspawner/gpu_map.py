"""A picture of who holds which slice of which GPU, for the spawn page and admins.

Each GPU is a bar; each allocation a segment as wide as its fraction, coloured by
course (or research allocation / job). Admins see who holds each slice; everyone
else sees only which course holds it and which slice is their own.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from fractions import Fraction

from .policy.capacity import CapacityPool
from .policy.units import format_mib

PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#b07aa1",
    "#76b7b2",
    "#edc948",
    "#9c755f",
    "#e15759",
    "#bab0ac",
    "#86bcb6",
)


@dataclass(frozen=True)
class Segment:
    left_pct: float
    width_pct: float
    colour: str
    label: str
    tooltip: str
    mine: bool


@dataclass(frozen=True)
class GPUBar:
    label: str
    used_pct: float
    memory: str
    segments: tuple[Segment, ...]


def _colour(key: str) -> str:
    digest = hashlib.sha256(key.encode()).digest()
    return PALETTE[digest[0] % len(PALETTE)]


def gpu_map(pool: CapacityPool, *, viewer: str, admin: bool) -> list[GPUBar]:
    """The bars for ``viewer``; holders' names only for admins."""
    bars = []
    for slot in pool.usage().values():
        left = Fraction(0)
        segments = []
        for allocation in sorted(slot.holders, key=lambda a: a.key):
            group = allocation.course_id or allocation.profile_id
            mine = allocation.owner == viewer
            who = allocation.owner if (admin or mine) else "another user"
            kind = "job" if allocation.key.startswith("job:") else "server"
            label = "you" if mine else (allocation.owner if admin else group)
            segments.append(
                Segment(
                    left_pct=float(left * 100),
                    width_pct=float(allocation.fraction * 100),
                    colour=_colour(group),
                    label=label,
                    tooltip=f"{who}: {group} {kind}, {allocation.fraction.numerator}/"
                    f"{allocation.fraction.denominator} of the GPU, "
                    f"{format_mib(allocation.memory_mib)}",
                    mine=mine,
                )
            )
            left += allocation.fraction
        bars.append(
            GPUBar(
                label=slot.device.label,
                used_pct=float(slot.fraction * 100),
                memory=f"{format_mib(slot.memory_mib)} of {format_mib(slot.device.memory_mib)} "
                "memory in use",
                segments=tuple(segments),
            )
        )
    return bars
