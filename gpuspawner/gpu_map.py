"""A picture of who holds which slice of which GPU, for the spawn page and the GPU map page.

Design notes: docs/design/hub.md, "gpuspawner.gpu_map".
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .core.telemetry import DeviceReading
from .holder_use import HolderUse
from .policy.capacity import Allocation, CapacityPool
from .policy.catalog import Catalog
from .policy.entitlements import UserIdentity
from .policy.instructors import taught_courses
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


JOB_PREFIX = "job:"
SERVER_PREFIX = "server:"


@dataclass(frozen=True)
class MapViewer:
    """Who looks at the map, and whose names they may see."""

    name: str
    admin: bool = False
    courses: frozenset[str] = frozenset()
    """The courses they teach: the holders of these courses' slices are named to them."""

    @property
    def role(self) -> str:
        """``admin``, ``instructor`` or ``student`` (anyone who teaches no course)."""
        if self.admin:
            return "admin"
        return "instructor" if self.courses else "student"


def map_viewer(catalog: Catalog | None, identity: UserIdentity) -> MapViewer:
    """The viewer ``identity`` is: an admin, or the teacher of the catalog's courses they
    teach (:func:`~.policy.instructors.taught_courses`, the course API's own rule)."""
    if identity.admin:
        return MapViewer(identity.name, admin=True)
    courses = taught_courses(catalog, identity) if catalog is not None else []
    return MapViewer(identity.name, courses=frozenset(course.id for course in courses))


def holder_name(allocation: Allocation, viewer: MapViewer) -> str | None:
    """The holder's user name if ``viewer`` may see it, else None (shown anonymously)."""
    if viewer.admin or allocation.owner == viewer.name:
        return allocation.owner
    if allocation.course_id is not None and allocation.course_id in viewer.courses:
        return allocation.owner
    return None


def _fraction_text(value: Fraction) -> str:
    return f"{value.numerator}/{value.denominator}"


def _load_json(load: HolderUse | DeviceReading) -> dict[str, Any]:
    """The utilisation and memory a holder's use and a GPU's reading both carry."""
    return {"utilization_pct": load.utilization_pct, "memory_used_mib": load.memory_used_mib}


def use_json(use: HolderUse | None) -> dict[str, Any] | None:
    """A holder's use as the map's JSON carries it (None: no reading of its GPU)."""
    if use is None:
        return None
    return {**_load_json(use), "measured": use.measured, "device_wide_because": use.device_wide}


def reading_json(reading: DeviceReading | None) -> dict[str, Any] | None:
    """A GPU's own reading as the map's JSON carries it (None: no reading)."""
    if reading is None:
        return None
    return {**_load_json(reading), "temperature_c": reading.temperature_c}


def _slice_json(
    allocation: Allocation,
    viewer: MapViewer,
    left: Fraction,
    titles: dict[str, str],
    use: HolderUse | None,
) -> dict[str, Any]:
    group = allocation.course_id or allocation.profile_id
    mine = allocation.owner == viewer.name
    holder = holder_name(allocation, viewer)
    kind = "job" if allocation.key.startswith(JOB_PREFIX) else "server"
    # Job ids and server names identify a person's work: for admins and the owner only.
    detailed = viewer.admin or mine
    job_id = allocation.key[len(JOB_PREFIX) :] if kind == "job" and detailed else None
    server_name = None
    if kind == "server" and detailed and allocation.key.startswith(SERVER_PREFIX):
        server_name = allocation.key[len(SERVER_PREFIX) :].partition("/")[2]
    title = titles.get(group, group)
    return {
        "kind": kind,
        "course": allocation.course_id,
        "group": group,
        "group_title": title,
        "holder": holder,
        "mine": mine,
        "label": "you" if mine else (holder or title),
        "job_id": job_id,
        "server_name": server_name,
        "fraction": _fraction_text(allocation.fraction),
        "share_pct": round(float(allocation.fraction * 100), 2),
        "left_pct": round(float(left * 100), 2),
        "memory_mib": allocation.memory_mib,
        "colour": _colour(group),
        # How busy a slice is tells of its holder's work: shown to whom the holder is named.
        "use": use_json(use) if holder is not None else None,
    }


