"""Which server or job a process on a GPU belongs to: its cgroup, or its process tree.

Design notes: docs/design/hub.md, "gpuspawner.process_owners".
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from .core.ledger import AllocationLedger, ProcessHolder
from .core.telemetry import DeviceReading, DeviceTelemetry, ProcessReading

log = logging.getLogger(__name__)

# psutil derives start times the same way (boot time plus clock ticks); allow its rounding.
START_TIME_TOLERANCE = 1.0
MAX_ANCESTORS = 64
TOLD_AT_MOST = 256


def cgroup_name_of(key: str) -> str:
    """The cgroup a server or job of allocation ``key`` runs in, as the spawner and the
    job service name it: ``server:ana/lab`` is ``server-ana-lab``, ``job:7f3c`` is
    ``job-7f3c``."""
    kind, _, rest = key.partition(":")
    if kind == "job":
        return f"job-{rest}"
    user, _, server = rest.partition("/")
    name = f"{user}-{server}" if server else user
    return "server-" + re.sub(r"[^A-Za-z0-9_.-]", lambda m: f"_{ord(m.group()):x}", name)


def holder_of_cgroup(path: str, keys: Iterable[str]) -> str | None:
    """The allocation key whose server or job runs in the cgroup at ``path`` (as
    ``/proc/<pid>/cgroup`` gives it), or None: the group nearest the leaf named for exactly
    one of ``keys`` (``ana-lab`` may be ana's server ``lab`` or ana-lab's own: then None)."""
    by_name: dict[str, str | None] = {}
    for key in keys:
        name = cgroup_name_of(key)
        by_name[name] = None if name in by_name else key
    for part in reversed([p for p in path.split("/") if p]):
        if part in by_name:
            return by_name[part]
    return None


class ProcessOwners:
    """Attributes pids to the servers and jobs of ``holders`` (the ledger's
    :meth:`~gpuspawner.core.ledger.AllocationLedger.holders`: allocation key -> holding
    process, None where unknown), reading ``proc``."""

    def __init__(
        self,
        holders: Mapping[str, ProcessHolder | None],
        *,
        proc: str | Path = "/proc",
        gpu_files: bool = True,
    ):
        self.proc = Path(proc)
        self.gpu_files = gpu_files
        """Whether a visible pid must have an NVIDIA device open to be taken for NVML's
        (False for simulated readings, whose processes hold no real GPU)."""
        self.keys = sorted(holders)
        self._by_pid: dict[int, list[tuple[str, float]]] = {}
        for key, holder in holders.items():
            if holder is not None:
                self._by_pid.setdefault(holder.pid, []).append((key, holder.start_time))
        self._boot_time: float | None = None

    def owner_of(self, pid: int) -> tuple[str | None, str | None]:
        """``(allocation key, None)``, or ``(None, why not)`` in a sentence."""
        if not (self.proc / str(pid)).is_dir():
            return None, (
                f"process {pid}, which NVML reports on this GPU, is not visible here: NVML "
                "gives the pids of the driver's PID namespace, and this service runs in "
                "another one (a container)"
            )
        if self.gpu_files and self._has_no_gpu_open(pid):
            return None, (
                f"process {pid} as seen here has no NVIDIA device open, so NVML's pid {pid} "
                "is a process of another PID namespace"
            )
        for path in self._cgroups(pid):
            key = holder_of_cgroup(path, self.keys)
            if key is not None:
                return key, None
        seen = 0
        current: int | None = pid
        while current is not None and current > 0 and seen < MAX_ANCESTORS:
            stat = self._stat(current)
            if stat is None:
                break
            parent, started = stat
            matches = [
                key
                for key, start_time in self._by_pid.get(current, [])
                if abs(start_time - started) <= START_TIME_TOLERANCE
            ]
            if len(matches) == 1:
                return matches[0], None
            if len(matches) > 1:
                return None, (
                    f"process {pid} runs under process {current}, which holds several slices "
                    f"({', '.join(sorted(matches))}), so it cannot be told whose it is"
                )
            current, seen = parent, seen + 1
        return None, (
            f"process {pid} runs in no server's or job's cgroup or process tree of this hub"
        )

    def _has_no_gpu_open(self, pid: int) -> bool:
        """True when the process's open files can be read and none is an NVIDIA device."""
        folder = self.proc / str(pid) / "fd"
        try:
            entries = list(folder.iterdir())
        except OSError:  # another account's process, read without the right: unknown
            return False
        for entry in entries:
            try:
                if os.readlink(entry).startswith("/dev/nvidia"):
                    return False
            except OSError:
                continue
        return True

    def _cgroups(self, pid: int) -> list[str]:
        try:
            text = (self.proc / str(pid) / "cgroup").read_text()
        except OSError:
            return []
        return [line.split(":", 2)[2] for line in text.splitlines() if line.count(":") >= 2]

    def _stat(self, pid: int) -> tuple[int, float] | None:
        """The parent pid and start time (seconds since the epoch) of ``pid``."""
        try:
            text = (self.proc / str(pid) / "stat").read_text()
        except OSError:
            return None
        # The command name is in parentheses and may hold spaces or parentheses itself.
        fields = text[text.rindex(")") + 2 :].split()
        try:
            parent, ticks = int(fields[1]), int(fields[19])
        except (IndexError, ValueError):
            return None
        return parent, self._boot() + ticks / os.sysconf("SC_CLK_TCK")

    def _boot(self) -> float:
        if self._boot_time is None:
            self._boot_time = 0.0
            try:
                for line in (self.proc / "stat").read_text().splitlines():
                    if line.startswith("btime "):
                        self._boot_time = float(line.split()[1])
            except OSError:
                pass
        return self._boot_time


