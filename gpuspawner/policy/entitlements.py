"""Entitlements: which profiles a user may start now, and for the others why not and when.

``evaluate`` is called for every spawn-page render and again, server-side, at
every start, so a tampered form can never start what the page did not offer.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, tzinfo
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from .catalog import Catalog
from .catalog_fields import Environment, Resources
from .catalog_models import (
    Course,
    ProfileSection,
    ResearchAllocation,
    SoftwareEnvironment,
    StandingProfile,
    StorageMount,
)
from .schedule import CourseSchedule, Phase, ScheduleStatus
from .share import GPUShare
from .wording import Told, tell


@dataclass(frozen=True)
class UserIdentity:
    """Who is asking: the JupyterHub user's name, groups and admin flag."""

    name: str
    groups: frozenset[str] = field(default_factory=frozenset)
    admin: bool = False


class ProfileKind(enum.Enum):
    COURSE = "course"
    RESEARCH = "research"
    STANDING = "standing"


class Role(enum.Enum):
    """Why the user sees a profile."""

    STUDENT = "student"
    INSTRUCTOR = "instructor"
    ADMIN = "admin"
    GRANTEE = "grantee"
    EVERYONE = "everyone"


@dataclass(frozen=True)
class Profile:
    """A startable environment, whatever the catalog section it came from."""

    id: str
    kind: ProfileKind
    title: str
    description: str
    share: GPUShare | None
    resources: Resources
    environment: Environment
    storage: tuple[StorageMount, ...]
    max_gpu_servers: int | None = None
    course: Course | None = None
    research: ResearchAllocation | None = None
    default: bool = False
    environments: tuple[SoftwareEnvironment, ...] = ()
    """The environments it offers to choose from (the first is the default); empty: its
    own ``environment`` runs."""
    zone: str = "production"
    """``experimental``: its ``source: experimental`` storage is wiped every day."""

    @property
    def course_id(self) -> str | None:
        return self.course.id if self.course else None


@dataclass(frozen=True)
class Entitlement:
    """One profile as one user sees it at one instant."""

    profile: Profile
    available: bool
    status: str
    """A short sentence: "Open until 12:00" or, when not available, why and when it will be."""
    role: Role
    phase: Phase | None = None
    opens_at: datetime | None = None
    """When it becomes available, if it is not now."""
    class_start: datetime | None = None
    class_end: datetime | None = None
    session_end: datetime | None = None
    """When a server started now is reclaimed (class end plus grace); None: never."""
    status_told: Told | None = None
    """``status`` with the moments it tells, for a page that tells them in its reader's
    zone; None when it tells no moment (or only days)."""


def _profile(kind: ProfileKind, section: ProfileSection, **own: Any) -> Profile:
    """``section`` of the catalog as a profile; ``own`` are the fields only its kind has."""
    return Profile(
        id=section.id,
        kind=kind,
        title=section.title,
        description=section.description,
        share=section.share,
        resources=section.resources,
        environment=section.environment,
        storage=tuple(section.storage),
        environments=section.offered_environments,
        zone=section.zone,
        **own,
    )


def _course_profile(course: Course) -> Profile:
    return _profile(
        ProfileKind.COURSE, course, max_gpu_servers=course.max_gpu_servers, course=course
    )


def _research_profile(grant: ResearchAllocation) -> Profile:
    return _profile(
        ProfileKind.RESEARCH, grant, max_gpu_servers=grant.max_gpu_servers, research=grant
    )


def _standing_profile(profile: StandingProfile) -> Profile:
    return _profile(ProfileKind.STANDING, profile, default=profile.default)


def _cached_profile(cache: dict, key: str, build: Callable[[Any], Profile], item: Any) -> Profile:
    """Profiles are immutable: build each once per catalog."""
    profile = cache.get(key)
    if profile is None:
        profile = cache[key] = build(item)
    return profile


def _course_entitlement(
    course: Course,
    role: Role,
    now: datetime,
    cache: dict | None = None,
    today_in: dict[tzinfo, date] | None = None,
) -> Entitlement:
    """``course`` as a user in ``role`` sees it at ``now``.

    The entitlement depends on ``now`` only through the schedule's status (phase, current
    and next session) and the local date, so ``cache`` keeps the last one per course and
    role with that state, and a page drawn again before anything changed reuses it.
    ``today_in``: the dates of ``now`` by time zone, filled as courses ask (one conversion
    per zone for a page of 200 courses instead of several per course).
    """
    schedule = course.course_schedule
    zone = schedule.timezone
    status = schedule.status(now)
    days = {} if today_in is None else today_in
    today = days.get(zone)
    if today is None:
        today = days[zone] = now.astimezone(zone).date()
    if cache is None:
        return _course_entitlement_in(course, role, now, schedule, status, today, {})
    state = (schedule, status, today)
    key = f"entitlement:{role.value}:{course.id}"
    last = cache.get(key)
    if last is not None and last[0] == state:
        return last[1]
    entitlement = _course_entitlement_in(course, role, now, schedule, status, today, cache)
    cache[key] = (state, entitlement)
    return entitlement


