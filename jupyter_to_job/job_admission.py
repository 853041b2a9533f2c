"""Whether a job may start now, and with which GPU share: the manager's capacity hook.

Design notes: docs/design/jobs.md, "jupyter_to_job.job_admission".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuspawner.core.cgroups import ResourceLimits
from gpuspawner.core.grant import Grant
from gpuspawner.policy import Refusal
from gpuspawner.policy.admission import OWN_LIMIT_CODES, JobForecast

from .errors import JobRefused


def refused(refusal: Refusal) -> JobRefused:
    """The job API's error for a refusal of the admission (same code, same sentence)."""
    return JobRefused(refusal.message, code=refusal.code)


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
class JobGranted:
    """The job may start, as ``grant`` says (None: as its host is, without a decision)."""

    grant: Grant | None = None

    @property
    def environment(self) -> dict[str, str]:
        """The variables that give the job its flavor and GPU share."""
        return self.grant.environment_over({}) if self.grant else {}

    @property
    def gpu(self) -> dict[str, Any] | None:
        """Stored with the job: ``description``, ``device_ids`` and the pool's
        ``allocation`` (restored after a restart); None without a GPU."""
        return self.grant.job_record() if self.grant else None

    @property
    def limits(self) -> ResourceLimits:
        """The flavor's CPU and memory, enforced where the executor can (cgroups locally)."""
        return self.grant.limits if self.grant else ResourceLimits()


@dataclass(frozen=True)
class JobWaits:
    """The job must wait; ``reason`` is a sentence for its owner."""

    reason: str
    own_limit: bool = False
    """It waits on its owner's own running jobs: other people's jobs may start meanwhile.
    Otherwise it waits on capacity everyone shares, and the jobs after it wait too."""

    @classmethod
    def for_refusal(cls, refusal: Refusal) -> JobWaits:
        """The wait for a refusal whose code is in ``WAIT_CODES``."""
        return cls(refusal.message, own_limit=refusal.code in OWN_LIMIT_CODES)


class JobAdmission:
    """No capacity management: every job may start at once, with the GPUs its host shows.

    Right for standalone mode, where the manager runs inside one user's server: a job
    inherits that server's own GPU share (its ``CUDA_VISIBLE_DEVICES`` and friends).
    """

    def validate(self, ticket: JobTicket) -> None:
        """Raise :class:`JobRefused` when the job could never start."""

    def acquire(self, ticket: JobTicket) -> JobGranted | JobWaits:
        return JobGranted()

    def forecasts(self, owner: str, queued: Mapping[str, int]) -> dict[str, JobForecast]:
        """For each flavor of ``queued`` (with the jobs already waiting on it), whether a job
        of ``owner`` would start now or wait, and why, for the Run as Job dialog; nothing is
        booked. A flavor left out has nothing to say (here: no capacity management)."""
        return {}

    def expected_environment(self, owner: str, flavor: str | None) -> dict[str, str] | None:
        """The GPU environment a job of ``owner`` and ``flavor`` would get if it started now
        (its runner can then be started ahead with it); None when it would not start now.
        Nothing is booked. Here: none, as every job runs as its host is."""
        return {}

    def release(self, ticket: JobTicket) -> None:
        """The job has ended: free what it held."""

    def restore(self, ticket: JobTicket, gpu: dict[str, Any] | None) -> None:
        """After a restart, record what a still-running job holds."""

    def reconciled(self) -> None:
        """After a restart, once every still-running job was restored and every job that
        ended meanwhile released: forget whatever else is recorded as running."""

    def hold(self, ticket: JobTicket, pid: int, start_time: float) -> None:
        """The job's own process (``pid``, started at ``start_time``, seconds since the
        epoch) now runs: what the job holds lives as long as that process, not as long
        as the manager's. Called as soon as the process exists, and again when a restarted
        manager adopts a still-running job."""
