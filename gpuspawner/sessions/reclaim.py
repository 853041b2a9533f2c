"""GPU-aware reclaim: which running servers are due to be taken back, why, and when.

Design notes: docs/design/sessions.md, "gpuspawner.sessions.reclaim".
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from gpuspawner.core.telemetry import DeviceReading
from gpuspawner.holder_use import use_by_holder, use_of_servers
from gpuspawner.policy import Catalog
from gpuspawner.policy.capacity import Allocation, CapacityPool
from gpuspawner.policy.catalog_models import CourseReclaimPolicy, ReclaimPolicy, ResearchAllocation
from gpuspawner.policy.instructors import profile_of

from .hub_time import parse_hub_time

OPENED_SLACK = timedelta(minutes=1)
"""A pre-warmed server counts as opened when the hub saw activity this long after the
service first saw it running (the single-user server's own start reports activity too)."""


class ReclaimReason(enum.Enum):
    IDLE = "idle"
    GRANT_EXPIRED = "grant-expired"
    UNOPENED_PREWARM = "unopened-prewarm"
    CLASS_ENDED = "class-ended"

    @property
    def keepable(self) -> bool:
        """Whether "I'm still using it" can answer this reason."""
        return self in (ReclaimReason.IDLE, ReclaimReason.UNOPENED_PREWARM)


ServerKey = tuple[str, str, str]
"""(user, server name, the hub's ``started`` stamp): one start of one server."""


def server_key(user: str, server_name: str, server: Mapping) -> ServerKey:
    return (user, server_name, str(server.get("started") or ""))


def allocation_key(user: str, server_name: str) -> str:
    """The capacity pool's key of a server's allocation (``server:<user>/<name>``)."""
    return f"server:{user}/{server_name}"


@dataclass
class ServerWatch:
    """What the service remembers of one running server between rounds."""

    first_seen: datetime
    first_activity: datetime | None = None
    """The hub's ``last_activity`` when the service first saw the server ready."""
    last_busy: datetime | None = None
    """The last round its device was busy (or had no reading)."""
    warned_at: dict[ReclaimReason, datetime] = field(default_factory=dict)
    kept_at: datetime | None = None
    """When its owner answered "I'm still using it" (once per server start)."""

    def idle_since(self) -> datetime:
        moments = [self.first_seen, self.last_busy, self.kept_at]
        return max(m for m in moments if m is not None)


@dataclass(frozen=True)
class ReclaimNotice:
    """A server due to be reclaimed: why, when, and whether its owner may keep it once."""

    user: str
    server: str
    profile: str
    reason: ReclaimReason
    deadline: datetime
    """When the reason is met (the reclaim waits for the warning period besides)."""
    warning: timedelta
    can_keep: bool
    course: str | None = None


def grant_end(catalog: Catalog, grant: ResearchAllocation) -> datetime:
    """The instant a research grant ends: midnight after ``expires`` in the catalog's zone."""
    zone = ZoneInfo(catalog.settings.timezone)
    return datetime.combine(grant.expires + timedelta(days=1), time(0), tzinfo=zone)


def policy_of(catalog: Catalog, profile: str | None) -> ReclaimPolicy | None:
    if profile is None:
        return None
    for table in (catalog.courses_by_id, catalog.research_by_id, catalog.standing_by_id):
        entry = table.get(profile)
        if entry is not None:
            return entry.reclaim
    return None


def _staff(catalog: Catalog, user: Mapping) -> bool:
    """An admin, or an instructor of any course."""
    if user.get("admin"):
        return True
    groups = frozenset(str(g) for g in user.get("groups") or ())
    return any(catalog.teaches(course, user["name"], groups) for course in catalog.courses)


def notices_for_server(
    catalog: Catalog,
    user: Mapping,
    server_name: str,
    server: Mapping,
    watch: ServerWatch,
    session_start: datetime | None,
) -> list[ReclaimNotice]:
    """Every reclaim reason that applies to one server, earliest deadline first.

    ``session_start``: the start of the class a course server was admitted for (None for
    other servers, or outside any class).
    """
    name = str(user["name"])
    profile = profile_of(server)
    policy = policy_of(catalog, profile)
    if policy is None or profile is None or server.get("pending") == "stop":
        return []
    course = catalog.courses_by_id.get(profile)
    grant = catalog.research_by_id.get(profile)
    standing = catalog.standing_by_id.get(profile)
    if course is not None:
        groups = frozenset(str(g) for g in user.get("groups") or ())
        staff = bool(user.get("admin")) or catalog.teaches(course, name, groups)
    else:
        # Asked only where it matters: instructors anywhere count for research servers.
        staff = standing is None and policy.idle_after is not None and _staff(catalog, user)
    notices: list[ReclaimNotice] = []

    def notice(reason: ReclaimReason, deadline: datetime) -> None:
        can_keep = policy.keep_once and reason.keepable and watch.kept_at is None
        notices.append(
            ReclaimNotice(
                name,
                server_name,
                profile,
                reason,
                deadline,
                policy.warning,
                can_keep,
                course.id if course is not None else None,
            )
        )

    idle_applies = standing is not None or not staff
    if policy.idle_after is not None and idle_applies:
        notice(ReclaimReason.IDLE, watch.idle_since() + policy.idle_after)
    if grant is not None and grant.reclaim.after_expiry:
        notice(ReclaimReason.GRANT_EXPIRED, grant_end(catalog, grant))
    if (
        course is not None
        and not staff
        and isinstance(policy, CourseReclaimPolicy)
        and policy.unopened_after is not None
        and session_start is not None
        and isinstance(server.get("user_options"), Mapping)
        and server["user_options"].get("prewarm_token")
        and watch.kept_at is None
        and not opened(server, watch)
    ):
        notice(ReclaimReason.UNOPENED_PREWARM, session_start + policy.unopened_after)
    return sorted(notices, key=lambda n: n.deadline)


def opened(server: Mapping, watch: ServerWatch) -> bool:
    """Whether someone used the server since the service first saw it running."""
    activity = parse_hub_time(server.get("last_activity"))
    if activity is None or watch.first_activity is None:
        return False
    return activity > watch.first_activity + OPENED_SLACK


def observe(
    watches: dict[ServerKey, ServerWatch],
    users: Iterable[Mapping],
    utilisation: Mapping[str, float],
    catalog: Catalog,
    now: datetime,
    session_start: Callable[[Mapping], datetime | None],
) -> None:
    """Update what the service remembers from this round's hub models and GPU readings.

    ``utilisation``: the highest utilisation (percent) of the devices each server's
    allocation holds, by allocation key (:func:`utilisation_by_server`); a server missing
    from it counts as busy. ``session_start``: the class start of a course server (see
    :func:`notices_for_server`). Servers that are gone are forgotten; a warning whose
    reason went away (the GPU is busy again) is withdrawn, so the next one is new.
    """
    live: set[ServerKey] = set()
    for user in users:
        for server_name, server in (user.get("servers") or {}).items():
            key = server_key(user["name"], server_name, server)
            live.add(key)
            watch = watches.get(key)
            if watch is None:
                watch = watches[key] = ServerWatch(first_seen=now)
            if watch.first_activity is None and server.get("ready"):
                watch.first_activity = parse_hub_time(server.get("last_activity")) or now
            policy = policy_of(catalog, profile_of(server))
            threshold = policy.idle_below if policy is not None else 0
            level = utilisation.get(allocation_key(user["name"], server_name))
            if level is None or level > threshold:
                watch.last_busy = now
            if watch.warned_at:
                due = {
                    n.reason
                    for n in notices_for_server(
                        catalog, user, server_name, server, watch, session_start(server)
                    )
                    if now >= warn_from(n)
                }
                for reason in set(watch.warned_at) - due:
                    del watch.warned_at[reason]
    for key in list(watches):
        if key not in live:
            del watches[key]


def utilisation_by_server(
    readings: Sequence[DeviceReading], allocations: CapacityPool | Iterable[Allocation]
) -> dict[str, float]:
    """Each server's utilisation of its share, by allocation key: its own where the
    readings' processes are attributed to holders, its device's otherwise
    (:func:`gpuspawner.holder_use.use_by_holder`).

    ``allocations``: on one machine the allocation ledger's (:func:`ledger_allocations`),
    with readings attributed to the ledger's holders
    (:func:`gpuspawner.process_owners.ledger_telemetry`); on Kubernetes the readings'
    per-pod series name their holders (:mod:`gpuspawner.prometheus_telemetry`).
    """
    return use_of_servers(use_by_holder(readings, allocations))


def ledger_allocations(path: str) -> list[Allocation]:
    """The live allocations of the one-machine allocation ledger (``c.GPUAdmission
    .allocation_ledger``), read under its shared lock."""
    from gpuspawner.core.ledger import AllocationLedger

    return list(AllocationLedger(path).snapshot([]).allocations.values())


def reclaim_at(notice: ReclaimNotice, watch: ServerWatch) -> datetime | None:
    """When a warned server may be reclaimed: its deadline, but a full warning period
    after the warning at the earliest; None before it was warned."""
    warned = watch.warned_at.get(notice.reason)
    if warned is None:
        return None
    return max(notice.deadline, warned + notice.warning)


def warn_from(notice: ReclaimNotice) -> datetime:
    """When the owner is first warned."""
    return notice.deadline - notice.warning