def _course_entitlement_in(
    course: Course,
    role: Role,
    now: datetime,
    schedule: CourseSchedule,
    status: ScheduleStatus,
    today: date,
    cache: dict,
) -> Entitlement:
    """The entitlement of ``course`` in ``status`` on the local date ``today`` (``now``'s)."""
    zone = schedule.timezone
    profile = _cached_profile(cache, "course:" + course.id, _course_profile, course)

    def entitlement(available: bool, told: Told | str, **moments: Any) -> Entitlement:
        """``profile`` to ``role`` in this phase; its status ``told``, and with it the moments
        it tells where it tells any."""
        if isinstance(told, str):
            return Entitlement(profile, available, told, role, status.phase, **moments)
        return Entitlement(
            profile, available, told.text, role, status.phase, status_told=told, **moments
        )

    in_term = schedule.in_term(today)
    upcoming = status.next_session
    if role in (Role.INSTRUCTOR, Role.ADMIN) and course.instructors_anytime and in_term:
        told = tell("Instructor access during the term", now, zone)
        if status.phase.accepts_new_servers and status.session:
            told = tell(told.pattern + "; class until {0}", now, zone, status.session.end)
        elif upcoming:
            told = tell(told.pattern + "; students from {0}", now, zone, upcoming.opens_at)
        return entitlement(True, told)
    session = status.session
    if status.phase.accepts_new_servers and session is not None:
        if status.phase is Phase.OPENING:
            told = tell(
                "Open now for the {0} class until {1}", now, zone, session.start, session.end
            )
        else:
            told = tell("Open until {0}", now, zone, session.end)
        return entitlement(
            True,
            told,
            class_start=session.start,
            class_end=session.end,
            session_end=session.reclaim_at,
        )
    if upcoming is None:
        if today < schedule.first_day:
            text = f"The term starts on {schedule.first_day:%a %d %b %Y}"
        elif status.phase is Phase.GRACE and session is not None:
            told = tell("Class ended at {0}; this was the last class", now, zone, session.end)
            return entitlement(False, told)
        else:
            text = f"The term ended on {schedule.last_day:%a %d %b %Y}; no more classes"
        return entitlement(False, text)
    if status.phase is Phase.GRACE and session is not None:
        told = tell(
            "Class ended at {0}; opens again {1}", now, zone, session.end, upcoming.opens_at
        )
    elif today < schedule.first_day:
        told = tell("Opens {0}, the first class of the term", now, zone, upcoming.opens_at)
    else:
        told = tell("Opens {0}", now, zone, upcoming.opens_at)
    return entitlement(
        False, told, opens_at=upcoming.opens_at, class_start=upcoming.start, class_end=upcoming.end
    )


def _research_entitlement(
    grant: ResearchAllocation, now: datetime, zone: tzinfo, cache: dict | None = None
) -> Entitlement:
    profile = _cached_profile(
        {} if cache is None else cache, "research:" + grant.id, _research_profile, grant
    )
    today = now.astimezone(zone).date()
    if grant.starts and today < grant.starts:
        opens = datetime.combine(grant.starts, datetime.min.time(), tzinfo=zone)
        return Entitlement(
            profile,
            False,
            f"Starts on {grant.starts:%a %d %b %Y}",
            Role.GRANTEE,
            opens_at=opens.astimezone(UTC),
        )
    if today > grant.expires:
        return Entitlement(
            profile,
            False,
            f"Expired on {grant.expires:%a %d %b %Y}; ask your research computing team to renew it",
            Role.GRANTEE,
        )
    return Entitlement(profile, True, f"Granted until {_day(grant.expires)}", Role.GRANTEE)


def local_day(catalog: Catalog, now: datetime) -> date:
    """The date at ``now`` in the catalog's time zone (``settings.timezone``).

    A research grant's ``starts`` and ``expires`` are whole days there, for servers and jobs
    alike: a grant that expires on a day is open until midnight of that day in that zone.
    """
    return now.astimezone(_zone(catalog.settings.timezone)).date()


def _day(value: date) -> str:
    return f"{value:%a %d %b %Y}"


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def evaluate(catalog: Catalog, user: UserIdentity, now: datetime) -> list[Entitlement]:
    """Every profile ``user`` can see at ``now`` (aware), startable or not.

    Order: courses, research allocations, then standing profiles (catalog order
    within each).
    """
    if now.tzinfo is None:
        raise ValueError("evaluate() needs an aware datetime")
    result: list[Entitlement] = []
    cache = catalog.profile_cache
    courses, taught = catalog.courses_for(user.name, user.groups)
    if user.admin:
        courses = list(catalog.courses)
    now = now.astimezone(UTC)  # converted once: each course's schedule works in UTC
    today_in: dict[tzinfo, date] = {}
    for course in courses:
        if course.id in taught:
            role = Role.INSTRUCTOR
        elif user.admin:
            role = Role.ADMIN
        else:
            role = Role.STUDENT
        result.append(_course_entitlement(course, role, now, cache, today_in))
    zone = _zone(catalog.settings.timezone)
    for grant in catalog.research_for(user.name, user.groups):
        result.append(_research_entitlement(grant, now, zone, cache))
    for standing in catalog.standing:
        if standing.groups and not user.admin and not (set(standing.groups) & user.groups):
            continue
        result.append(
            Entitlement(
                _cached_profile(cache, "standing:" + standing.id, _standing_profile, standing),
                True,
                "Always available",
                Role.ADMIN if standing.groups and user.admin else Role.EVERYONE,
            )
        )
    return result


def entitlement_for(
    catalog: Catalog, user: UserIdentity, profile_id: object, now: datetime
) -> Entitlement | None:
    """The entitlement for one profile id, or None if the user cannot see it at all."""
    if not isinstance(profile_id, str):
        return None
    return next((e for e in evaluate(catalog, user, now) if e.profile.id == profile_id), None)
