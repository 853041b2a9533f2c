"""Admission: may this user start this profile now, and where does its GPU share go?

The one decision both spawners and the job service make before anything starts:
entitlement (is the profile offered now), quotas (per user, per course or
allocation), then capacity (which slice of which GPU). A refusal is a
:class:`Refusal` whose message a student can act on.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from .capacity import Allocation, CapacityPool, Refusal, Reservation
from .catalog import Catalog
from .catalog_models import JobFlavor, SoftwareEnvironment
from .entitlements import Entitlement, Role, UserIdentity, entitlement_for
from .environments import choose_environment, devices_that_cannot_run, requirement_refusal
from .flavors import flavor_for
from .wording import when

OWN_LIMIT_CODES = frozenset({"job-limit", "user-limit"})
"""Refusals that wait on the asker's own running jobs or servers: theirs to end. A queued
job refused with one of these waits without holding back other people's jobs."""

WAIT_CODES = (
    frozenset({"full", "reserved", "course-full", "duplicate", "bad-catalog"}) | OWN_LIMIT_CODES
)
"""Refusals that pass with time (a job or server ends, a class ends, the admins fix the
catalog): a job refused with one of these waits in the queue. Any other refusal means it
can never start as asked."""


@dataclass(frozen=True)
class StartDecision:
    """A granted start: the entitlement it rests on and the GPU share it holds (if any)."""

    entitlement: Entitlement
    allocation: Allocation | None
    prewarmed: bool = False
    environment: SoftwareEnvironment | None = None
    """The environment chosen among those the profile offers (None: it offers none)."""

    @property
    def session_end(self) -> datetime | None:
        """When the server is reclaimed (None: never)."""
        if self.allocation is not None:
            return self.allocation.session_end
        return self.entitlement.session_end


def active_reservations(catalog: Catalog, now: datetime) -> tuple[Reservation, ...]:
    """Reserved seats of courses whose window (lead time included) is open at ``now``."""
    result = []
    for course in catalog.reserving_courses:
        share = course.share
        if share is None:
            continue
        status = course.course_schedule.status(now)
        if status.phase.accepts_new_servers and status.session is not None:
            zone = course.course_schedule.timezone
            result.append(
                Reservation(
                    course.id,
                    course.title,
                    course.reserved_seats,
                    share,
                    status.session.end,
                    until_text=when(status.session.end, now, zone),
                )
            )
    return tuple(result)


def prewarm_applies(entitlement: Entitlement, now: datetime) -> bool:
    """True when ``now`` is inside the pre-warming period before the course's next class."""
    course = entitlement.profile.course
    if course is None or course.course_schedule.prewarm is None:
        return False
    start = entitlement.class_start
    if start is None:
        return False
    return start - course.course_schedule.prewarm <= now < start


def admit(
    catalog: Catalog,
    pool: CapacityPool,
    user: UserIdentity,
    profile_id: object,
    *,
    key: str,
    now: datetime,
    prewarm: bool = False,
    environment: object = None,
) -> StartDecision:
    """Decide a start and record its allocation in ``pool``; raises :class:`Refusal`.

    ``prewarm`` is honoured only for a course with pre-warming configured, inside
    its pre-warming period; callers must establish that the sessions service,
    not the student, asked for it. ``environment``: the id of the environment asked
    for, checked against those the profile offers now (None: its first).
    """
    entitlement = entitlement_for(catalog, user, profile_id, now)
    if entitlement is None:
        raise Refusal(
            "not-entitled",
            f"The profile {str(profile_id)[:80]!r} is not offered to you. "
            "Choose one of the profiles on the start page.",
            status=403,
        )
    profile = entitlement.profile
    prewarmed = False
    session_end = entitlement.session_end
    if not entitlement.available:
        if prewarm and prewarm_applies(entitlement, now):
            prewarmed = True
            course = profile.course
            assert course is not None and entitlement.class_end is not None
            session_end = entitlement.class_end + course.course_schedule.grace
        else:
            raise Refusal(
                "closed",
                f"{profile.title} cannot be started now. {entitlement.status}.",
                status=403,
            )
    chosen = choose_environment(profile, environment)
    share = profile.share
    if share is None:
        pool.release(key)
        return StartDecision(entitlement, None, prewarmed, chosen)
    pool.release(key)  # a stale record of this same server, from a failed start
    limit = catalog.settings.max_gpu_servers_per_user
    mine = [a for a in pool.held_by(user.name) if a.key.startswith("server:")]
    if entitlement.role is not Role.ADMIN and key.startswith("server:") and len(mine) >= limit:
        names = ", ".join(sorted(a.profile_id for a in mine))
        raise Refusal(
            "user-limit",
            f"You already have {len(mine)} GPU server{'s' if len(mine) != 1 else ''} running "
            f"({names}); each person may run {limit} at a time. Stop one from the Home page "
            "before starting another.",
        )
    seats = profile.max_gpu_servers
    if seats is not None and pool.count(profile_id=profile.id) >= seats:
        raise Refusal(
            "course-full",
            f"All {seats} GPU seats of {profile.title} are taken. Try again when a classmate "
            "stops their server, or start a profile without a GPU.",
        )
    avoid: frozenset[str] = frozenset()
    if chosen is not None and chosen.requires is not None:
        # Only GPUs whose driver can run the chosen environment, where that is known.
        matching = [d for d in pool.devices if d.matches_model(share.models)]
        refusal = requirement_refusal(chosen, profile.title, matching, given=False)
        if refusal is not None:
            raise refusal
        avoid = devices_that_cannot_run(chosen, matching)
    allocation = pool.allocate(
        key,
        owner=user.name,
        profile_id=profile.id,
        course_id=profile.course_id,
        share=share,
        reservations=active_reservations(catalog, now),
        session_end=session_end if entitlement.role is Role.STUDENT else None,
        avoid=avoid,
    )
    if chosen is not None:
        held = {d.id: d for d in pool.devices}
        devices = [held[i] for i in allocation.device_ids if i in held]
        refusal = requirement_refusal(chosen, profile.title, devices)
        if refusal is not None:
            pool.release(key)
            raise refusal
    return StartDecision(entitlement, allocation, prewarmed, chosen)


