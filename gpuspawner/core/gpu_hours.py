"""The GPU-hour part of the admission: the usage record each start and end goes into, and
the budgets a start draws on. Accounting never stops a class: a record that cannot be
opened or read is logged, and starts go on unbudgeted."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any, Literal

from sqlalchemy.exc import SQLAlchemyError

from ..accounting.budgets import BudgetStatus, job_budget, server_budget
from ..accounting.intervals import UsageInterval, allocation_share
from ..accounting.store import UsageStore, shared_usage_store
from ..policy import CapacityPool, Catalog, UserIdentity
from ..policy.catalog_models import JobFlavor
from ..policy.entitlements import Entitlement
from .grant import Grant


class GPUHourAccounting:
    """The usage record of ``usage_db_url`` and the budgets it counts, for
    :class:`~gpuspawner.core.admission.GPUAdmission` (which has the setting and the log)."""

    usage_db_url: str
    log: Any

    def usage_record(self) -> UsageStore | None:
        """The usage record of ``usage_db_url`` (one per process), or None without one, or
        while it cannot be opened (logged: accounting must never stop a class)."""
        if not self.usage_db_url:
            return None
        try:
            return shared_usage_store(self.usage_db_url)
        except SQLAlchemyError:
            self.log.exception("The GPU-hour usage record cannot be opened")
            return None

    def server_budget(
        self, catalog: Catalog, entitlement: Entitlement, user: UserIdentity, now: datetime
    ) -> BudgetStatus | None:
        """The budget a server of ``entitlement``'s profile draws on now, for the spawn card
        and the admission (None: none applies, or there is no usage record)."""
        profile = entitlement.profile
        if profile.share is None or not (
            (profile.course and profile.course.budget)
            or (profile.research and profile.research.budget)
        ):
            return None
        usage = self._usage_for_budgets()
        if usage is None:
            return None
        try:
            return server_budget(catalog, profile, entitlement.role, user, usage, now)
        except SQLAlchemyError:
            self.log.exception("The usage record cannot be read: %s starts unbudgeted", profile.id)
            return None

    def job_budget(
        self, catalog: Catalog, user: UserIdentity, flavor: JobFlavor, now: datetime
    ) -> BudgetStatus | None:
        """The budget a job of ``flavor`` draws on now (None: none applies, or no record)."""
        courses = [catalog.courses_by_id.get(c) for c in flavor.access.courses]
        grants = [catalog.research_by_id.get(r) for r in flavor.access.research]
        if flavor.share is None or not (
            any(c and c.budget for c in courses) or any(g and g.budget for g in grants)
        ):
            return None
        usage = self._usage_for_budgets()
        if usage is None:
            return None
        try:
            return job_budget(catalog, user, flavor, usage, now)
        except SQLAlchemyError:
            self.log.exception("The usage record cannot be read: %s runs unbudgeted", flavor.id)
            return None

    _warned_no_record = False

    def _usage_for_budgets(self) -> UsageStore | None:
        # A usage record that cannot be read lets starts through (logged): accounting must
        # never stop a class.
        usage = self.usage_record()
        if usage is None and not GPUHourAccounting._warned_no_record:
            GPUHourAccounting._warned_no_record = True
            self.log.warning(
                "The catalog sets GPU-hour budgets but there is no usage record to count "
                "them: set c.GPUAdmission.usage_db_url. Budgets are not enforced."
            )
        return usage

    @staticmethod
    def _within_budget(
        pool: CapacityPool, key: str, kind: Literal["server", "job"], status: BudgetStatus | None
    ) -> None:
        """Refuse (and free the booking of) a start whose budget is used up."""
        if status is not None and status.exhausted:
            pool.release(key)
            raise status.refusal(kind)

    def record_start(
        self, grant: Grant, *, name: str, groups: Collection[str], now: datetime
    ) -> None:
        """Open the usage interval of a started server or job holding a GPU share (a no-op
        without a share or a usage record). A new start: an interval left open for the same
        key is stale and closed now."""
        usage = self.usage_record()
        if usage is None or grant.allocation is None:
            return
        interval = UsageInterval(
            key=grant.key,
            kind=grant.kind,
            owner=grant.owner,
            name=name,
            profile=grant.subject,
            share=allocation_share(grant.allocation),
            started=now,
            course=grant.charge.course,
            allocation=grant.charge.allocation,
            groups=tuple(groups),
        )
        try:
            usage.open(interval, grant.allocation.device_ids, fresh=True)
        except Exception:  # accounting must never stop a class: log, and go on
            self.log.exception("Could not record the start of %s in the usage record", grant.key)

    def record_end(self, key: str, now: datetime) -> None:
        """Close the usage interval of ``key`` (a server or job that ended), if open."""
        usage = self.usage_record()
        if usage is None:
            return
        try:
            usage.close_interval(key, now)
        except Exception:
            self.log.exception("Could not record the end of %s in the usage record", key)
