"""The job service's capacity hook: job flavors admitted by the same admission as servers.

Design notes: docs/design/job-service.md, "jupyter_to_job.service.flavor_admission".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from gpuspawner.core.admission import GPUAdmission
from gpuspawner.core.allocation_record import pool_from_cluster
from gpuspawner.policy import Allocation, CapacityPool, GPUDevice, Refusal, UserIdentity
from gpuspawner.policy.admission import WAIT_CODES, JobForecast

from ..job_admission import JobAdmission, JobGranted, JobTicket, JobWaits, refused
from ..k8s_objects import job_object_name
from ..runfiles import atomic_write_text

log = logging.getLogger(__name__)


class IdentityBook:
    """The last known identity (groups, admin flag) of each job owner, kept in a JSON file.

    Written when it changes, so queued jobs are admitted with their owner's groups after
    a restart of the service too.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._identities: dict[str, UserIdentity] = {}
        try:
            data = json.loads(self.path.read_text())
            for name, entry in data.get("users", {}).items():
                self._identities[name] = UserIdentity(
                    name, frozenset(entry.get("groups", [])), bool(entry.get("admin"))
                )
        except FileNotFoundError:
            pass
        except (OSError, ValueError, AttributeError) as error:
            log.warning("Ignoring the unreadable identity book %s: %s", self.path, error)

    def get(self, name: str) -> UserIdentity:
        return self._identities.get(name) or UserIdentity(name)

    def remember(self, identity: UserIdentity) -> None:
        if self._identities.get(identity.name) == identity:
            return
        self._identities[identity.name] = identity
        payload = {
            "version": 1,
            "users": {
                name: {"groups": sorted(who.groups), "admin": who.admin}
                for name, who in sorted(self._identities.items())
            },
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, json.dumps(payload, indent=1) + "\n")


# Reads the cluster's nodes and pods (as the API returns them), for the one GPU pool.
ClusterReader = Callable[[], Awaitable[tuple[list[dict[str, Any]], list[dict[str, Any]]]]]


