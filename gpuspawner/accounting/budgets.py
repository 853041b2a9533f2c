"""Budgets: how many GPU-hours a student has left in a course this week, or a research
allocation in its term, and the refusal of a start past it.

Design notes: docs/design/accounting.md, "gpuspawner.accounting.budgets".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from fractions import Fraction
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo

from ..policy.budget_spec import budget_text, format_gpu_hours
from ..policy.capacity import Refusal
from ..policy.catalog import Catalog
from ..policy.catalog_models import Course, JobFlavor, ResearchAllocation
from ..policy.entitlements import Profile, Role, UserIdentity
from ..policy.wording import Told
from .intervals import day_start, week_of

if TYPE_CHECKING:
    # Only for annotations: the budgets need no database driver of their own.
    from .store import UsageStore


@dataclass(frozen=True)
class Charge:
    """What a server's or job's GPU-hours count toward."""

    course: str | None = None
    allocation: str | None = None
    """A research allocation's id."""


def charge_of_profile(profile: Profile) -> Charge:
    """A server's charge: its course or research allocation (a standing profile: none)."""
    return Charge(
        course=profile.course.id if profile.course else None,
        allocation=profile.research.id if profile.research else None,
    )


def charge_of_flavor(
    catalog: Catalog, user: UserIdentity, flavor: JobFlavor, now: datetime
) -> Charge:
    """A job's charge: the first course (in term) or active research allocation of the
    flavor's ``access`` that ``user`` takes, teaches or holds; none otherwise."""
    for course_id in flavor.access.courses:
        course = catalog.courses_by_id.get(course_id)
        if course is None:
            continue
        member = catalog.takes(course, user.name, user.groups) or catalog.teaches(
            course, user.name, user.groups
        )
        schedule = course.course_schedule
        if member and schedule.in_term(now.astimezone(schedule.timezone).date()):
            return Charge(course=course.id)
    zone = ZoneInfo(catalog.settings.timezone)
    for grant_id in flavor.access.research:
        grant = catalog.research_by_id.get(grant_id)
        if grant is not None and catalog.holds(grant, user.name, user.groups):
            if grant.active_on(now.astimezone(zone).date()):
                return Charge(allocation=grant.id)
    return Charge()


@dataclass(frozen=True)
class BudgetStatus:
    """One budget as it stands now for one person (or one research allocation)."""

    scope: Literal["course", "research"]
    title: str
    """The course's or the allocation's title."""
    budget: Fraction
    used: Fraction
    begins: datetime | None
    ends: datetime
    """When the period ends: the next Monday 00:00 (courses), the end of ``expires``."""
    zone: tzinfo

    @property
    def left(self) -> Fraction:
        return max(self.budget - self.used, Fraction(0))

    @property
    def exhausted(self) -> bool:
        return self.used >= self.budget

    @property
    def zone_name(self) -> str:
        return str(getattr(self.zone, "key", self.zone))

    @property
    def renews(self) -> str:
        """``Monday 00:00 (Europe/Zurich)``; for research, the day after ``expires``."""
        local = self.ends.astimezone(self.zone)
        if self.scope == "course":
            return f"{local:%A} {local:%H:%M} ({self.zone_name})"
        last = (local - timedelta(days=1)).date()
        return f"{last:%a %d %b %Y}"

    def line(self) -> str:
        """The budget line of a spawn card or the Run as Job dialog."""
        left, budget = format_gpu_hours(self.left, down=True), budget_text(self.budget)
        if self.scope == "course":
            local = self.ends.astimezone(self.zone)
            renews = f"{local:%A} {local:%H:%M}, {self.zone_name}"
            return f"{left} of your {budget} GPU-hours left this week (renews {renews})"
        return f"{left} of {budget} GPU-hours left in {self.title} (until {self.renews})"

    def told(self) -> Told:
        """:meth:`line` with the course budget's renewal as a moment ("... left this week
        (renews {0})", told "Mon 00:00" in the course's zone), which a page tells again in
        its reader's zone; a research budget's last day is a date and stays in words."""
        if self.scope != "course":
            return Told(self.line().replace("{", "{{").replace("}", "}}"), (), ())
        left, budget = format_gpu_hours(self.left, down=True), budget_text(self.budget)
        local = self.ends.astimezone(self.zone)
        return Told(
            f"{left} of your {budget} GPU-hours left this week (renews {{0}})",
            (self.ends,),
            (f"{local:%a %H:%M}",),
        )

    def refusal(self, kind: Literal["server", "job"]) -> Refusal:
        """The refusal of a start past this budget, as a sentence to act on."""
        used, budget = format_gpu_hours(self.used), budget_text(self.budget)
        instead = (
            "start a profile without a GPU"
            if kind == "server"
            else "run the job on a flavor without a GPU"
        )
        if self.scope == "course":
            message = (
                f"You have used {used} of your {budget} GPU-hours for {self.title} this week; "
                f"the budget renews on {self.renews}. Ask your instructor if you need more, "
                f"or {instead}."
            )
        else:
            message = (
                f"{self.title} has used {used} of its {budget} GPU-hours for its term (until "
                f"{self.renews}). Ask your research computing team to extend it, or {instead}."
            )
        return Refusal("budget", message, status=403)


