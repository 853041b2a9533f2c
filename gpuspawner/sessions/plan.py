"""What the course-sessions service does next, decided from the catalog and the hub's user
models alone (pure): pre-warm before class, warn, reclaim at class end plus grace.
Design notes: docs/design/sessions.md, "gpuspawner.sessions.plan".
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

from gpuspawner.policy import Catalog, ClassSession, Course
from gpuspawner.policy.course_overrides import course_overrides
from gpuspawner.policy.instructors import profile_of
from gpuspawner.policy.prewarm import prewarm_token
from gpuspawner.policy.wording import duration, when

from .hub_time import parse_hub_time
from .reclaim import (
    ReclaimNotice,
    ReclaimReason,
    notices_for_server,
    policy_of,
    reclaim_at,
    server_key,
    warn_from,
)

WARN_AHEAD = timedelta(minutes=10)
"""How long before a server is reclaimed the warning is recorded."""


START_SLACK = timedelta(minutes=1)
"""The hub stamps ``started`` just before the spawner admits the start; a start admitted at
the opening instant may carry a stamp a moment earlier."""


MEMORY = timedelta(days=1)
"""How long after its class start a remembered pre-warm or warning is forgotten."""


class ActionKind(enum.Enum):
    PREWARM = "prewarm"
    RECLAIM = "reclaim"
    WARN = "warn"
    UNKNOWN_USER = "unknown-user"


@dataclass(frozen=True)
class Action:
    """One thing the service means to do to one server."""

    kind: ActionKind
    user: str
    server: str
    course: str
    detail: str
    """A sentence for the audit log."""
    key: tuple | None = None
    """Remembered once done, so it is not done again for the same session (None: no memory)."""
    options: dict | None = field(default=None, compare=False)
    """The user_options of a pre-warm start."""
    reason: ReclaimReason | None = None
    """Why a server is warned about or reclaimed (kept in the audit log)."""


def prewarm_class_start(course: Course, now: datetime) -> datetime | None:
    """The start S of the class whose pre-warming period ``[S - prewarm, S)`` holds ``now``."""
    schedule = course.course_schedule
    if not schedule.prewarm:
        return None
    status = schedule.status(now)
    for session in (status.session, status.next_session):
        if session is not None and session.start - schedule.prewarm <= now < session.start:
            return session.start
    return None


def session_of_server(course: Course, started: datetime) -> ClassSession | None:
    """The class session a student's server started at ``started`` was admitted for.

    A start is admitted in a session's lead time or class time, or in its pre-warming
    period; None when ``started`` lies in none of these (the start was not a student's).
    """
    schedule = course.course_schedule
    for moment in (started, started + START_SLACK):
        status = schedule.status(moment)
        if status.phase.accepts_new_servers and status.session is not None:
            return status.session
        upcoming = status.next_session
        if (
            schedule.prewarm
            and upcoming is not None
            and upcoming.start - schedule.prewarm <= moment < upcoming.start
        ):
            return upcoming
    return None


def _groups(user: dict) -> frozenset[str]:
    return frozenset(str(g) for g in user.get("groups") or ())


def server_label(user: str, server: str) -> str:
    return f"{user}'s server" if not server else f"{user}'s server {server!r}"


def _reclaim_reason(
    session: ClassSession | None,
    started: datetime,
    now: datetime,
    zone: tzinfo,
    extension: timedelta = timedelta(0),
) -> str:
    """Why a course server is stopped: started outside class, or its class and grace are over."""
    if session is None:
        return f"it was started at {when(started, now, zone)}, outside any class of the course."
    extended = (
        f", extended by its instructor by {duration(extension)} to "
        f"{when(session.reclaim_at + extension, now, zone)}"
        if extension
        else ""
    )
    return (
        f"the class of {when(session.start, now, zone)} ended at {when(session.end, now, zone)} "
        f"and its grace period at {when(session.reclaim_at, now, zone)}{extended}."
    )


def extension_of(course: Course, user: str, server_name: str, started: datetime) -> timedelta:
    """How long an instructor extended ``user``'s server started at ``started``."""
    return course_overrides(course).extension_for(user, server_name, started)


def session_end_of(catalog: Catalog, user: dict, server_name: str) -> datetime | None:
    """When the service stops a student's course server (class end, grace, and any
    extension); None for a server it does not stop at the end of class."""
    server = (user.get("servers") or {}).get(server_name)
    if server is None:
        return None
    notices = class_end_notice(catalog, user, server, server_name)
    return notices[0].deadline if notices else None


def _plan_server(
    catalog: Catalog, user: dict, server_name: str, server: dict, now: datetime, already_tried: set
) -> Action | None:
    name = user["name"]
    profile = profile_of(server)
    course = catalog.courses_by_id.get(profile) if profile else None
    if course is None or user.get("admin") or catalog.teaches(course, name, _groups(user)):
        return None
    if server.get("pending") == "stop":
        return None
    started = parse_hub_time(server.get("started"))
    if started is None:
        return None
    zone = course.course_schedule.timezone
    label = server_label(name, server_name)
    session = session_of_server(course, started)
    extension = extension_of(course, name, server_name, started)
    # Remembered only by dry runs: a real reclaim makes the server go away.
    reclaim_key = ("reclaim", name, server_name, course.id, started)
    if session is None or now >= session.reclaim_at + extension:
        if reclaim_key in already_tried:
            return None
        why = _reclaim_reason(session, started, now, zone, extension)
        return Action(
            ActionKind.RECLAIM,
            name,
            server_name,
            course.id,
            f"Stopping {label} for {course.title}: {why}",
            reclaim_key,
            reason=ReclaimReason.CLASS_ENDED,
        )
    deadline = session.reclaim_at + extension
    key = ("warn", name, server_name, course.id, deadline)
    if deadline - WARN_AHEAD <= now and key not in already_tried:
        return Action(
            ActionKind.WARN,
            name,
            server_name,
            course.id,
            f"{label[0].upper()}{label[1:]} for {course.title} will be stopped at "
            f"{when(deadline, now, zone)}, in {duration(deadline - now)}.",
            key,
            reason=ReclaimReason.CLASS_ENDED,
        )
    return None


def class_start_of(catalog: Catalog, server: dict) -> datetime | None:
    """The start of the class session a course server was admitted for, if any."""
    course = catalog.courses_by_id.get(profile_of(server) or "")
    started = parse_hub_time(server.get("started"))
    if course is None or started is None:
        return None
    session = session_of_server(course, started)
    return session.start if session is not None else None


def _plan_gpu_reclaim(
    catalog: Catalog,
    user: dict,
    server_name: str,
    server: dict,
    watches: dict,
    now: datetime,
    already_tried: set,
) -> Action | None:
    """Warn about or reclaim a server for idleness, an expired grant or an unopened pre-warm."""
    name = user["name"]
    watch = watches.get(server_key(name, server_name, server))
    if watch is None:
        return None
    start = class_start_of(catalog, server)
    for notice in notices_for_server(catalog, user, server_name, server, watch, start):
        if now < warn_from(notice):
            continue
        label = server_label(name, server_name)
        title = profile_title(catalog, notice.profile)
        at = reclaim_at(notice, watch)
        why = reclaim_why(catalog, notice, start)
        if at is None:
            stop_at = max(notice.deadline, now + notice.warning)
            return Action(
                ActionKind.WARN,
                name,
                server_name,
                notice.course or notice.profile,
                f"{label[0].upper()}{label[1:]} ({title}) will be stopped at "
                f"{when(stop_at, now, catalog_zone(catalog))}, in {duration(stop_at - now)}: "
                f"{why}.",
                None,
                reason=notice.reason,
            )
        if now < at:
            return None
        key = ("reclaim", name, server_name, notice.profile, parse_hub_time(server.get("started")))
        if key in already_tried:
            return None
        return Action(
            ActionKind.RECLAIM,
            name,
            server_name,
            notice.course or notice.profile,
            f"Stopping {label} ({title}): {why}.",
            key,
            reason=notice.reason,
        )
    return None


def catalog_zone(catalog: Catalog) -> tzinfo:
    return ZoneInfo(catalog.settings.timezone)


def profile_title(catalog: Catalog, profile: str) -> str:
    """A profile's title (a course, a research allocation or a standing profile)."""
    entry = (
        catalog.courses_by_id.get(profile)
        or catalog.research_by_id.get(profile)
        or catalog.standing_by_id.get(profile)
    )
    return entry.title if entry is not None else profile


def reclaim_why(catalog: Catalog, notice: ReclaimNotice, class_start: datetime | None) -> str:
    """Why a server is warned about or reclaimed, as the end of a sentence."""
    zone = catalog_zone(catalog)
    if notice.reason is ReclaimReason.IDLE:
        idle = policy_of(catalog, notice.profile)
        span = idle.idle_after if idle is not None else None
        return f"its GPU has not been used for {duration(span) if span else 'a while'}"
    if notice.reason is ReclaimReason.GRANT_EXPIRED:
        last_day = (notice.deadline.astimezone(zone) - timedelta(days=1)).date()
        return (
            f"the research allocation {profile_title(catalog, notice.profile)} expired at "
            f"the end of {last_day:%a %d %b %Y}"
        )
    if notice.reason is ReclaimReason.CLASS_ENDED:
        return f"the class is over and its grace period ends at {when(notice.deadline, notice.deadline, zone)}"
    start = when(class_start, class_start, zone) if class_start else "the class start"
    return f"it was started for the class at {start} and nobody has opened it"


def plan_actions(
    catalog: Catalog,
    users: list[dict],
    group_members: dict[str, list[str]],
    now: datetime,
    secret: str | None,
    already_tried: set,
    watches: dict | None = None,
) -> list[Action]:
    """What to do at ``now``: reclaims first (they free GPUs), then warnings, then pre-warms.

    ``users`` are JupyterHub REST user models (``name``, ``admin``, ``servers``); for a
    course in its pre-warming period they must include every user, not only active ones.
    ``group_members`` maps the groups enrolled in those courses to usernames.
    ``already_tried`` holds the ``key`` of every action already done; pre-warms and
    warnings in it are not planned again. Without a ``secret`` nothing is pre-warmed.
    ``watches``: what the service remembers of each server (:func:`.reclaim.observe`),
    for GPU-aware reclaim (idle, expired grant, unopened pre-warm); without it only the
    end of class reclaims.
    """
    if now.tzinfo is None:
        raise ValueError("plan_actions() needs an aware datetime")
    reclaims: list[Action] = []
    warnings: list[Action] = []
    for user in users:
        for server_name, server in sorted((user.get("servers") or {}).items()):
            action = _plan_server(catalog, user, server_name, server, now, already_tried)
            if action is None and watches is not None:
                action = _plan_gpu_reclaim(
                    catalog, user, server_name, server, watches, now, already_tried
                )
            if action is None:
                continue
            (reclaims if action.kind is ActionKind.RECLAIM else warnings).append(action)
    prewarms: list[Action] = []
    if secret:
        by_name = {user["name"]: user for user in users}
        chosen: set[str] = set()
        for course in catalog.courses:
            start = prewarm_class_start(course, now)
            if start is None:
                continue
            for name in catalog.students_of(course, group_members):
                if ("prewarm", name, course.id, start) in already_tried or name in chosen:
                    continue
                if (
                    name not in by_name
                    and ("unknown-user", name, course.id, start) in already_tried
                ):
                    continue  # noted once; pre-warmed as soon as the account appears
                action = _plan_prewarm(catalog, course, start, by_name.get(name), name, now, secret)
                if action is not None:
                    chosen.add(name)  # one start per person: their default server is one server
                    prewarms.append(action)
    return reclaims + warnings + prewarms


def _plan_prewarm(
    catalog: Catalog,
    course: Course,
    start: datetime,
    user: dict | None,
    name: str,
    now: datetime,
    secret: str,
) -> Action | None:
    key = ("prewarm", name, course.id, start)
    zone = course.course_schedule.timezone
    if user is None:
        # Remembered under its own key, so the pre-warm still happens if the account
        # appears (first login) during the pre-warming period.
        return Action(
            ActionKind.UNKNOWN_USER,
            name,
            "",
            course.id,
            f"{name} is enrolled in {course.title} but has no account on the hub yet "
            "(they have never logged in); not pre-warming a server for them yet.",
            ("unknown-user", name, course.id, start),
        )
    if user.get("admin") or catalog.teaches(course, name, _groups(user)):
        return None  # their servers are never reclaimed, so never started for them
    if "" in (user.get("servers") or {}):
        return None  # running or starting already, whatever its profile
    options = {
        "profile": course.id,
        "prewarm_token": prewarm_token(secret, name, "", course.id, start),
    }
    return Action(
        ActionKind.PREWARM,
        name,
        "",
        course.id,
        f"Starting {name}'s server for {course.title} ahead of the class at "
        f"{when(start, now, zone)}.",
        key,
        options,
    )


def forget(already_tried: set, users: list[dict], now: datetime) -> None:
    """Drop what no longer needs remembering, so a long-running service does not grow.

    Pre-warms and warnings are forgotten a day after their class start or reclaim time;
    dry-run reclaims once their server (user, name, start time) is gone.
    """
    live = {
        (user["name"], name, parse_hub_time(server.get("started")))
        for user in users
        for name, server in (user.get("servers") or {}).items()
    }
    for key in list(already_tried):
        if key[0] == "reclaim":
            stale = (key[1], key[2], key[4]) not in live
        else:
            stale = key[-1] < now - MEMORY
        if stale:
            already_tried.discard(key)


def class_end_notice(
    catalog: Catalog, user: dict, server: dict, server_name: str = ""
) -> list[ReclaimNotice]:
    """The end of class of a student's course server (and any extension by its
    instructor), as a notice (never kept off)."""
    course = catalog.courses_by_id.get(profile_of(server) or "")
    started = parse_hub_time(server.get("started"))
    if course is None or started is None:
        return []
    if user.get("admin") or catalog.teaches(course, user["name"], _groups(user)):
        return []
    session = session_of_server(course, started)
    if session is None:
        return []
    return [
        ReclaimNotice(
            user["name"],
            str(server.get("name", "")),
            course.id,
            ReclaimReason.CLASS_ENDED,
            session.reclaim_at + extension_of(course, user["name"], server_name, started),
            WARN_AHEAD,
            False,
            course.id,
        )
    ]