class FlavorAdmission(JobAdmission):
    """GPU shares for jobs by flavor, granted by ``admission`` (see the module docstring)."""

    def __init__(
        self,
        *,
        admission: GPUAdmission,
        devices: list[GPUDevice],
        identities: IdentityBook,
        ledger_path: str | None = None,
        cluster: ClusterReader | None = None,
        clock: Callable[[], datetime] | None = None,
    ):
        if ledger_path and cluster is not None:
            raise ValueError(
                "FlavorAdmission takes either the ledger shared with a LocalGPUSpawner or the "
                "Kubernetes cluster's pool, not both: set allocation_ledger only for local jobs."
            )
        self.admission = admission
        self.ledger_path = ledger_path or None
        self.cluster = cluster
        self.devices = list(devices)
        self.identities = identities
        self._clock = clock or (lambda: datetime.now(UTC))
        self._pool = CapacityPool(self.devices)
        # What each running job of this service holds, for ``hold``.
        self._held: dict[str, Allocation] = {}
        # Every job this service runs now (GPU or not), for the per-user job limits.
        self._running: dict[str, JobTicket] = {}

    async def refresh_from_cluster(self) -> list[str]:
        """Rebuild the pool from the cluster's nodes and pods (servers' and jobs' records).

        The slices this service granted whose pods do not exist yet are kept. Returns the
        warnings of slices that no longer fit (logged too). Without ``cluster``: nothing.
        """
        if self.cluster is None:
            return []
        nodes, pods = await self.cluster()
        # Built after the reads, with what was granted meanwhile, in one synchronous step.
        pool, warnings = pool_from_cluster(nodes, pods, also=list(self._held.values()))
        self.devices = list(pool.devices)
        self._pool = pool
        for warning in warnings:
            log.warning("Rebuilding the cluster's GPU pool: %s", warning)
        return warnings

    async def follow_cluster(self, stop: asyncio.Event, every_seconds: float = 5.0) -> None:
        """Refresh the pool from the cluster every ``every_seconds`` until ``stop``."""
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), timeout=every_seconds)
            except TimeoutError:
                pass
            if stop.is_set():
                return
            try:
                await self.refresh_from_cluster()
            except Exception as error:  # a slow API server must not end the refreshes
                log.warning("Could not read the cluster's GPU pool: %s", error)

    def _running_flavors(self, owner: str) -> list[str]:
        return [t.flavor or "" for t in self._running.values() if t.owner == owner]

    @contextlib.contextmanager
    def current_pool(self) -> Iterator[CapacityPool]:
        """The pool, for one decision: what it holds afterwards is what is allocated.

        The one place the pool comes from: the ledger shared with the hub when
        ``ledger_path`` is set (locked for the decision), else this process's own.
        """
        if self.ledger_path:
            from gpuspawner.core.ledger import AllocationLedger

            with AllocationLedger(self.ledger_path, log).transaction(self.devices) as pool:
                yield pool
        else:
            yield self._pool

    def validate(self, ticket: JobTicket) -> None:
        """Refuse an unknown flavor, one whose GPU share no GPU here could ever hold, or
        one whose GPU-hour budget its owner has used up (at once, rather than queued)."""
        try:
            self.admission.check_job_flavor(
                self.devices, self.identities.get(ticket.owner), ticket.flavor, now=self._clock()
            )
        except Refusal as refusal:
            raise refused(refusal) from None

    def acquire(self, ticket: JobTicket) -> JobGranted | JobWaits:
        identity = self.identities.get(ticket.owner)
        with self.current_pool() as pool:
            try:
                grant = self.admission.grant_job(
                    pool,
                    identity,
                    ticket.flavor,
                    key=ticket.key,
                    now=self._clock(),
                    running_jobs=self._running_flavors(ticket.owner),
                    object_name=job_object_name(ticket.job_id),
                )
            except Refusal as refusal:
                if refusal.code in WAIT_CODES:
                    return JobWaits.for_refusal(refusal)
                raise refused(refusal) from None
        self._running[ticket.key] = ticket
        if grant.allocation is not None:
            self._held[ticket.key] = grant.allocation
        self.admission.record_start(
            grant, name=ticket.job_id, groups=identity.groups, now=self._clock()
        )
        return JobGranted(grant)

    def forecasts(self, owner: str, queued: Mapping[str, int]) -> dict[str, JobForecast]:
        if self.ledger_path:
            from gpuspawner.core.ledger import AllocationLedger

            pool = AllocationLedger(self.ledger_path, log).snapshot(self.devices)
        else:
            pool = self._pool
        user, now, running = self.identities.get(owner), self._clock(), self._running_flavors(owner)
        answers = {}
        for flavor, waiting in queued.items():
            try:
                answers[flavor] = self.admission.forecast_job(
                    pool, user, flavor, now=now, running_jobs=running, queued=waiting
                )
            except Refusal:
                pass  # it could never start: the flavor list says why
        return answers

    def expected_environment(self, owner: str, flavor: str | None) -> dict[str, str] | None:
        if self.ledger_path:
            from gpuspawner.core.ledger import AllocationLedger

            pool = AllocationLedger(self.ledger_path, log).snapshot(self.devices)
        else:
            pool = self._pool  # booked and freed again in one synchronous step
        grant = self.admission.preview_job(
            pool,
            self.identities.get(owner),
            flavor,
            now=self._clock(),
            running_jobs=self._running_flavors(owner),
        )
        return JobGranted(grant).environment if grant is not None else None

    def release(self, ticket: JobTicket) -> None:
        self.admission.record_end(ticket.key, self._clock())
        self._held.pop(ticket.key, None)
        self._running.pop(ticket.key, None)
        with self.current_pool() as pool:
            pool.release(ticket.key)

    def restore(self, ticket: JobTicket, gpu: dict[str, Any] | None) -> None:
        self._running[ticket.key] = ticket
        if not gpu or not gpu.get("allocation"):
            return
        allocation = Allocation.from_dict(gpu["allocation"])
        self._held[ticket.key] = allocation
        with self.current_pool() as pool:
            for warning in pool.restore(allocation):
                log.warning("Job %s: %s", ticket.job_id, warning)

    def reconciled(self) -> None:
        """Close the usage intervals of jobs that no longer run (ended while the service
        was down, past what the job store knew)."""
        usage = self.admission.usage_record()
        if usage is None:
            return
        try:
            gone = usage.close_dangling(self._running, self._clock(), kinds=("job",))
        except SQLAlchemyError:  # accounting must never keep the service from starting
            log.exception("Could not close the usage intervals of jobs that ended")
            return
        if gone:
            log.info("Usage record: closed %d jobs that no longer run", len(gone))

    def hold(self, ticket: JobTicket, pid: int, start_time: float) -> None:
        """In the ledger shared with the hub, the job's slice is held by its runner from now
        on: a booking of a service killed before its runner started is dropped at the next
        decision, and a running job keeps its slice while the service restarts."""
        allocation = self._held.get(ticket.key)
        if not self.ledger_path or allocation is None:
            return  # this service's own pool ends with it; a CPU job holds no slice
        from gpuspawner.core.ledger import AllocationLedger, ProcessHolder

        ledger = AllocationLedger(self.ledger_path, log)
        for warning in ledger.hold(self.devices, allocation, ProcessHolder(pid, start_time)):
            log.warning("Job %s: %s", ticket.job_id, warning)
