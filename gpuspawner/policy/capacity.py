"""The capacity pool: which slice of which GPU each server or job holds.

Design notes: docs/design/policy.md, "gpuspawner.policy.capacity".
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from functools import lru_cache
from typing import Any

from .mig_profiles import mig_demand
from .share import WHOLE, GPUDevice, GPUShare, SliceDemand, _article
from .units import format_mib


class Refusal(Exception):
    """A start that cannot happen, with a sentence a student understands.

    ``code`` is a short machine label (for metrics and tests): ``no-such-gpu``,
    ``too-large``, ``full``, ``reserved``, ``course-full``, ``user-limit``,
    ``not-entitled``, ``closed``, ``invalid``.
    """

    def __init__(self, code: str, message: str, *, status: int = 409):
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Allocation:
    """A share held on one or more devices by a server or a job."""

    key: str
    """``server:<user>/<server name>`` or ``job:<id>``."""
    owner: str
    profile_id: str
    course_id: str | None
    device_ids: tuple[str, ...]
    fraction: Fraction
    memory_mib: int
    compute_min_pct: int
    session_end: datetime | None = None

    def to_dict(self) -> dict:
        """JSON-ready, for spawner state."""
        return {
            "key": self.key,
            "owner": self.owner,
            "profile_id": self.profile_id,
            "course_id": self.course_id,
            "device_ids": list(self.device_ids),
            "fraction": f"{self.fraction.numerator}/{self.fraction.denominator}",
            "memory_mib": self.memory_mib,
            "compute_min_pct": self.compute_min_pct,
            "session_end": self.session_end.isoformat() if self.session_end else None,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Allocation:
        end = data.get("session_end")
        return cls(
            key=data["key"],
            owner=data["owner"],
            profile_id=data["profile_id"],
            course_id=data.get("course_id"),
            device_ids=tuple(data["device_ids"]),
            fraction=Fraction(data["fraction"]),
            memory_mib=int(data["memory_mib"]),
            compute_min_pct=int(data.get("compute_min_pct") or 0),
            session_end=datetime.fromisoformat(end) if end else None,
        )


@dataclass(frozen=True)
class Reservation:
    """Seats a course holds while its window is open."""

    course_id: str
    title: str
    seats: int
    share: GPUShare
    until: datetime
    until_text: str = ""
    """``until`` as the course's students read it, such as ``12:00``."""


@dataclass
class DeviceUsage:
    """How full one device is."""

    device: GPUDevice
    fraction: Fraction = Fraction(0)
    memory_mib: int = 0
    compute_min_pct: int = 0
    holders: list[Allocation] = field(default_factory=list)
    placeholders: list[str] = field(default_factory=list)
    """Course ids holding reserved, unused seats here."""

    def fits(self, demand: SliceDemand) -> bool:
        return (
            self.fraction + demand.fraction <= WHOLE
            and self.memory_mib + demand.memory_mib <= self.device.memory_mib
            and self.compute_min_pct + demand.compute_min_pct <= 100
        )

    @property
    def empty(self) -> bool:
        return self.fraction == 0 and self.memory_mib == 0 and not self.placeholders

    def take(self, demand: SliceDemand) -> None:
        self.fraction += demand.fraction
        self.memory_mib += demand.memory_mib
        self.compute_min_pct += demand.compute_min_pct


