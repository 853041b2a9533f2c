"""The course-sessions service: pre-warm servers before class, warn and reclaim them after.

Each tick decides, from the catalog and the hub's user models alone, what to do
(:func:`plan_actions`, pure), then does it through the hub's REST API (:func:`run_once`).

Which class session a course server belongs to is read from the server's ``started``
time: the session whose start period (lead time, or pre-warming) it was started in. It
is reclaimed at that session's end plus grace, which is the ``session_end`` the spawner
admitted it with, even when a later session of the same course is already open.
Instructors' and admins' servers have no session end and are never reclaimed.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo

from gpuspawner.policy import Catalog, ClassSession, Course
from gpuspawner.policy.instructors import profile_of
from gpuspawner.policy.prewarm import prewarm_token
from gpuspawner.policy.schedule import UTC
from gpuspawner.policy.wording import duration, when

from .audit import AuditLog
from .hub_client import HubClient, HubUnavailable
from .watched_catalog import WatchedCatalog

log = logging.getLogger("gpuspawner.sessions")

WARN_AHEAD = timedelta(minutes=10)
"""How long before a server is reclaimed the warning is recorded."""

START_SLACK = timedelta(minutes=1)
"""The hub stamps ``started`` just before the spawner admits the start; a start admitted at
the opening instant may carry a stamp a moment earlier."""

CONCURRENT_REQUESTS = 10
"""Starts and stops in flight at once: a start can take the hub's slow_spawn_timeout (10 s)
to answer, and a class of 40 must be pre-warmed well within the pre-warming period."""

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


def parse_hub_time(value: object) -> datetime | None:
    """A JupyterHub timestamp (``2025-03-03T09:55:00.123456Z``) as an aware datetime."""
    if not isinstance(value, str) or not value:
        return None
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"  # fromisoformat reads "Z" only from Python 3.11
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _groups(user: dict) -> frozenset[str]:
    return frozenset(str(g) for g in user.get("groups") or ())


def _server_label(user: str, server: str) -> str:
    return f"{user}'s server" if not server else f"{user}'s server {server!r}"


def _reclaim_reason(
    session: ClassSession | None, started: datetime, now: datetime, zone: tzinfo
) -> str:
    """Why a course server is stopped: started outside class, or its class and grace are over."""
    if session is None:
        return f"it was started at {when(started, now, zone)}, outside any class of the course."
    return (
        f"the class of {when(session.start, now, zone)} ended at {when(session.end, now, zone)} "
        f"and its grace period at {when(session.reclaim_at, now, zone)}."
    )


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
    label = _server_label(name, server_name)
    session = session_of_server(course, started)
    # Remembered only by dry runs: a real reclaim makes the server go away.
    reclaim_key = ("reclaim", name, server_name, course.id, started)
    if session is None or now >= session.reclaim_at:
        if reclaim_key in already_tried:
            return None
        return Action(
            ActionKind.RECLAIM,
            name,
            server_name,
            course.id,
            f"Stopping {label} for {course.title}: {_reclaim_reason(session, started, now, zone)}",
            reclaim_key,
        )
    deadline = session.reclaim_at
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
        )
    return None


def plan_actions(
    catalog: Catalog,
    users: list[dict],
    group_members: dict[str, list[str]],
    now: datetime,
    secret: str | None,
    already_tried: set,
) -> list[Action]:
    """What to do at ``now``: reclaims first (they free GPUs), then warnings, then pre-warms.

    ``users`` are JupyterHub REST user models (``name``, ``admin``, ``servers``); for a
    course in its pre-warming period they must include every user, not only active ones.
    ``group_members`` maps the groups enrolled in those courses to usernames.
    ``already_tried`` holds the ``key`` of every action already done; pre-warms and
    warnings in it are not planned again. Without a ``secret`` nothing is pre-warmed.
    """
    if now.tzinfo is None:
        raise ValueError("plan_actions() needs an aware datetime")
    reclaims: list[Action] = []
    warnings: list[Action] = []
    for user in users:
        for server_name, server in sorted((user.get("servers") or {}).items()):
            action = _plan_server(catalog, user, server_name, server, now, already_tried)
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


async def run_once(
    client: HubClient,
    catalog: Catalog,
    *,
    now: datetime,
    secret: str | None,
    already_tried: set,
    audit: AuditLog,
    dry_run: bool = False,
) -> list[dict]:
    """One tick: read the hub, plan, act; returns the audit entries it wrote."""
    prewarming = [c for c in catalog.courses if secret and prewarm_class_start(c, now)]
    if prewarming:
        # Pre-warming needs to know who has no server at all, and who exists.
        users = await client.list_users()
        groups = sorted({g for course in prewarming for g in catalog.student_groups(course)})
        group_members = await client.group_members(groups)
    else:
        users = await client.list_users(state="active")
        group_members = {}
    plan = plan_actions(catalog, users, group_members, now, secret, already_tried)
    limit = asyncio.Semaphore(CONCURRENT_REQUESTS)
    unreachable: list[HubUnavailable] = []

    async def attempt(action: Action) -> dict | None:
        async with limit:
            if unreachable:
                return None  # the hub is down; the next tick plans afresh
            try:
                return await _execute(client, action, now, audit, dry_run, already_tried)
            except HubUnavailable as error:
                unreachable.append(error)
                return audit.record(
                    now,
                    "hub-unavailable",
                    user=action.user,
                    server=action.server,
                    course=action.course,
                    detail=f"{action.detail} Not done: {error}.",
                )

    entries: list[dict] = []
    # Stops first, so the GPUs they free are there for the starts.
    stops = [a for a in plan if a.kind in (ActionKind.RECLAIM, ActionKind.WARN)]
    starts = [a for a in plan if a.kind in (ActionKind.PREWARM, ActionKind.UNKNOWN_USER)]
    for batch in (stops, starts):
        done = await asyncio.gather(*(attempt(action) for action in batch))
        entries.extend(entry for entry in done if entry is not None)
    forget(already_tried, users, now)
    return entries


async def _execute(
    client: HubClient,
    action: Action,
    now: datetime,
    audit: AuditLog,
    dry_run: bool,
    already_tried: set,
) -> dict:
    def record(name: str, detail: str, remember: bool = True) -> dict:
        if remember and action.key is not None:
            already_tried.add(action.key)
        return audit.record(
            now,
            name,
            user=action.user,
            server=action.server,
            course=action.course,
            detail=detail,
            dry_run=dry_run,
        )

    if action.kind is ActionKind.WARN:
        return record("warn", action.detail)
    if action.kind is ActionKind.UNKNOWN_USER:
        return record("prewarm-skipped", action.detail)
    if action.kind is ActionKind.PREWARM:
        if dry_run:
            return record("prewarm-start", action.detail)
        reply = await client.start_server(action.user, action.server, action.options or {})
        if reply.ok:
            state = "started" if reply.status == 201 else "starting"
            return record(
                "prewarm-start", f"{action.detail} The hub answered {reply.status} ({state})."
            )
        if reply.status == 429:
            # The hub is throttling starts (concurrent_spawn_limit): try again next tick.
            return record(
                "prewarm-deferred",
                f"{action.detail} The hub is busy (429: {reply.message}); will retry.",
                remember=False,
            )
        if reply.status == 404:
            return record("prewarm-skipped", f"{action.detail} The hub has no such user.")
        # A refusal (spawner 4xx such as "all GPUs are in use") or a failed start (5xx):
        # not retried this session, so a failing start never counts twice against the hub.
        return record(
            "prewarm-refused",
            f"{action.detail} The hub refused ({reply.status}): {reply.message or 'no message'}",
        )
    if dry_run:
        return record("reclaim", action.detail)
    reply = await client.stop_server(action.user, action.server)
    if reply.ok or reply.status == 404:
        state = {202: "stopping", 204: "stopped", 404: "already gone"}.get(reply.status, "done")
        return record(
            "reclaim", f"{action.detail} The hub answered {reply.status} ({state}).", remember=False
        )
    return record(
        "reclaim-failed",
        f"{action.detail} The hub answered {reply.status}: "
        f"{reply.message or 'no message'}; will retry.",
        remember=False,
    )


class SessionsService:
    """The background loop: one :func:`run_once` every ``interval`` seconds until stopped."""

    def __init__(
        self,
        client: HubClient,
        catalog: WatchedCatalog,
        audit: AuditLog,
        *,
        interval: float = 30.0,
        secret: str | None = None,
        dry_run: bool = False,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self.client = client
        self.catalog = catalog
        self.audit = audit
        self.interval = interval
        self.secret = secret
        self.dry_run = dry_run
        self.clock = clock
        self.already_tried: set = set()

    async def tick(self) -> list[dict]:
        now = self.clock()
        catalog = self.catalog.current(now)
        if catalog is None:
            return []
        return await run_once(
            self.client,
            catalog,
            now=now,
            secret=self.secret,
            already_tried=self.already_tried,
            audit=self.audit,
            dry_run=self.dry_run,
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Tick until ``stop`` is set, which also cuts a round short.

        A failed round is logged and the next one tries again. A start cut short goes on in
        the hub; only the service's record of it is lost.
        """
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                current = asyncio.ensure_future(self._round())
                await asyncio.wait({current, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not current.done():
                    current.cancel()
                    await asyncio.wait({current})
                    return
                # asyncio.wait, not wait_for: no TimeoutError, whose class differs on 3.10.
                await asyncio.wait({stopping}, timeout=self.interval)
        finally:
            stopping.cancel()

    async def _round(self) -> None:
        try:
            await self.tick()
        except HubUnavailable as error:
            log.warning("Skipping this round: %s", error)
        except Exception:
            log.exception("Unexpected error in a sessions round; continuing")


def courses_with_prewarm(catalog: Catalog) -> Iterable[Course]:
    """Courses that ask for pre-warming (the service needs a secret for them)."""
    return (c for c in catalog.courses if c.course_schedule.prewarm)
