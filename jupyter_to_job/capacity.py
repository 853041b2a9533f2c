"""Whether a job may start now, and with which GPU share: the manager's capacity hook.

The manager asks :meth:`JobCapacity.acquire` before it starts a queued job. The
answer is a :class:`CapacityGrant` (the environment that gives the job its GPU
share) or a :class:`CapacityWait` (the job stays queued, with the reason shown to
its owner; one that waits on its owner's own limit lets other people's jobs go
first). A flavor that can never run is refused at create time by
:meth:`JobCapacity.validate`. Which refusals wait is the policy's
:data:`~gpuspawner.policy.admission.WAIT_CODES`.

:class:`PoolCapacity` plugs the hub's policy in: it places shares on the same
:class:`~gpuspawner.policy.CapacityPool` the spawners use (allocation key
``job:<id>``) and renders them with ``local_share_environment``, so a job can
never get what the spawner would refuse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuspawner.cgroups import ResourceLimits
from gpuspawner.policy import Allocation, CapacityPool, GPUShare, Refusal, Reservation
from gpuspawner.policy.admission import OWN_LIMIT_CODES, WAIT_CODES
from gpuspawner.policy.local_share import local_share_environment

from .errors import JobRefused


@dataclass(frozen=True)
class JobTicket:
    """What the capacity hook knows of a job."""

    job_id: str
    owner: str
    flavor: str | None

    @property
    def key(self) -> str:
        """The job's key in the capacity pool."""
        return f"job:{self.job_id}"


@dataclass(frozen=True)
class CapacityGrant:
    """The job may start; ``environment`` gives it its GPU share."""

    environment: dict[str, str] = field(default_factory=dict)
    gpu: dict[str, Any] | None = None
    """Stored with the job: ``description``, ``device_ids`` and the pool's ``allocation``."""
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    """The flavor's CPU and memory, enforced where the executor can (cgroups locally)."""


@dataclass(frozen=True)
class CapacityWait:
    """The job must wait; ``reason`` is a sentence for its owner."""

    reason: str
    own_limit: bool = False
    """It waits on its owner's own running jobs: other people's jobs may start meanwhile.
    Otherwise it waits on capacity everyone shares, and the jobs after it wait too."""

    @classmethod
    def for_refusal(cls, refusal: Refusal) -> CapacityWait:
        """The wait for a refusal whose code is in ``WAIT_CODES``."""
        return cls(refusal.message, own_limit=refusal.code in OWN_LIMIT_CODES)


class JobCapacity:
    """No capacity management: every job may start at once, with the GPUs its host shows.

    Right for standalone mode, where the manager runs inside one user's server: a job
    inherits that server's own GPU share (its ``CUDA_VISIBLE_DEVICES`` and friends).
    """

    def validate(self, ticket: JobTicket) -> None:
        """Raise :class:`JobRefused` when the job could never start."""

    def acquire(self, ticket: JobTicket) -> CapacityGrant | CapacityWait:
        return CapacityGrant()

    def release(self, ticket: JobTicket) -> None:
        """The job has ended: free what it held."""

    def restore(self, ticket: JobTicket, gpu: dict[str, Any] | None) -> None:
        """After a restart, record what a still-running job holds."""

    def hold(self, ticket: JobTicket, pid: int, start_time: float) -> None:
        """The job's own process (``pid``, started at ``start_time``, seconds since the
        epoch) now runs: what the job holds lives as long as that process, not as long
        as the manager's. Called as soon as the process exists, and again when a restarted
        manager adopts a still-running job."""


class PoolCapacity(JobCapacity):
    """GPU shares from the hub's capacity pool, by job flavor.

    ``shares`` maps a flavor to its GPU share (None: a flavor without GPU); a
    flavor missing from it is refused. ``reservations`` returns the course seats
    held right now (``active_reservations(catalog, now)``), so jobs do not take
    a class's reserved GPUs.
    """

    def __init__(
        self,
        pool: CapacityPool,
        shares: Mapping[str | None, GPUShare | None] | Callable[[str | None], GPUShare | None],
        *,
        reservations: Callable[[], tuple[Reservation, ...]] = tuple,
        hami_core_library: str | None = None,
    ):
        self.pool = pool
        self._shares = shares
        self._reservations = reservations
        self.hami_core_library = hami_core_library

    def share_for(self, flavor: str | None) -> GPUShare | None:
        if callable(self._shares):
            return self._shares(flavor)
        if flavor not in self._shares:
            known = ", ".join(sorted(str(name) for name in self._shares if name)) or "none"
            raise JobRefused(
                f"There is no job flavor {flavor!r} here (flavors: {known}). "
                "Choose one of the flavors offered in the Run as Job dialog.",
                code="unknown-flavor",
            )
        return self._shares[flavor]

    def validate(self, ticket: JobTicket) -> None:
        share = self.share_for(ticket.flavor)
        if share is None:
            return
        probe = f"{ticket.key}:probe"
        try:
            self.pool.allocate(
                probe,
                owner=ticket.owner,
                profile_id=ticket.flavor or "",
                course_id=None,
                share=share,
            )
        except Refusal as refusal:
            if refusal.code not in WAIT_CODES:
                raise JobRefused(refusal.message, code=refusal.code) from None
        finally:
            self.pool.release(probe)

    def acquire(self, ticket: JobTicket) -> CapacityGrant | CapacityWait:
        share = self.share_for(ticket.flavor)
        profile = ticket.flavor or ""
        if share is None:
            return CapacityGrant(
                local_share_environment(None, None, self.pool.devices, profile_id=profile)
            )
        self.pool.release(ticket.key)  # a stale record of this job, from a failed start
        try:
            allocation = self.pool.allocate(
                ticket.key,
                owner=ticket.owner,
                profile_id=profile,
                course_id=None,
                share=share,
                reservations=self._reservations(),
            )
        except Refusal as refusal:
            if refusal.code in WAIT_CODES:
                return CapacityWait.for_refusal(refusal)
            raise JobRefused(refusal.message, code=refusal.code) from None
        environment = local_share_environment(
            share,
            allocation,
            self.pool.devices,
            profile_id=profile,
            hami_core_library=self.hami_core_library,
        )
        return CapacityGrant(
            environment,
            {
                "description": environment.get("GPUSPAWNER_GPU_SHARE", share.describe()),
                "device_ids": list(allocation.device_ids),
                "allocation": allocation.to_dict(),
            },
        )

    def release(self, ticket: JobTicket) -> None:
        self.pool.release(ticket.key)

    def restore(self, ticket: JobTicket, gpu: dict[str, Any] | None) -> None:
        if gpu and gpu.get("allocation"):
            self.pool.restore(Allocation.from_dict(gpu["allocation"]))
