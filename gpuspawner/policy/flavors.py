"""Job flavors: which "Run as Job" flavors a user may use now, and why not otherwise.

The same identity and the same catalog as the spawner decide it, so a student can
never get through the job path what the spawn page would refuse: a course's
flavor is open to its students and instructors during the term, a research
flavor to the holders of an active allocation.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .catalog import Catalog
from .catalog_models import JobFlavor
from .entitlements import UserIdentity, local_day


@dataclass(frozen=True)
class FlavorEntitlement:
    """One flavor as one user sees it."""

    flavor: JobFlavor
    available: bool
    reason: str
    """Why it is available ("through ML101") or not, as a sentence."""
    research: bool = False
    """Available through an active research allocation the user holds."""


def _course_access(
    catalog: Catalog, user: UserIdentity, course_id: str, now: datetime
) -> str | None:
    course = catalog.courses_by_id.get(course_id)
    if course is None or not (
        catalog.takes(course, user.name, user.groups)
        or catalog.teaches(course, user.name, user.groups)
    ):
        return None
    schedule = course.course_schedule
    in_term = schedule.in_term(now.astimezone(schedule.timezone).date())
    return f"through {course.title}" if in_term else ""


def _research_access(
    catalog: Catalog, user: UserIdentity, grant_id: str, now: datetime
) -> str | None:
    grant = catalog.research_by_id.get(grant_id)
    if grant is None or not catalog.holds(grant, user.name, user.groups):
        return None
    # The same day as the spawner's (entitlements.evaluate).
    return f"through {grant.title}" if grant.active_on(local_day(catalog, now)) else ""


def flavor_entitlements(
    catalog: Catalog, user: UserIdentity, now: datetime
) -> list[FlavorEntitlement]:
    """Every flavor with whether ``user`` may run jobs on it at ``now``."""
    result = []
    for flavor in catalog.flavors:
        access = flavor.access
        if user.admin:
            result.append(FlavorEntitlement(flavor, True, "as a hub admin"))
            continue
        if access.everyone or user.name in access.users or set(access.groups) & user.groups:
            result.append(FlavorEntitlement(flavor, True, "open to you"))
            continue
        research = [_research_access(catalog, user, grant_id, now) for grant_id in access.research]
        reasons = [
            _course_access(catalog, user, course_id, now) for course_id in access.courses
        ] + research
        granted = next((r for r in reasons if r), None)
        if granted:
            result.append(FlavorEntitlement(flavor, True, granted, research=any(research)))
        elif any(r == "" for r in reasons):
            result.append(
                FlavorEntitlement(
                    flavor,
                    False,
                    f"{flavor.title} came with a course term or research allocation that is not "
                    "active now.",
                )
            )
        else:
            result.append(
                FlavorEntitlement(flavor, False, f"{flavor.title} is not offered to you.")
            )
    return result


def default_flavor(entitlements: list[FlavorEntitlement]) -> str | None:
    """The flavor a person's Run as Job dialog preselects: for a researcher, the first GPU
    flavor of their research allocation (what the allocation exists for), else the first
    flavor open to them, in catalog order; None when none is open.

    Decided from the entitlements, not a ``default:`` in the catalog: one catalog serves
    students, for whom the first (often CPU) flavor is right, and researchers alike.
    """
    available = [e for e in entitlements if e.available]
    research_gpu = next((e for e in available if e.research and e.flavor.share), None)
    chosen = research_gpu or next(iter(available), None)
    return chosen.flavor.id if chosen else None


def flavor_for(
    catalog: Catalog, user: UserIdentity, flavor_id: object, now: datetime
) -> FlavorEntitlement | None:
    """The entitlement for one flavor id, or None for an id the catalog does not have."""
    if not isinstance(flavor_id, str):
        return None
    entitlements = flavor_entitlements(catalog, user, now)
    return next((e for e in entitlements if e.flavor.id == flavor_id), None)