def gpu_map_json(
    pool: CapacityPool,
    viewer: MapViewer,
    *,
    titles: dict[str, str] | None = None,
    readings: Sequence[DeviceReading] = (),
    uses: Mapping[str, HolderUse] | None = None,
) -> dict[str, Any]:
    """The GPU map page's picture as JSON, with names by :func:`holder_name`.

    ``titles``: course and profile titles by id (labels of anonymous slices);
    ``readings``: the GPUs' own readings (by id, else index, as
    :func:`~gpuspawner.core.telemetry.holders_of` matches them); ``uses``: each holder's use
    (:func:`~gpuspawner.holder_use.use_by_holder`), shown on the slices whose holder the
    viewer may see. The shape::

        {"viewer": {"name": "ana", "role": "student"},
         "gpus": [{"id": "sim-0", "label": "GPU 0 (RTX 4090, 24 GiB, simulated)", "model": "RTX 4090",
                   "memory_mib": 24576, "memory_used_mib": 6144, "shared_out": "1/4",
                   "used_pct": 25.0, "simulated": true,
                   "slices": [{"kind": "server" | "job", "course": "ml101" | null,
                               "group": "ml101", "group_title": "Machine learning",
                               "holder": "ana" | null, "mine": true, "label": "you",
                               "job_id": null, "server_name": "", "fraction": "1/4",
                               "share_pct": 25.0, "left_pct": 0.0, "memory_mib": 6144,
                               "colour": "#4e79a7",
                               "use": {"utilization_pct": 35.0, "memory_used_mib": 1200,
                                       "measured": "holder" | "device",
                                       "device_wide_because": null | "a sentence"} | null}],
                   "reading": {"utilization_pct": 35.0, "memory_used_mib": 2048,
                               "temperature_c": 61.0} | null}],
         "totals": {"gpus": 2, "slices": 1, "servers": 1, "jobs": 0, "free_gpus": 1}}
    """
    titles = titles or {}
    uses = uses or {}
    by_id = {reading.uuid: reading for reading in readings}
    by_index = {reading.index: reading for reading in readings}
    gpus = []
    kinds = {"server": 0, "job": 0}
    for slot in pool.usage().values():
        left = Fraction(0)
        slices = []
        for allocation in sorted(slot.holders, key=lambda a: a.key):
            item = _slice_json(allocation, viewer, left, titles, uses.get(allocation.key))
            kinds[item["kind"]] += 1
            slices.append(item)
            left += allocation.fraction
        device = slot.device
        gpus.append(
            {
                "id": device.id,
                "label": device.label,
                "model": device.model,
                "memory_mib": device.memory_mib,
                "memory_used_mib": slot.memory_mib,
                "shared_out": _fraction_text(slot.fraction),
                "used_pct": round(float(slot.fraction * 100), 2),
                "simulated": device.simulated,
                "slices": slices,
                "reading": reading_json(by_id.get(device.id) or by_index.get(device.index)),
            }
        )
    return {
        "viewer": {"name": viewer.name, "role": viewer.role},
        "gpus": gpus,
        "totals": {
            "gpus": len(gpus),
            "slices": kinds["server"] + kinds["job"],
            "servers": kinds["server"],
            "jobs": kinds["job"],
            "free_gpus": sum(1 for gpu in gpus if not gpu["slices"]),
        },
    }


def gpu_map(pool: CapacityPool, *, viewer: str | MapViewer, admin: bool = False) -> list[GPUBar]:
    """The spawn form's bars for ``viewer`` (a :class:`MapViewer`, or a name with ``admin``),
    holders named by :func:`holder_name`."""
    seen_by = viewer if isinstance(viewer, MapViewer) else MapViewer(viewer, admin=admin)
    bars = []
    for slot in pool.usage().values():
        left = Fraction(0)
        segments = []
        for allocation in sorted(slot.holders, key=lambda a: a.key):
            group = allocation.course_id or allocation.profile_id
            mine = allocation.owner == seen_by.name
            named = holder_name(allocation, seen_by)
            who = named or "another user"
            kind = "job" if allocation.key.startswith(JOB_PREFIX) else "server"
            label = "you" if mine else (named or group)
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