def course_budget(
    course: Course, student: str, usage: UsageStore, now: datetime
) -> BudgetStatus | None:
    """``student``'s budget in ``course`` this week (None: the course has none)."""
    if course.budget is None:
        return None
    zone = course.course_schedule.timezone
    begins, ends = week_of(now, zone)
    used = sum(
        (
            interval.gpu_hours(begins, ends, now=now)
            for interval in usage.intervals(begins, ends, owner=student, course=course.id)
        ),
        Fraction(0),
    )
    return BudgetStatus(
        "course",
        course.title,
        course.budget.gpu_hours_per_student_per_week,
        used,
        begins,
        ends,
        zone,
    )


def research_budget(
    catalog: Catalog, grant: ResearchAllocation, usage: UsageStore, now: datetime
) -> BudgetStatus | None:
    """The allocation's budget for its term, all holders together (None: it has none)."""
    if grant.budget is None:
        return None
    zone = ZoneInfo(catalog.settings.timezone)
    begins = day_start(grant.starts, zone) if grant.starts else None
    ends = day_start(grant.expires + timedelta(days=1), zone)
    used = sum(
        (
            interval.gpu_hours(begins, ends, now=now)
            for interval in usage.intervals(begins, ends, allocation=grant.id)
        ),
        Fraction(0),
    )
    return BudgetStatus(
        "research", grant.title, grant.budget.gpu_hours_per_term, used, begins, ends, zone
    )


def server_budget(
    catalog: Catalog,
    profile: Profile,
    role: Role,
    user: UserIdentity,
    usage: UsageStore,
    now: datetime,
) -> BudgetStatus | None:
    """The budget a server of ``profile`` started by ``user`` (seeing it as ``role``) draws on."""
    if user.admin or profile.share is None:
        return None
    if profile.course is not None and role is Role.STUDENT:
        return course_budget(profile.course, user.name, usage, now)
    if profile.research is not None:
        return research_budget(catalog, profile.research, usage, now)
    return None


def job_budget(
    catalog: Catalog, user: UserIdentity, flavor: JobFlavor, usage: UsageStore, now: datetime
) -> BudgetStatus | None:
    """The budget a job of ``flavor`` run by ``user`` draws on (None: none applies)."""
    if user.admin or flavor.share is None:
        return None
    charge = charge_of_flavor(catalog, user, flavor, now)
    if charge.course is not None:
        course = catalog.courses_by_id[charge.course]
        if catalog.teaches(course, user.name, user.groups):
            return None
        return course_budget(course, user.name, usage, now)
    if charge.allocation is not None:
        return research_budget(catalog, catalog.research_by_id[charge.allocation], usage, now)
    return None