class _AllocationBook(dict[str, Allocation]):
    """The pool's allocations; every change also updates the pool's running totals.

    Keeping per-device totals up to date on each change makes a decision cost the number
    of GPUs, not the number of running servers, during a class-start storm.
    """

    def __init__(self, on_change: Callable[[Allocation | None, Allocation | None], None]):
        super().__init__()
        self._on_change = on_change

    def __setitem__(self, key: str, value: Allocation) -> None:
        old = self.get(key)
        super().__setitem__(key, value)
        self._on_change(old, value)

    def __delitem__(self, key: str) -> None:
        old = self[key]
        super().__delitem__(key)
        self._on_change(old, None)

    def pop(self, key: str, *default: Any) -> Any:
        if key in self:
            old = self[key]
            del self[key]
            return old
        if default:
            return default[0]
        raise KeyError(key)

    def _unsupported(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("change allocations one key at a time (set, del or pop)")

    clear = update = setdefault = popitem = _unsupported  # type: ignore[assignment]


class CapacityPool:
    """GPUs and the allocations on them."""

    def __init__(self, devices: list[GPUDevice]):
        self.devices = list(devices)
        self._by_id = {d.id: d for d in self.devices}
        self._totals = {d.id: DeviceUsage(d) for d in self.devices}
        # Counts by course, owner and profile, and each owner's allocations, kept with the
        # totals: a decision then costs the number of GPUs, not of running servers.
        self._counts: Counter[tuple[str, str | None]] = Counter()
        self._by_owner: dict[str, dict[str, Allocation]] = {}
        self.allocations: dict[str, Allocation] = _AllocationBook(self._changed)

    def _changed(self, old: Allocation | None, new: Allocation | None) -> None:
        for allocation, sign in ((old, -1), (new, 1)):
            if allocation is None:
                continue
            for index in (
                ("course", allocation.course_id),
                ("owner", allocation.owner),
                ("profile", allocation.profile_id),
            ):
                self._counts[index] += sign
            mine = self._by_owner.setdefault(allocation.owner, {})
            if sign > 0:
                mine[allocation.key] = allocation
            else:
                mine.pop(allocation.key, None)
                if not mine:
                    del self._by_owner[allocation.owner]
            for device_id in allocation.device_ids:
                slot = self._totals.get(device_id)
                if slot is None:
                    continue
                slot.fraction += sign * allocation.fraction
                slot.memory_mib += sign * allocation.memory_mib
                slot.compute_min_pct += sign * allocation.compute_min_pct
                if sign > 0:
                    slot.holders.append(allocation)
                else:
                    slot.holders.remove(allocation)

    # -- views --------------------------------------------------------------------

    def usage(
        self, reservations: tuple[Reservation, ...] = (), *, for_course: str | None = None
    ) -> dict[str, DeviceUsage]:
        """Per-device usage, with unused reserved seats of other courses as placeholders."""
        usage = {
            device_id: DeviceUsage(
                total.device,
                total.fraction,
                total.memory_mib,
                total.compute_min_pct,
                # Shared, not copied: callers read holders and never change them.
                total.holders,
            )
            for device_id, total in self._totals.items()
        }
        for reservation in sorted(reservations, key=lambda r: r.course_id):
            if reservation.course_id == for_course:
                continue
            unused = reservation.seats - self.count(course_id=reservation.course_id)
            for _ in range(max(unused, 0)):
                chosen = _choose(list(usage.values()), reservation.share)
                if chosen is None:
                    break
                for slot, demand in chosen:
                    slot.take(demand)
                    slot.placeholders.append(reservation.course_id)
        return usage

    def count(
        self,
        *,
        course_id: str | None = None,
        owner: str | None = None,
        profile_id: str | None = None,
    ) -> int:
        """How many allocations match all the given filters."""
        given = [
            (name, value)
            for name, value in (("course", course_id), ("owner", owner), ("profile", profile_id))
            if value is not None
        ]
        if len(given) == 1:
            return self._counts[given[0]]
        return sum(
            1
            for a in self.allocations.values()
            if (course_id is None or a.course_id == course_id)
            and (owner is None or a.owner == owner)
            and (profile_id is None or a.profile_id == profile_id)
        )

    def held_by(self, owner: str) -> list[Allocation]:
        """The allocations ``owner`` holds (servers and jobs)."""
        return list(self._by_owner.get(owner, {}).values())

    def how_many_fit(
        self,
        share: GPUShare,
        reservations: tuple[Reservation, ...] = (),
        *,
        course_id: str | None = None,
        limit: int = 99,
    ) -> int:
        """How many more such shares fit now (up to ``limit``), for "seats left" on the page.

        Identical shares placed one by one fill each device independently, so the
        count is the sum over devices of what each can still take.
        """
        usage = self.usage(reservations, for_course=course_id)
        slots = [s for s in usage.values() if s.device.matches_model(share.models)]
        if share.is_whole:
            return min(sum(1 for s in slots if s.empty and not s.device.mig) // share.count, limit)
        total = 0
        for slot in slots:
            demand = demand_on(share, slot.device)
            if demand is None or not slot.fits(demand):
                continue
            room = [
                (WHOLE - slot.fraction) // demand.fraction,
                (slot.device.memory_mib - slot.memory_mib) // max(demand.memory_mib, 1),
            ]
            if demand.compute_min_pct:
                room.append((100 - slot.compute_min_pct) // demand.compute_min_pct)
            total += int(min(room))
            if total >= limit:
                return limit
        return total

    # -- changes ------------------------------------------------------------------

    def allocate(
        self,
        key: str,
        *,
        owner: str,
        profile_id: str,
        course_id: str | None,
        share: GPUShare,
        reservations: tuple[Reservation, ...] = (),
        session_end: datetime | None = None,
        queued: bool = False,
        avoid: frozenset[str] = frozenset(),
        nodes: int = 1,
    ) -> Allocation:
        """Place ``share`` and record it under ``key``; raises :class:`Refusal` if it cannot.

        ``queued``: the asker waits in a queue and starts by itself (a job), so a full
        pool's sentence says so instead of "try again". ``avoid``: ids of devices it must
        not go to (their driver cannot run the chosen environment); the caller makes sure
        some matching device is left. ``nodes``: a job on several nodes holds ``share`` (whole
        GPUs) on each of that many nodes, all of them or none."""
        if key in self.allocations:
            raise Refusal("duplicate", f"{key} already holds a GPU share; stop it first.")
        candidates = [d for d in self.devices if d.matches_model(share.models)]
        if not candidates:
            wanted = " or ".join(share.models)
            needs = f"{_article(wanted)} {wanted} GPU" if wanted else "a GPU"
            have = ", ".join(sorted({d.model for d in self.devices})) or "no GPUs"
            raise Refusal(
                "no-such-gpu",
                f"This profile needs {needs}, but this hub has {have}. "
                "Please tell your instructor or the hub admins.",
                status=409,
            )
        candidates = [d for d in candidates if d.id not in avoid] or candidates
        largest = max(candidates, key=lambda d: d.memory_mib)
        if nodes > 1:
            _check_nodes(share, nodes, candidates)
        elif share.is_whole:
            unsplit = [d for d in candidates if not d.mig]
            if share.count > len(unsplit):
                split = len(candidates) - len(unsplit)
                also = (
                    f" ({split} more {'is' if split == 1 else 'are'} split into MIG slices, which "
                    "cannot be given as a whole GPU)"
                    if split
                    else ""
                )
                raise Refusal(
                    "too-large",
                    f"This profile asks for {share.count} whole "
                    f"{'GPU' if share.count == 1 else 'GPUs'}, but this hub has only "
                    f"{len(unsplit)} that match{also}. Please tell the hub admins.",
                )
        elif share.demand_on(largest).memory_mib > largest.memory_mib:
            raise Refusal(
                "too-large",
                f"This profile asks for {format_mib(share.memory_mib or 0)} of GPU memory, but "
                f"the largest GPU here has {format_mib(largest.memory_mib)}. "
                "Please tell the hub admins.",
            )
        elif all(demand_on(share, d) is None for d in candidates):
            raise Refusal(
                "too-large",
                f"This profile asks for {share.describe()}, but the matching GPUs here are split "
                "into MIG slices and none of the slices holds it. Please tell the hub admins.",
            )
        if any(r.course_id != course_id for r in reservations):
            usage = self.usage(reservations, for_course=course_id)
        else:
            usage = self._totals  # nothing to hold back: decide on the running totals
        slots = [usage[d.id] for d in candidates]
        chosen = _choose_nodes(slots, share, nodes) if nodes > 1 else _choose(slots, share)
        if chosen is None:
            raise self.explain_full(share, reservations, course_id, queued=queued, nodes=nodes)
        demand = chosen[0][1]
        allocation = Allocation(
            key=key,
            owner=owner,
            profile_id=profile_id,
            course_id=course_id,
            device_ids=tuple(slot.device.id for slot, _ in chosen),
            fraction=demand.fraction,
            memory_mib=demand.memory_mib,
            compute_min_pct=demand.compute_min_pct,
            session_end=session_end,
        )
        self.allocations[key] = allocation
        return allocation

    def restore(self, allocation: Allocation) -> list[str]:
        """Record an allocation read back from state after a restart.

        The server or job is already running, so it is recorded even if it does
        not fit any more (the GPUs changed, say); the returned warnings say so.
        """
        warnings = []
        existing = self.allocations.get(allocation.key)
        if existing is not None and existing != allocation:
            warnings.append(
                f"{allocation.key} was already recorded with other devices; kept the first"
            )
            return warnings
        unknown = [d for d in allocation.device_ids if d not in self._by_id]
        if unknown:
            warnings.append(f"{allocation.key} holds unknown GPUs {', '.join(unknown)}")
        usage = self.usage()
        for device_id in allocation.device_ids:
            if (
                device_id in usage
                and not usage[device_id].fits(
                    SliceDemand(
                        allocation.fraction, allocation.memory_mib, allocation.compute_min_pct
                    )
                )
                and existing is None
            ):
                warnings.append(f"{allocation.key} overcommits {usage[device_id].device.label}")
        self.allocations[allocation.key] = allocation
        return warnings

    def release(self, key: str) -> Allocation | None:
        """Forget the allocation under ``key`` (idempotent)."""
        return self.allocations.pop(key, None)

    # -- explanations ----------------------------------------------------------------

    def fits(
        self,
        share: GPUShare,
        reservations: tuple[Reservation, ...] = (),
        *,
        course_id: str | None = None,
        without: Collection[str] = (),
    ) -> bool:
        """Whether ``share`` could be placed now, changing nothing; ``without``: as if the
        allocations of these keys were released (would stopping them make room?)."""
        usage = self.usage(reservations, for_course=course_id)
        for key in without:
            allocation = self.allocations.get(key)
            if allocation is None:
                continue
            for device_id in allocation.device_ids:
                slot = usage.get(device_id)
                if slot is None:
                    continue
                usage[device_id] = DeviceUsage(
                    slot.device,
                    slot.fraction - allocation.fraction,
                    slot.memory_mib - allocation.memory_mib,
                    slot.compute_min_pct - allocation.compute_min_pct,
                    [a for a in slot.holders if a.key != key],
                    slot.placeholders,
                )
        candidates = [usage[d.id] for d in self.devices if d.matches_model(share.models)]
        return bool(candidates) and _choose(candidates, share) is not None

    def explain_full(
        self,
        share: GPUShare,
        reservations: tuple[Reservation, ...] = (),
        course_id: str | None = None,
        *,
        queued: bool = False,
        nodes: int = 1,
    ) -> Refusal:
        """The refusal of a ``share`` that does not fit now: reserved seats, or GPUs in use.

        ``queued``: for someone waiting in a queue (a job), whose start comes by itself.
        ``nodes``: the share is wanted on each of that many nodes."""
        candidates = [d for d in self.devices if d.matches_model(share.models)]
        without_reservations = self.usage()
        free = [without_reservations[d.id] for d in candidates]
        fits = _choose_nodes(free, share, nodes) if nodes > 1 else _choose(free, share)
        if fits is not None:
            holding = [r for r in reservations if r.course_id != course_id]
            names = ", ".join(sorted({r.title for r in holding})) or "a class"
            first = min(holding, key=lambda r: r.until) if holding else None
            later = f" until {first.until_text or f'{first.until:%H:%M} UTC'}" if first else ""
            then = (
                "The job waits in the queue and starts by itself after the class."
                if queued
                else "Try again after the class, or start a profile without a GPU."
            )
            return Refusal(
                "reserved", f"The free GPU capacity is reserved for {names}{later}. {then}"
            )
        busy = sum(1 for d in candidates if without_reservations[d.id].holders)
        servers = len({a.key for d in candidates for a in without_reservations[d.id].holders})
        gpus = "GPU" if len(candidates) == 1 else "GPUs"
        verb = "is" if busy == 1 else "are"
        holders = (
            "1 running server or job" if servers == 1 else f"{servers} running servers and jobs"
        )
        then = (
            "The job waits in the queue and starts by itself when one frees up."
            if queued
            else "Try again in a few minutes, or start a profile without a GPU."
        )
        return Refusal(
            "full",
            f"All GPUs are taken right now: {busy} of {len(candidates)} {gpus} {verb} shared "
            f"by {holders}, with no room for {share.describe()}"
            f"{f' on each of {nodes} nodes' if nodes > 1 else ''}. {then}",
        )


@lru_cache(maxsize=4096)
def demand_on(share: GPUShare, device: GPUDevice) -> SliceDemand | None:
    """What ``share`` takes from ``device``, or None when that device can never give it.

    On a MIG-partitioned GPU: the MIG slice the back end gives (the same function decides
    both); elsewhere :meth:`GPUShare.demand_on`."""
    if device.mig:
        return mig_demand(share, device)
    return share.demand_on(device)


@lru_cache(maxsize=1024)
def _priced(
    share: GPUShare, devices: tuple[GPUDevice, ...]
) -> tuple[tuple[SliceDemand, Fraction] | None, ...]:
    """Per device, what a slice ``share`` takes there and its cost (see :func:`_choose`), or
    None where it cannot go. Shares and devices are few, so this is computed once each."""
    demands = [
        demand_on(share, device) if device.matches_model(share.models) else None
        for device in devices
    ]
    given = [(device, demand) for device, demand in zip(devices, demands, strict=True) if demand]
    if not given:
        return tuple(None for _ in devices)
    least_time = min(demand.fraction for _, demand in given)
    least_memory = min(demand.memory_mib for _, demand in given)
    mean_memory = Fraction(sum(device.memory_mib for device, _ in given), len(given))
    return tuple(
        (demand, (demand.fraction - least_time) * mean_memory + demand.memory_mib - least_memory)
        if demand is not None
        else None
        for demand in demands
    )


def _choose(
    slots: list[DeviceUsage], share: GPUShare
) -> list[tuple[DeviceUsage, SliceDemand]] | None:
    """Placement of ``share`` over ``slots``; None if it does not fit.

    A slice goes to a GPU already in use or split into MIG slices when one fits, and opens
    an empty GPU that could be given whole only otherwise. Among those, the cheapest wins:
    a slice's *cost* on a device is what it takes there beyond the least it takes on any
    matching device, in time (weighed as the matching devices' mean memory) plus memory, so
    a memory-only share costs least on the largest card, a fraction share on the smallest,
    and a MIG slice pays for its rounding up to whole compute slices. Among equally cheap
    devices the fullest one that still fits wins (best fit), then the lowest index."""
    if share.is_whole:
        free = [
            s
            for s in slots
            if s.empty and not s.device.mig and s.device.matches_model(share.models)
        ]
        if len(free) < share.count:
            return None
        picked = heapq.nsmallest(share.count, free, key=lambda s: s.device.index)
        return [(s, share.demand_on(s.device)) for s in picked]
    best: tuple | None = None
    for slot, priced in zip(slots, _priced(share, tuple(s.device for s in slots)), strict=True):
        if priced is None:
            continue
        demand, cost = priced
        if not slot.fits(demand):
            continue
        rank = (
            # An empty GPU that could be given whole is opened last: whole-GPU requests
            # can use nothing else, while a slice can go to a GPU in use or a MIG GPU.
            slot.empty and not slot.device.mig,
            cost,
            WHOLE - slot.fraction - demand.fraction,
            slot.device.memory_mib - slot.memory_mib - demand.memory_mib,
            slot.device.index,
        )
        if best is None or rank < best[0]:
            best = (rank, slot, demand)
    if best is None:
        return None
    return [(best[1], best[2])]


def node_of(device: GPUDevice) -> str:
    """The node of a cluster's GPU (its id is ``<node>/<GPU>``); "" on one machine."""
    return device.id.rsplit("/", 1)[0] if "/" in device.id else ""


def _whole_gpus_by_node(devices: Iterable[GPUDevice]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for device in devices:
        if not device.mig and node_of(device):
            counts[node_of(device)] = counts.get(node_of(device), 0) + 1
    return counts


def several_nodes_on_one_machine(nodes: int) -> str:
    """Why a job on ``nodes`` nodes cannot run where the hub runs jobs on one machine (for
    ``gpuspawner check`` and for such a job's refusal alike)."""
    return (
        f"a job on {nodes} nodes needs jobs to run on Kubernetes: on one machine a job runs "
        "as one process on that machine, so it cannot span several nodes"
    )


def _check_nodes(share: GPUShare, nodes: int, candidates: list[GPUDevice]) -> None:
    """Refuse a job on ``nodes`` nodes that could never start here (one machine, or too few
    nodes with that many GPUs)."""
    if not any(node_of(device) for device in candidates):
        raise Refusal(
            "too-large",
            f"This flavor asks for {nodes} nodes, but {several_nodes_on_one_machine(nodes)}. "
            "Choose a flavor on one node, or ask the hub admins to run this one on their "
            "cluster.",
            status=400,
        )
    big_enough = [n for n, c in _whole_gpus_by_node(candidates).items() if c >= share.count]
    if share.is_whole and len(big_enough) >= nodes:
        return
    gpus = f"{share.count} whole GPU{'' if share.count == 1 else 's'}" if share.is_whole else "GPUs"
    raise Refusal(
        "too-large",
        f"This flavor asks for {nodes} nodes with {gpus} each, but only {len(big_enough)} "
        f"{'node here has' if len(big_enough) == 1 else 'nodes here have'} that many "
        "matching GPUs. Please tell the hub admins.",
    )


def _choose_nodes(
    slots: list[DeviceUsage], share: GPUShare, nodes: int
) -> list[tuple[DeviceUsage, SliceDemand]] | None:
    """Placement of ``share`` on each of ``nodes`` distinct nodes; None if they do not all
    fit now. The nodes with the fewest free GPUs that still fit go first (best fit), so a
    node with room for a larger job stays free."""
    by_node: dict[str, list[DeviceUsage]] = {}
    for slot in slots:
        if node_of(slot.device):
            by_node.setdefault(node_of(slot.device), []).append(slot)
    placed = [
        (len(free), node, chosen)
        for node, node_slots in by_node.items()
        if (chosen := _choose(node_slots, share)) is not None
        for free in [[s for s in node_slots if s.empty and not s.device.mig]]
    ]
    if len(placed) < nodes:
        return None
    placed.sort(key=lambda item: (item[0], item[1]))
    return [pair for _, _, chosen in placed[:nodes] for pair in chosen]