def seats_left(
    catalog: Catalog,
    pool: CapacityPool,
    entitlement: Entitlement,
    now: datetime,
    reservations: tuple[Reservation, ...] | None = None,
) -> int | None:
    """How many more servers of this profile can start now (None: no GPU, no limit)."""
    profile = entitlement.profile
    if profile.share is None:
        return None
    if reservations is None:
        reservations = active_reservations(catalog, now)
    fit = pool.how_many_fit(profile.share, reservations, course_id=profile.course_id)
    if profile.max_gpu_servers is not None:
        fit = min(fit, max(profile.max_gpu_servers - pool.count(profile_id=profile.id), 0))
    return fit


@dataclass(frozen=True)
class JobDecision:
    """A granted job start: its flavor and the GPU share it holds (if any)."""

    flavor: JobFlavor
    allocation: Allocation | None


def admit_job(
    catalog: Catalog,
    pool: CapacityPool,
    user: UserIdentity,
    flavor_id: object,
    *,
    key: str,
    now: datetime,
    running_jobs: Collection[str],
) -> JobDecision:
    """Decide whether a job may start now and record its GPU allocation; raises :class:`Refusal`.

    ``running_jobs`` holds the flavor ids of the jobs ``user`` runs now (one entry per
    job, CPU flavors included: those hold nothing in the pool, so the caller counts them).
    Jobs respect the same capacity, and the seats that open classes reserve, as servers
    do. A refusal whose code is in :data:`WAIT_CODES` means "wait in the queue" (the
    ``job-limit`` one, in :data:`OWN_LIMIT_CODES`, waits on the user's own jobs only);
    ``not-entitled``/``no-such-gpu``/``too-large`` mean it can never start.
    """
    flavor = _startable_flavor(catalog, user, flavor_id, now, running_jobs)
    share = flavor.share
    if share is None:
        return JobDecision(flavor, None)
    pool.release(key)
    reservations = active_reservations(catalog, now)
    try:
        allocation = pool.allocate(
            key,
            owner=user.name,
            profile_id=flavor.id,
            course_id=None,
            share=share,
            reservations=reservations,
            queued=True,
            nodes=flavor.nodes,
        )
    except Refusal as refusal:
        raise _behind_own_server(catalog, pool, user, flavor, reservations) or refusal from None
    return JobDecision(flavor, allocation)


@dataclass(frozen=True)
class JobForecast:
    """Whether a job of a flavor would start now, for the Run as Job dialog (nothing booked)."""

    starts_now: bool
    message: str
    """A sentence: "Starts now on a free GPU." or why it would wait in the queue."""


