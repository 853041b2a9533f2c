"""The course-sessions service: each round reads the catalog and the hub's users, plans what
to do (:mod:`.plan`, pure), then pre-warms, warns and reclaims through the hub's REST API
(:func:`run_once`). Design notes: docs/design/sessions.md, "gpuspawner.sessions.plan"."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.exc import SQLAlchemyError

from gpuspawner.accounting.store import UsageStore
from gpuspawner.core.telemetry import DeviceTelemetry
from gpuspawner.holder_use import HolderUse, use_by_holder, use_of_servers
from gpuspawner.policy import Catalog, Course
from gpuspawner.policy.capacity import Allocation
from gpuspawner.policy.instructors import InstructorRefusal
from gpuspawner.policy.schedule import UTC
from gpuspawner.policy.wording import when

from .audit import AuditLog
from .hub_client import HubClient, HubUnavailable
from .plan import (
    WARN_AHEAD,
    Action,
    ActionKind,
    catalog_zone,
    class_end_notice,
    class_start_of,
    forget,
    plan_actions,
    prewarm_class_start,
    reclaim_why,
    server_label,
)
from .reclaim import (
    ReclaimReason,
    ServerKey,
    ServerWatch,
    notices_for_server,
    observe,
    reclaim_at,
    server_key,
)
from .watched_catalog import WatchedCatalog
from .zone_wipe import ExperimentalZoneWiper, ZoneWarning

log = logging.getLogger("gpuspawner.sessions")


CONCURRENT_REQUESTS = 10
"""Starts and stops in flight at once: a start can take the hub's slow_spawn_timeout (10 s)
to answer, and a class of 40 must be pre-warmed well within the pre-warming period."""


async def run_once(
    client: HubClient,
    catalog: Catalog,
    *,
    now: datetime,
    secret: str | None,
    already_tried: set,
    audit: AuditLog,
    dry_run: bool = False,
    watches: dict | None = None,
    utilisation: Mapping[str, float] | None = None,
) -> list[dict]:
    """One tick: read the hub, plan, act; returns the audit entries it wrote.

    With ``watches`` (kept by the caller between rounds) it also reclaims for idleness,
    expired grants and unopened pre-warms; ``utilisation`` is this round's GPU
    utilisation by allocation key (:func:`.reclaim.utilisation_by_server`).
    """
    prewarming = [c for c in catalog.courses if secret and prewarm_class_start(c, now)]
    if prewarming:
        # Pre-warming needs to know who has no server at all, and who exists.
        users = await client.list_users()
        groups = sorted({g for course in prewarming for g in catalog.student_groups(course)})
        group_members = await client.group_members(groups)
    else:
        users = await client.list_users(state="active")
        group_members = {}
    if watches is not None:
        observe(
            watches,
            users,
            utilisation or {},
            catalog,
            now,
            lambda server: class_start_of(catalog, server),
        )
    plan = plan_actions(catalog, users, group_members, now, secret, already_tried, watches)
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
    if watches is not None:
        for action in stops:
            # A warning counts from the round it was recorded (in a dry run too).
            if action.kind is ActionKind.WARN and action.reason is not ReclaimReason.CLASS_ENDED:
                watch = watches.get(_key_of(users, action))
                if watch is not None and action.reason is not None:
                    watch.warned_at.setdefault(action.reason, now)
    forget(already_tried, users, now)
    return entries


def _key_of(users: list[dict], action: Action) -> tuple:
    for user in users:
        if user["name"] == action.user:
            server = (user.get("servers") or {}).get(action.server) or {}
            return server_key(action.user, action.server, server)
    return (action.user, action.server, "")


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
            reason=action.reason.value if action.reason is not None else None,
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
        telemetry: DeviceTelemetry | None = None,
        allocations: Callable[[], Iterable[Allocation]] | None = None,
        zone_wiper: ExperimentalZoneWiper | None = None,
        usage: UsageStore | None = None,
    ):
        self.client = client
        self.catalog = catalog
        self.audit = audit
        self.interval = interval
        self.secret = secret
        self.dry_run = dry_run
        self.clock = clock
        self.already_tried: set = set()
        self.telemetry = telemetry
        """GPU readings (NVML, or a simulated file); None: nothing is reclaimed as idle."""
        self.allocations = allocations
        """Who holds which device: the allocation ledger on one machine, the pods'
        allocation annotations on Kubernetes."""
        self.watches: dict[ServerKey, ServerWatch] = {}
        self._utilisation_error: str | None = None
        self.zone_wiper = zone_wiper
        """Warns about and wipes the experimental zone's folder (None: not on this service)."""
        self.usage = usage
        """The GPU-hour usage record, where each round's GPU use per holder is added to the
        intervals (None: not recorded)."""
        self._use_read_at: datetime | None = None

    def utilisation(self) -> dict[str, float]:
        """This round's GPU utilisation by allocation key (empty without telemetry)."""
        if self.telemetry is None or self.allocations is None:
            return {}
        try:
            readings = self.telemetry.read()
            if not readings:
                return {}
            uses = use_by_holder(readings, list(self.allocations()))
            self._record_use(uses.values())
            return use_of_servers(uses)
        except (OSError, RuntimeError, ValueError) as error:
            # An unreadable ledger must not stop pre-warming and class-end reclaim: with
            # no utilisation every server counts as busy, so none is reclaimed as idle.
            if str(error) != self._utilisation_error:
                self._utilisation_error = str(error)
                log.error(
                    "Cannot tell which GPU each server holds or how busy it is (%s); no "
                    "server is reclaimed for idleness until this is fixed. Give the service "
                    "read access to the allocation ledger and its lock file.",
                    error,
                )
            return {}

    def _record_use(self, uses: Iterable[HolderUse]) -> None:
        """Add this round's use of each holder to its usage interval, as standing for the
        time since the previous round (at most two rounds: a gap while the service was
        down is not counted)."""
        now = self.clock()
        previous, self._use_read_at = self._use_read_at, now
        if self.usage is None or previous is None:
            return
        seconds = min((now - previous).total_seconds(), 2 * self.interval)
        try:
            self.usage.record_use(uses, seconds)
        except SQLAlchemyError:  # the record's trouble must not stop reclaiming
            log.exception("Could not add this round's GPU use to the usage record")

    def warnings_for(self, catalog: Catalog, user: dict) -> list[ReclaimWarning]:
        """The warnings the owner of ``user``'s servers sees now (the API and the lab)."""
        return user_warnings(catalog, user, self.watches, self.clock())

    def zone_warnings_for(self, name: str) -> list[ZoneWarning]:
        """The experimental zone's coming wipe, if ``name`` holds data there and was
        warned (the hub's home page shows it)."""
        if self.zone_wiper is None:
            return []
        warning = self.zone_wiper.warnings.get(name)
        return [warning] if warning is not None and self.clock() < warning.wipe_at else []

    def keep(self, catalog: Catalog, user: dict, server_name: str) -> ReclaimWarning:
        """The owner's "I'm still using it": postpone the reclaim of one server once.

        Raises :class:`KeepRefused` when there is nothing to keep or keeping is not allowed.
        """
        now = self.clock()
        server = (user.get("servers") or {}).get(server_name)
        label = "your server" if not server_name else f"your server {server_name!r}"
        if server is None:
            raise KeepRefused(404, f"You have no running server named {server_name!r}.")
        warning = next(
            (w for w in user_warnings(catalog, user, self.watches, now) if w.server == server_name),
            None,
        )
        if warning is None:
            raise KeepRefused(409, f"Nobody is about to stop {label}; there is nothing to keep.")
        if not warning.can_keep:
            raise KeepRefused(
                403, f"{label[0].upper()}{label[1:]} cannot be kept: {warning.message}"
            )
        watch = self.watches[server_key(user["name"], server_name, server)]
        watch.kept_at = now
        watch.warned_at.clear()
        self.audit.record(
            now,
            "keep",
            user=user["name"],
            server=server_name,
            course=warning.course or warning.profile,
            detail=f"{user['name']} kept {server_label(user['name'], server_name)} running "
            f"({warning.reason.value}): 'I'm still using it', once for this server start.",
            reason=warning.reason.value,
        )
        return warning

    async def tick(self) -> list[dict]:
        now = self.clock()
        catalog = self.catalog.current(now)
        if catalog is None:
            return []
        wiped = self._zone_round(catalog, now)
        return wiped + await run_once(
            self.client,
            catalog,
            now=now,
            secret=self.secret,
            already_tried=self.already_tried,
            audit=self.audit,
            dry_run=self.dry_run,
            watches=self.watches,
            utilisation=self.utilisation(),
        )

    def _zone_round(self, catalog: Catalog, now: datetime) -> list[dict]:
        """The experimental zone's warning or wipe, if one is due (never in a dry run)."""
        if self.zone_wiper is None or self.dry_run:
            return []
        try:
            return self.zone_wiper.round(catalog, now)
        except OSError:
            log.exception("The experimental zone's round failed; the next round tries again")
            return []

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


