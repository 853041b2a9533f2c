"""How much of its GPU each server and job uses: readings joined to the slices' holders.

Design notes: docs/design/hub.md, "gpuspawner.holder_use".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .core.telemetry import DeviceReading, ProcessReading, holders_of
from .policy.capacity import Allocation, CapacityPool

MEASURED_HOLDER = "holder"
MEASURED_DEVICE = "device"


@dataclass(frozen=True)
class HolderUse:
    """What one server or job uses of the GPUs it holds slices of."""

    key: str
    """The allocation key: ``server:<user>/<server name>`` or ``job:<id>``."""
    utilization_pct: float | None
    """Its SM utilisation, in percent of a GPU (the highest over its GPUs); None when a
    reading gave its memory but not its utilisation (unknown, never taken for idle)."""
    memory_used_mib: int | None
    """GPU memory it holds (summed over its GPUs); None when the driver does not say."""
    device_wide: str | None = None
    """None when measured for this holder; else why the GPU's own numbers stand in."""

    @property
    def measured(self) -> str:
        """``holder`` or ``device``: the label metrics and the map's JSON carry."""
        return MEASURED_DEVICE if self.device_wide else MEASURED_HOLDER


def use_by_holder(
    readings: Sequence[DeviceReading], allocations: CapacityPool | Iterable[Allocation]
) -> dict[str, HolderUse]:
    """Each holder's use, by allocation key, for the holders of the read GPUs.

    A holder on a GPU without a reading is absent (nothing is known of it). A process
    that names its holder directly (a pod's series on Kubernetes, whose devices the pool
    names otherwise) counts for that holder even when the pool does not place it on the
    reading's GPU.
    """
    parts: dict[str, list[HolderUse]] = {}
    for reading in readings:
        for use in _device_uses(reading, holders_of([reading], allocations)[reading.uuid]):
            parts.setdefault(use.key, []).append(use)
    return {key: _combined(key, uses) for key, uses in sorted(parts.items())}


def _device_uses(reading: DeviceReading, holders: Sequence) -> list[HolderUse]:
    keys = [holder.key for holder in holders]
    if reading.processes is None:
        why = reading.no_processes_because or "there are no per-process readings for this GPU"
        return [_device_wide(reading, key, why) for key in keys]
    own: dict[str, list[ProcessReading]] = {key: [] for key in keys}
    shared: dict[str, str] = {}
    for process in reading.processes:
        problem = _unattributable(process, keys)
        if problem is not None:
            return [_device_wide(reading, key, problem) for key in keys]
        assert process.holder is not None
        own.setdefault(process.holder, []).append(process)
        if process.device_wide:
            shared.setdefault(process.holder, process.device_wide)
    uses = []
    for key, processes in own.items():
        # A process marked device-wide carries its GPU's numbers already (an exporter's).
        levels = [p.utilization_pct for p in processes]
        memory = [p.memory_used_mib for p in processes]
        uses.append(
            HolderUse(
                key,
                None if None in levels else min(100.0, sum(x for x in levels if x is not None)),
                None if None in memory else sum(m for m in memory if m is not None),
                shared.get(key),
            )
        )
    return uses


def _unattributable(process: ProcessReading, keys: Sequence[str]) -> str | None:
    """Why ``process`` cannot be counted for one of this GPU's holders, or None."""
    if process.holder is None:
        return process.unattributed or (
            f"process {process.pid} on this GPU was not matched to a server or job"
        )
    if keys and process.holder not in keys:
        return (
            f"process {process.pid} belongs to {process.holder}, which holds no slice of this GPU"
        )
    return None


def _device_wide(reading: DeviceReading, key: str, why: str) -> HolderUse:
    return HolderUse(key, reading.utilization_pct, reading.memory_used_mib, why)


def _combined(key: str, uses: list[HolderUse]) -> HolderUse:
    """One holder's use over the GPUs it holds: the busiest, the memory summed."""
    levels = [use.utilization_pct for use in uses]
    memory = [use.memory_used_mib for use in uses]
    return HolderUse(
        key,
        None if None in levels else max(x for x in levels if x is not None),
        None if None in memory else sum(m for m in memory if m is not None),
        next((use.device_wide for use in uses if use.device_wide), None),
    )


def use_of_servers(uses: Mapping[str, HolderUse]) -> dict[str, float]:
    """The utilisation of each server's share, by allocation key (reclaim reads this; a
    server whose utilisation is unknown is left out, so it counts as busy)."""
    return {
        key: use.utilization_pct
        for key, use in uses.items()
        if key.startswith("server:") and use.utilization_pct is not None
    }