def forecast_job(
    catalog: Catalog,
    pool: CapacityPool,
    user: UserIdentity,
    flavor_id: object,
    *,
    now: datetime,
    running_jobs: Collection[str],
    queued: int = 0,
) -> JobForecast:
    """What :func:`admit_job` would answer now, changing nothing; raises :class:`Refusal`
    for a job that could never start (unknown flavor, not entitled). ``queued``: the jobs
    already waiting on this flavor, which a new one would not overtake."""
    try:
        flavor = _startable_flavor(catalog, user, flavor_id, now, running_jobs)
    except Refusal as refusal:
        if refusal.code in WAIT_CODES:
            return JobForecast(False, refusal.message)
        raise
    if queued:
        jobs = "job is" if queued == 1 else "jobs are"
        return JobForecast(
            False,
            f"{queued} {jobs} queued on this flavor before it; it starts by itself when its "
            "turn comes.",
        )
    share = flavor.share
    if share is None:
        return JobForecast(True, "Starts now: it needs no GPU.")
    reservations = active_reservations(catalog, now)
    if pool.fits(share, reservations):
        return JobForecast(True, "Starts now on a free GPU.")
    waiting = _behind_own_server(catalog, pool, user, flavor, reservations)
    if waiting is None:
        waiting = pool.explain_full(share, reservations, queued=True)
    return JobForecast(False, waiting.message)


def _startable_flavor(
    catalog: Catalog,
    user: UserIdentity,
    flavor_id: object,
    now: datetime,
    running_jobs: Collection[str],
) -> JobFlavor:
    """The flavor, if ``user`` may run a job of it and has not reached its per-person limit."""
    entitlement = flavor_for(catalog, user, flavor_id, now)
    if entitlement is None or not entitlement.available:
        reason = entitlement.reason if entitlement else "There is no such job flavor."
        raise Refusal(
            "not-entitled", f"You cannot run jobs on {str(flavor_id)[:80]!r}: {reason}", status=403
        )
    flavor = entitlement.flavor
    running = sum(1 for running_flavor in running_jobs if running_flavor == flavor.id)
    if running >= flavor.max_running_per_user:
        jobs = "job" if running == 1 else "jobs"
        raise Refusal(
            "job-limit",
            f"You already have {running} {jobs} running on {flavor.title}; each person may "
            f"run {flavor.max_running_per_user} at a time there. This job waits in the queue "
            "and starts when one of yours ends.",
        )
    return flavor


def _behind_own_server(
    catalog: Catalog,
    pool: CapacityPool,
    user: UserIdentity,
    flavor: JobFlavor,
    reservations: tuple[Reservation, ...],
) -> Refusal | None:
    """The wait of a job that would fit if its owner's own servers stopped: say so, and how
    to start it now (a researcher's development server often holds the only GPU)."""
    if flavor.share is None:
        return None
    servers = [a for a in pool.held_by(user.name) if a.key.startswith("server:")]
    if not servers or not pool.fits(flavor.share, reservations, without=[a.key for a in servers]):
        return None
    titles = sorted({_profile_title(catalog, a.profile_id) for a in servers})
    server = "server" if len(servers) == 1 else "servers"
    return Refusal(
        "full",
        f"Your own {server} ({', '.join(titles)}) holds the GPU this job needs, so the job "
        f"waits in the queue and starts by itself when your {server} stops. To start it now, "
        f"stop your {server} from the hub's home page (File > Hub Control Panel).",
    )


def _profile_title(catalog: Catalog, profile_id: str) -> str:
    for section in (catalog.courses_by_id, catalog.research_by_id, catalog.standing_by_id):
        if profile_id in section:
            return section[profile_id].title
    return profile_id


def job_start_order(
    queued: Sequence[tuple[str, str]],
    running: Mapping[str, int],
    last_started: Mapping[str, float] | None = None,
) -> list[str]:
    """The order in which queued jobs get free slots: fair shares among their owners.

    ``queued`` holds ``(job_id, owner)`` pairs, oldest first; ``running`` the number of
    jobs each owner runs now; ``last_started`` when each owner's last job started (any
    clock that grows; an owner missing from it has not been served). The next slot goes
    to the owner with the fewest jobs (running, plus those placed ahead in this order);
    among equals, to the one served longest ago; then to the one whose oldest queued job
    is oldest. Each owner's own jobs keep their first-in, first-out order. So a student
    with ten queued jobs takes every other slot at most, and a newcomer's job goes first.
    """
    by_owner: dict[str, deque[tuple[int, str]]] = {}
    for index, (job_id, owner) in enumerate(queued):
        by_owner.setdefault(owner, deque()).append((index, job_id))
    load = {owner: running.get(owner, 0) for owner in by_owner}
    last = last_started or {}
    served = sorted((owner for owner in by_owner if owner in last), key=lambda name: last[name])
    turn = {owner: rank for rank, owner in enumerate(served, start=1)}  # 0: never served
    order: list[str] = []
    while by_owner:
        owner = min(
            by_owner, key=lambda name: (load[name], turn.get(name, 0), by_owner[name][0][0])
        )
        jobs = by_owner[owner]
        order.append(jobs.popleft()[1])
        load[owner] += 1
        turn[owner] = len(queued) + len(order)  # served after everyone before
        if not jobs:
            del by_owner[owner]
    return order
