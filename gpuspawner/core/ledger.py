"""One record of who holds which GPU slice, shared by every process on one machine.

Design notes: docs/design/core.md, "gpuspawner.core.ledger".
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..policy import Allocation, CapacityPool, GPUDevice

LEDGER_VERSION = 2

# psutil derives start times from the boot time and clock ticks: equal for one process
# across calls, but allow for rounding and for the boot time moving with the clock.
START_TIME_TOLERANCE = 1.0

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProcessHolder:
    """The process a GPU slice lives with: its pid and its start time (seconds since epoch)."""

    pid: int
    start_time: float

    @classmethod
    def of_pid(cls, pid: int) -> ProcessHolder | None:
        """The process running as ``pid`` now, or None when there is none."""
        try:
            process = psutil.Process(pid)
            if process.status() == psutil.STATUS_ZOMBIE:
                return None
            return cls(pid, process.create_time())
        except psutil.Error:
            return None

    @classmethod
    def this_process(cls) -> ProcessHolder:
        """The process running this code."""
        pid = os.getpid()
        holder = _this_process.get(pid)
        if holder is None:  # by pid: a forked child is another holder
            holder = _this_process[pid] = cls(pid, psutil.Process(pid).create_time())
        return holder

    def is_alive(self) -> bool:
        """True while the very process that started at ``start_time`` still runs.

        A process that cannot be inspected (no permission) counts as alive: keeping a
        slice too long is safer than giving it out twice.
        """
        try:
            process = psutil.Process(self.pid)
            if abs(process.create_time() - self.start_time) > START_TIME_TOLERANCE:
                return False  # the pid now belongs to another process
            return process.status() != psutil.STATUS_ZOMBIE
        except psutil.AccessDenied:
            return True
        except psutil.Error:
            return False

    def to_dict(self) -> dict:
        return {"pid": self.pid, "start_time": self.start_time}

    @classmethod
    def from_dict(cls, data: object) -> ProcessHolder | None:
        if not isinstance(data, dict):
            return None
        return cls(int(data["pid"]), float(data["start_time"]))


_this_process: dict[int, ProcessHolder] = {}


@dataclass(frozen=True)
class _Entry:
    allocation: Allocation
    holder: ProcessHolder | None
    """None: unknown (written by a version-1 ledger); kept until released or held anew."""


class AllocationLedger:
    """A file-backed, lock-protected set of allocations for one GPU inventory.

    ``log`` is told of each slice freed because its holder has ended.
    """

    def __init__(self, path: str | Path, log: logging.Logger | logging.LoggerAdapter | None = None):
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.log = log or _log

    # -- reading and writing -----------------------------------------------------------

    def _read(self) -> list[_Entry]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as error:
            raise RuntimeError(
                f"The GPU allocation ledger {self.path} cannot be read ({error}); "
                "move it aside and restart the hub and the job service to rebuild it."
            ) from None
        version = data.get("version", 1)
        if not isinstance(version, int) or version > LEDGER_VERSION:
            raise RuntimeError(
                f"The GPU allocation ledger {self.path} was written by a newer version "
                f"(format {version}, this one reads up to {LEDGER_VERSION}); upgrade the hub "
                "and the job service together."
            )
        entries = []
        for item in data.get("allocations", []):
            holder = ProcessHolder.from_dict(item.get("holder")) if version >= 2 else None
            entries.append(_Entry(Allocation.from_dict(item), holder))
        return entries

    def _write(self, entries: list[_Entry]) -> None:
        allocations = []
        for entry in sorted(entries, key=lambda e: e.allocation.key):
            item = entry.allocation.to_dict()
            item["holder"] = entry.holder.to_dict() if entry.holder else None
            allocations.append(item)
        payload = {"version": LEDGER_VERSION, "allocations": allocations}
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".ledger-")
        with os.fdopen(handle, "w") as out:
            json.dump(payload, out, indent=1)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.path)

    def _live_entries(self, *, report: bool) -> tuple[list[_Entry], bool]:
        """The entries whose holder still runs, and whether any were dropped."""
        live, dropped = [], False
        for entry in self._read():
            if entry.holder is None or entry.holder.is_alive():
                live.append(entry)
                continue
            dropped = True
            if report:  # routine when a server or job ends; after a crash, the explanation
                self.log.info(
                    "Freed the GPU slice of %s (%s): process %d, which held it, has ended.",
                    entry.allocation.key,
                    ", ".join(entry.allocation.device_ids),
                    entry.holder.pid,
                )
        return live, dropped

    @contextlib.contextmanager
    def _locked(self, exclusive: bool) -> Iterator[None]:
        with open(self.lock_path, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @staticmethod
    def _pool(devices: list[GPUDevice], entries: list[_Entry]) -> CapacityPool:
        pool = CapacityPool(devices)
        for entry in entries:
            pool.allocations[entry.allocation.key] = entry.allocation
        return pool

    # -- the interface -----------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(
        self, devices: list[GPUDevice], *, holder: ProcessHolder | None = None
    ) -> Iterator[CapacityPool]:
        """A pool holding every live allocation; what it holds afterwards is saved.

        Allocations made or changed in the transaction are held by ``holder`` (default:
        this process); the others keep theirs. Slices whose holder is gone are released.
        """
        with self._locked(exclusive=True):
            entries, dropped = self._live_entries(report=True)
            pool = self._pool(devices, entries)
            before = dict(pool.allocations)
            yield pool
            if pool.allocations != before or dropped:
                holders = {e.allocation.key: e.holder for e in entries}
                new_holder = holder or ProcessHolder.this_process()
                self._write(
                    [
                        _Entry(
                            allocation,
                            holders[key] if before.get(key) == allocation else new_holder,
                        )
                        for key, allocation in pool.allocations.items()
                    ]
                )

    def snapshot(self, devices: list[GPUDevice]) -> CapacityPool:
        """A read-only view for the spawn page and the flavor list (live holders only)."""
        with self._locked(exclusive=False):
            entries, _ = self._live_entries(report=False)
            return self._pool(devices, entries)

    def hold(
        self, devices: list[GPUDevice], allocation: Allocation, holder: ProcessHolder
    ) -> list[str]:
        """Record that ``holder`` (a server's or a job's process) holds ``allocation`` now.

        The allocation is recorded again if it is missing (as ``CapacityPool.restore``
        does, even when it no longer fits); the returned warnings say so.
        """
        with self._locked(exclusive=True):
            entries, _ = self._live_entries(report=True)
            pool = self._pool(devices, entries)
            warnings = pool.restore(allocation)
            holders = {e.allocation.key: e.holder for e in entries}
            holders[allocation.key] = holder
            self._write(
                [
                    _Entry(recorded, holders.get(key, holder))
                    for key, recorded in pool.allocations.items()
                ]
            )
        return warnings

    def holders(self) -> dict[str, ProcessHolder | None]:
        """Who holds each live allocation, by key (None: unknown, from a version-1 file)."""
        with self._locked(exclusive=False):
            entries, _ = self._live_entries(report=False)
        return {entry.allocation.key: entry.holder for entry in entries}
