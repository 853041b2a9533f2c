"""One record of who holds which GPU slice, shared by every process on one machine.

On a single workstation two processes hand out the same GPUs: the hub (its
LocalGPUSpawner starts servers) and the job service (it starts batch jobs). Each
keeps the policy's :class:`~gpuspawner.policy.CapacityPool` in memory; the ledger
makes them one pool. A decision is a transaction: take an exclusive lock on the
ledger file, read every allocation, decide, write the result, unlock. So a server
and a job can never be given the same slice, whichever process asks first.

The file is small JSON (one entry per running server or job), replaced atomically.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .policy import Allocation, CapacityPool, GPUDevice

LEDGER_VERSION = 1


class AllocationLedger:
    """A file-backed, lock-protected set of allocations for one GPU inventory."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def _read(self) -> list[Allocation]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as error:
            raise RuntimeError(
                f"The GPU allocation ledger {self.path} cannot be read ({error}); "
                "move it aside and restart the hub and the job service to rebuild it."
            ) from None
        return [Allocation.from_dict(item) for item in data.get("allocations", [])]

    def _write(self, pool: CapacityPool) -> None:
        payload = {
            "version": LEDGER_VERSION,
            "allocations": [
                a.to_dict() for a in sorted(pool.allocations.values(), key=lambda a: a.key)
            ],
        }
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".ledger-")
        with os.fdopen(handle, "w") as out:
            json.dump(payload, out, indent=1)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.path)

    @contextlib.contextmanager
    def _locked(self, exclusive: bool) -> Iterator[None]:
        with open(self.lock_path, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def transaction(self, devices: list[GPUDevice]) -> Iterator[CapacityPool]:
        """A pool holding every process's allocations; what it holds afterwards is saved."""
        with self._locked(exclusive=True):
            pool = self._pool(devices)
            before = dict(pool.allocations)
            yield pool
            if pool.allocations != before:
                self._write(pool)

    def snapshot(self, devices: list[GPUDevice]) -> CapacityPool:
        """A read-only view for the spawn page and the flavor list."""
        with self._locked(exclusive=False):
            return self._pool(devices)

    def _pool(self, devices: list[GPUDevice]) -> CapacityPool:
        pool = CapacityPool(devices)
        for allocation in self._read():
            pool.allocations[allocation.key] = allocation
        return pool
