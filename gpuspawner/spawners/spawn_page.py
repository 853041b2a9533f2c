"""The spawn page: one card per profile, rendered from the user's entitlements."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from ..local_times import clock_element, time_element, told_html
from ..policy.catalog_models import ExperimentalZone, SoftwareEnvironment
from ..policy.course_overrides import course_overrides
from ..policy.entitlements import Entitlement, ProfileKind
from ..policy.environments import unmet_requirement
from ..policy.schedule import parse_timezone
from ..policy.share import GPUDevice
from ..policy.storage import parse_mounts
from ..policy.units import format_bytes
from ..policy.zones import wipe_moment

_templates = Environment(
    loader=PackageLoader("gpuspawner", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


@dataclass(frozen=True)
class EnvironmentOption:
    """One environment a card offers to choose from."""

    id: str
    title: str
    description: str
    contains: str
    """What is in it: "PyTorch 2.4, CUDA 12.4"."""
    requires: str
    """Its GPU requirement in words: "CUDA 12.4 or newer"; empty without one."""
    unmet: str = ""
    """Why it cannot run on any GPU the profile can get here; empty when it can (or the
    GPUs' versions are not known)."""

    @classmethod
    def build(
        cls, environment: SoftwareEnvironment, devices: list[GPUDevice] | None
    ) -> EnvironmentOption:
        """``devices``: the GPUs the profile can get (None: it has no GPU)."""
        unmet = ""
        if devices and environment.requires is not None:
            reasons = [unmet_requirement(environment, d) for d in devices]
            if all(reasons):
                unmet = f"Not available on this hub's GPUs: {reasons[0]}."
        return cls(
            id=environment.id,
            title=environment.title,
            description=environment.description,
            contains=", ".join(environment.contains),
            requires=environment.requires.describe() if environment.requires else "",
            unmet=unmet,
        )


@dataclass(frozen=True)
class ProfileCard:
    """What one card shows."""

    id: str
    title: str
    description: str
    kind: str
    available: bool
    status: str
    gpu: str
    resources: str
    seats: str
    full: bool
    role: str
    default: bool
    storage: str = ""
    """The folders it mounts: "course-data at /data (read-only), scratch at /scratch"."""
    budget: str = ""
    """The GPU-hours left: "4.5 of your 6 GPU-hours left this week (renews ...)"."""
    budget_html: Markup = Markup("")
    """``budget`` with its renewal as a ``<time>`` the page tells in the reader's zone."""
    budget_exhausted: bool = False
    status_html: Markup = Markup("")
    """``status`` with its moments as ``<time>`` elements, which the page tells again in
    the reader's zone: "Open until <time ...>12:00 CET</time>"."""
    stops: Markup = Markup("")
    """When a server started now is stopped (class end plus grace): a ``<time>``."""
    course_notice: str = ""
    """The notice the course's instructors posted on the course page, if any."""
    environments: tuple[EnvironmentOption, ...] = ()
    """The environments to choose from (the first is the default); empty: no choice."""
    wipe: Markup = Markup("")
    """For a profile in the experimental zone: what is wiped, and when (a ``<time>``)."""

    @classmethod
    def build(
        cls,
        entitlement: Entitlement,
        seats_left: int | None,
        devices: list[GPUDevice],
        *,
        local: bool = False,
        budget: str = "",
        budget_exhausted: bool = False,
        experimental_zone: ExperimentalZone | None = None,
        timezone: str = "UTC",
        budget_html: Markup | None = None,
        now: datetime | None = None,
    ) -> ProfileCard:
        """The card of one entitlement; ``local``: storage shows where it appears on one
        machine (folders in the home); ``budget``: its budget line, if one applies, and
        ``budget_html`` the same with its moment as a ``<time>`` (see ``BudgetStatus.told``)."""
        profile = entitlement.profile
        share = profile.share
        matching = None
        if share is None:
            gpu = "No GPU"
        else:
            matching = [d for d in devices if d.matches_model(share.models)]
            models = sorted({d.model for d in matching})
            model = models[0] if len(models) == 1 else None
            memory = matching[0].memory_mib if model else None
            gpu = share.describe(model, memory)
            if matching and all(d.simulated for d in matching):
                gpu += " (simulated GPU)"
        parts = []
        if profile.resources.cpu:
            cpu = profile.resources.cpu
            parts.append(f"{cpu:g} CPU" + ("s" if cpu != 1 else ""))
        if profile.resources.memory:
            parts.append(f"{format_bytes(profile.resources.memory)} RAM")
        if seats_left is None:
            seats = ""
        elif seats_left == 0:
            seats = "No GPU seats left right now"
        else:
            seats = f"{seats_left} GPU seat{'s' if seats_left != 1 else ''} left"
        return cls(
            id=profile.id,
            title=profile.title,
            description=profile.description,
            kind=profile.kind.value,
            available=entitlement.available,
            status=entitlement.status,
            gpu=gpu,
            resources=", ".join(parts),
            seats=seats,
            full=seats_left == 0,
            role=entitlement.role.value if profile.kind is ProfileKind.COURSE else "",
            default=profile.default,
            storage=", ".join(m.describe(local=local) for m in parse_mounts(profile.storage)),
            budget=budget,
            budget_html=budget_html if budget_html is not None else escape(budget),
            budget_exhausted=budget_exhausted,
            status_html=_status_html(entitlement),
            stops=_stop_time(entitlement),
            course_notice=_course_notice(entitlement),
            environments=tuple(EnvironmentOption.build(e, matching) for e in profile.environments),
            wipe=_wipe_note(
                entitlement, experimental_zone, timezone, local=local, now=now or datetime.now(UTC)
            ),
        )


def _wipe_note(
    entitlement: Entitlement,
    zone: ExperimentalZone | None,
    timezone: str,
    *,
    local: bool,
    now: datetime,
) -> Markup:
    """ "Experimental zone: ~/scratch is wiped every day at 03:00 CET..." for a profile in
    the experimental zone, the time a ``<time>`` the page tells in the reader's zone (today's
    wipe in the catalog's ``timezone``); empty otherwise."""
    profile = entitlement.profile
    if profile.zone != "experimental" or zone is None:
        return Markup("")
    wiped = [m for m in parse_mounts(profile.storage) if m.source.kind == "experimental"]
    where = " and ".join((f"~/{m.name}" if local else m.mount) for m in wiped)
    what = f"{where} {'is' if len(wiped) == 1 else 'are'}" if wiped else "its storage is"
    tz = parse_timezone(timezone)
    at = clock_element(wipe_moment(now, zone.wipe_at, tz), tz)
    return Markup(
        "Experimental zone: {} wiped every day at {}, after a warning. Keep what matters in "
        "your home or a production profile."
    ).format(what, at)


def _status_html(entitlement: Entitlement) -> Markup:
    """The card's status with its moments as ``<time>`` elements in the course's zone."""
    course = entitlement.profile.course
    told = entitlement.status_told
    if course is None or told is None:
        return escape(entitlement.status)
    return told_html(told, course.course_schedule.timezone)


def _stop_time(entitlement: Entitlement) -> Markup:
    """The time a server started now stops, for a card that can be started now: its
    clock time in the course's zone, as a ``<time>``."""
    course = entitlement.profile.course
    end = entitlement.session_end
    if course is None or end is None or not entitlement.available:
        return Markup("")
    zone = course.course_schedule.timezone
    return time_element(end, f"{end.astimezone(zone):%H:%M}", zone)


def _course_notice(entitlement: Entitlement) -> str:
    """The notice of a course card (posted by its instructors on the course page)."""
    course = entitlement.profile.course
    return course_overrides(course).notice if course is not None else ""


def _in_class(card: ProfileCard) -> bool:
    """A course open to this student now, with a seat (instructors may start theirs at any
    time of the term, which is not a reason to put it first)."""
    return card.available and card.kind == "course" and card.role == "student" and not card.full


def _open_first(cards: list[ProfileCard]) -> list[ProfileCard]:
    """Cards that can be started now first, courses in class before the rest (stable)."""
    return sorted(cards, key=lambda c: (not c.available, not _in_class(c)))


def render_profile_cards(
    cards: list[ProfileCard],
    selected: str | None = None,
    gpus: list | None = None,
    notice: str = "",
    selected_environment: str | None = None,
) -> str:
    """HTML for JupyterHub's spawn form (inserted inside its <form>).

    ``notice``: why the user's last server ended without being asked to (out of memory).
    ``selected_environment``: the environment of the last start, chosen again on the card
    of ``selected`` when that card still offers it (otherwise each card's first).
    """
    cards = _open_first(cards)
    startable = [c for c in cards if c.available]
    ids = {c.id for c in startable}
    if selected not in ids:
        # The course whose class is open now, before the catalog's default (CPU only):
        # in class time that is what the student came for.
        open_courses = [c for c in startable if _in_class(c)]
        default = next((c for c in startable if c.default), None)
        chosen = open_courses[0] if open_courses else default
        if chosen is None and startable:
            chosen = startable[0]
        selected = chosen.id if chosen else None
    has_gpu_profile = any(c.kind in ("course", "research") for c in cards)
    chosen_environments = {c.id: _first_runnable(c, selected_environment) for c in cards}
    return _templates.get_template("profiles.html").render(
        cards=cards,
        selected=selected,
        chosen_environments=chosen_environments,
        gpus=gpus or [],
        notice=notice,
        no_course=bool(cards) and not has_gpu_profile,
    )


def _first_runnable(card: ProfileCard, wanted: str | None) -> str | None:
    """The environment checked on ``card``: ``wanted`` if the card offers it and it can run
    here, else the first that can."""
    runnable = [e.id for e in card.environments if not e.unmet]
    if wanted in runnable:
        return wanted
    return runnable[0] if runnable else None