class KeepRefused(InstructorRefusal):
    """A "keep my server" refused: an HTTP status and a sentence for the owner, which the
    course API answers as any of its refusals (reason ``cannot-keep``)."""

    def __init__(self, status: int, message: str):
        super().__init__(status, message, "cannot-keep")


@dataclass(frozen=True)
class ReclaimWarning:
    """What the owner of a server about to be reclaimed is told (lab, hub home page)."""

    server: str
    profile: str
    course: str | None
    reason: ReclaimReason
    stop_at: datetime
    can_keep: bool
    message: str

    def to_json(self, now: datetime) -> dict:
        return {
            "server": self.server,
            "profile": self.profile,
            "reason": self.reason.value,
            "stop_at": self.stop_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "seconds_left": max(0, int((self.stop_at - now).total_seconds())),
            "can_keep": self.can_keep,
            "message": self.message,
        }


def user_warnings(
    catalog: Catalog, user: dict, watches: dict, now: datetime
) -> list[ReclaimWarning]:
    """The reclaim warnings of one user's servers at ``now`` (pure, given ``watches``).

    A server counts once the service has warned about it (a warning period runs from
    then); the end of class counts from ``WARN_AHEAD`` before the reclaim.
    """
    found: list[ReclaimWarning] = []
    name = user["name"]
    for server_name, server in sorted((user.get("servers") or {}).items()):
        if server.get("pending") == "stop":
            continue
        label = "Your server" if not server_name else f"Your server {server_name!r}"
        ending = class_end_notice(catalog, user, server, server_name)
        watch = watches.get(server_key(name, server_name, server))
        notices = list(ending)
        start = class_start_of(catalog, server)
        if watch is not None:
            notices += notices_for_server(catalog, user, server_name, server, watch, start)
        for notice in sorted(notices, key=lambda n: n.deadline):
            if notice.reason is ReclaimReason.CLASS_ENDED:
                if now < notice.deadline - WARN_AHEAD:
                    continue
                stop_at = notice.deadline
            else:
                at = reclaim_at(notice, watch) if watch is not None else None
                if at is None:
                    continue  # not warned yet (the next round warns, and counts from then)
                stop_at = at
            # Short: JupyterLab's notifications show about 140 characters.
            message = (
                f"{label} will be stopped at {when(stop_at, now, catalog_zone(catalog))}: "
                f"{reclaim_why(catalog, notice, start)}. Save your work."
            )
            found.append(
                ReclaimWarning(
                    server_name,
                    notice.profile,
                    notice.course,
                    notice.reason,
                    stop_at,
                    notice.can_keep,
                    message,
                )
            )
            break
    return found


def courses_with_prewarm(catalog: Catalog) -> Iterable[Course]:
    """Courses that ask for pre-warming (the service needs a secret for them)."""
    return (c for c in catalog.courses if c.course_schedule.prewarm)