def attribute(readings: Iterable[DeviceReading], owners: ProcessOwners) -> list[DeviceReading]:
    """``readings`` with each process that names a pid given its holder, or why it has
    none. Processes that already name their holder (simulated ones) are kept as they are."""
    attributed = []
    for reading in readings:
        if not reading.processes:
            attributed.append(reading)
            continue
        processes: list[ProcessReading] = []
        for process in reading.processes:
            if process.holder is None and process.pid is not None:
                key, why = owners.owner_of(process.pid)
                process = dataclasses.replace(process, holder=key, unattributed=why)
            processes.append(process)
        attributed.append(dataclasses.replace(reading, processes=tuple(processes)))
    return attributed


class AttributedTelemetry:
    """Readings of ``telemetry`` whose processes are attributed to the holders
    ``owners()`` knows at each read (the ledger, read afresh: servers come and go).

    Each new reason a process could not be attributed is logged once: its GPU's holders
    get device-wide numbers until it goes away.
    """

    def __init__(self, telemetry: DeviceTelemetry, owners: Callable[[], ProcessOwners]):
        self.telemetry = telemetry
        self.owners = owners
        self._told: set[str] = set()

    def read(self) -> list[DeviceReading]:
        readings = self.telemetry.read()
        if not any(p.pid is not None for r in readings for p in r.processes or ()):
            return readings
        attributed = attribute(readings, self.owners())
        for reading in attributed:
            for process in reading.processes or ():
                if process.unattributed and process.unattributed not in self._told:
                    if len(self._told) >= TOLD_AT_MOST:  # pids change: keep the log bounded
                        self._told.clear()
                    self._told.add(process.unattributed)
                    log.warning(
                        "GPU use on %s is counted device-wide, not per server or job: %s.",
                        reading.uuid,
                        process.unattributed,
                    )
        return attributed


def ledger_telemetry(
    telemetry: DeviceTelemetry, ledger_path: str | Path, *, simulated: bool = False
) -> AttributedTelemetry:
    """``telemetry`` attributed to the holders of the one-machine allocation ledger (read
    under its shared lock at each reading). ``simulated``: the readings come from the
    simulated file, whose processes hold no real GPU device."""
    return AttributedTelemetry(
        telemetry,
        lambda: ProcessOwners(AllocationLedger(ledger_path).holders(), gpu_files=not simulated),
    )
