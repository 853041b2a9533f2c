"""Instructors' changes to their courses, on top of the catalog, within the admins' bounds.

Design notes: docs/design/policy.md, "gpuspawner.policy.course_overrides".
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from .instructor_bounds import InstructorBounds
from .override_models import CourseOverrides, ExtraSession, OverridesFile, ServerExtension
from .schedule import UTC, ClassSession, CourseSchedule
from .wording import duration

if TYPE_CHECKING:
    from .catalog import Catalog
    from .catalog_models import Course

TIMINGS = ("lead_time", "grace", "prewarm")
TIMING_WORDS = {"lead_time": "lead time", "grace": "grace", "prewarm": "pre-warming"}


class OverrideRefused(ValueError):
    """A change the bounds or the schedule do not allow: an HTTP ``status`` and a sentence."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.message = message
        self.status = status


# -- reading and applying -------------------------------------------------------------------


def overrides_path(catalog: Catalog) -> Path | None:
    """The overrides file of ``catalog`` (relative to the file that holds the settings)."""
    name = catalog.settings.instructor_bounds.overrides_file
    if name is None:
        return None
    path = Path(name).expanduser()
    if not path.is_absolute() and catalog.settings_origin is not None:
        path = catalog.settings_origin.path.parent / path
    return path


def read_overrides(path: Path) -> tuple[OverridesFile, list[str]]:
    """The document at ``path`` (empty when there is none), and why it could not be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return OverridesFile(), []
    except OSError as error:
        return OverridesFile(), [f"{path}: cannot be read ({error.strerror}); no overrides apply"]
    try:
        return OverridesFile.model_validate(json.loads(text or "{}")), []
    except (ValueError, ValidationError) as error:
        first = str(error).splitlines()[0]
        return OverridesFile(), [f"{path}: not a valid overrides file ({first}); none apply"]


def with_overrides(catalog: Catalog) -> Catalog:
    """``catalog`` with its overrides file applied (``catalog`` itself when it has none)."""
    path = overrides_path(catalog)
    if path is None:
        return catalog
    document, problems = read_overrides(path)
    return apply_overrides(catalog, document, problems)


def apply_overrides(
    catalog: Catalog, document: OverridesFile, problems: Iterable[str] = ()
) -> Catalog:
    """A new catalog whose courses follow ``document`` where the bounds allow (pure)."""
    notes = list(problems)
    courses = []
    for course in catalog.courses:
        overrides = document.courses.get(course.id)
        if overrides is None:
            courses.append(course)
            continue
        kept, dropped = _within_bounds(course, bounds_for(catalog, course), overrides)
        notes.extend(f"{course.id}: {sentence}" for sentence in dropped)
        courses.append(_overridden(course, kept))
    for course_id in document.courses:
        if course_id not in catalog.courses_by_id:
            notes.append(f"{course_id}: there is no such course in the catalog any more")
    return dataclasses.replace(
        catalog, courses=courses, overrides=document, override_problems=notes
    )


def bounds_for(catalog: Catalog, course: Course) -> InstructorBounds:
    """What ``course``'s instructors may change: the catalog-wide bounds, narrowed by the
    course's own ``instructor_bounds``."""
    return catalog.settings.instructor_bounds.narrowed(course.instructor_bounds)


def _within_bounds(
    course: Course, bounds: InstructorBounds, overrides: CourseOverrides
) -> tuple[CourseOverrides, list[str]]:
    """The part of ``overrides`` the bounds allow now, and what was left out, in sentences."""
    dropped: list[str] = []
    changes: dict[str, object] = {}
    if overrides.cancelled and not bounds.cancel_classes:
        dropped.append("cancelled classes are not applied: instructors may not cancel classes")
        changes["cancelled"] = ()
    for name in TIMINGS:
        value = overrides.timing(name)
        allowed = getattr(bounds, name)
        if value is not None and (allowed is None or not allowed.contains(value)):
            dropped.append(f"the {TIMING_WORDS[name]} of {duration(value)} is outside the bounds")
            changes[name] = None
    if len(overrides.notice) > bounds.notice_length:
        dropped.append("the notice is longer than the bounds allow")
        changes["notice"] = ""
    extra = [
        e for e in overrides.extra if _length(e) <= bounds.extra_session_length and e.end > e.start
    ]
    if len(extra) != len(overrides.extra):
        dropped.append("an extra session is longer than the bounds allow")
        changes["extra"] = tuple(extra)
    kept = overrides.model_copy(update=changes) if changes else overrides
    return kept, dropped


def _length(extra: ExtraSession) -> timedelta:
    return datetime.combine(extra.day, extra.end) - datetime.combine(extra.day, extra.start)


def _overridden(course: Course, overrides: CourseOverrides) -> Course:
    """A copy of ``course`` whose schedule and notice follow ``overrides``."""
    schedule = course.course_schedule
    changes: dict[str, object] = {
        "no_class": schedule.no_class | frozenset(overrides.cancelled),
        "extra_sessions": tuple((e.day, e.start, e.end) for e in overrides.extra),
    }
    for name in TIMINGS:
        value = overrides.timing(name)
        if value is not None:
            changes[name] = None if name == "prewarm" and not value else value
    copy = course.model_copy()
    private = dict(copy.__pydantic_private__ or {})
    private["_schedule"] = dataclasses.replace(schedule, **changes)  # type: ignore[arg-type]
    private["_overrides"] = overrides
    copy.__pydantic_private__ = private
    copy.__dict__.pop("course_schedule", None)  # the cached schedule of the original
    return copy


def course_overrides(course: Course) -> CourseOverrides:
    """The instructors' changes in force for ``course`` (none: empty)."""
    found = (course.__pydantic_private__ or {}).get("_overrides")
    return found if isinstance(found, CourseOverrides) else CourseOverrides()


def catalog_schedule(course: Course) -> CourseSchedule:
    """``course``'s schedule as the catalog writes it, without instructors' changes."""
    return dataclasses.replace(
        course.course_schedule, no_class=frozenset(course.schedule.no_class), extra_sessions=()
    )


# -- changes an instructor asks for -----------------------------------------------------------


def _refuse_unless_enabled(bounds: InstructorBounds) -> None:
    if not bounds.enabled:
        raise OverrideRefused(
            "The hub admins have not let instructors change their courses here "
            "(settings.instructor_bounds.overrides_file in the catalog); ask them to.",
            403,
        )


def _today(course: Course, now: datetime) -> date:
    return now.astimezone(course.course_schedule.timezone).date()


def cancel_change(
    course: Course, bounds: InstructorBounds, overrides: CourseOverrides, day: date, now: datetime
) -> CourseOverrides:
    """Cancel the classes of ``day``: not in the past, and only a day the course meets."""
    _refuse_unless_enabled(bounds)
    if not bounds.cancel_classes:
        raise OverrideRefused("The hub admins do not let instructors cancel classes.", 403)
    if day in overrides.cancelled:
        raise OverrideRefused(f"The class of {day:%a %d %b} is cancelled already.", 409)
    classes = catalog_schedule(course).classes_on(day)
    if not classes:
        raise OverrideRefused(
            f"{course.title} has no class on {day:%a %d %b %Y} to cancel; pick a day from "
            "the list of classes."
        )
    if classes[0].start <= now:
        raise OverrideRefused(
            f"The class of {day:%a %d %b} has already begun or taken place; only classes "
            "still to come can be cancelled."
        )
    return overrides.model_copy(update={"cancelled": tuple(sorted({*overrides.cancelled, day}))})


def restore_change(overrides: CourseOverrides, day: date) -> CourseOverrides:
    """Undo the cancellation of ``day``."""
    if day not in overrides.cancelled:
        raise OverrideRefused(f"The class of {day:%a %d %b} is not cancelled.", 409)
    return overrides.model_copy(
        update={"cancelled": tuple(d for d in overrides.cancelled if d != day)}
    )


def extra_change(
    course: Course,
    bounds: InstructorBounds,
    overrides: CourseOverrides,
    session: ExtraSession,
    now: datetime,
) -> CourseOverrides:
    """Add an extra session: in the term, still to come, short enough, within the week's
    number of extra sessions, and sharing no time with a class held or another extra
    session of the course."""
    _refuse_unless_enabled(bounds)
    schedule = course.course_schedule
    if session.end <= session.start:
        raise OverrideRefused(
            "An extra session must end later on the same day than it starts, such as "
            "14:00 to 16:00."
        )
    if not schedule.in_term(session.day):
        raise OverrideRefused(
            f"{session.day:%a %d %b %Y} is outside the term ({schedule.first_day:%d %b} to "
            f"{schedule.last_day:%d %b %Y}); pick a day of the term."
        )
    if datetime.combine(session.day, session.start, tzinfo=schedule.timezone) <= now:
        raise OverrideRefused("An extra session must start in the future.")
    if _length(session) > bounds.extra_session_length:
        raise OverrideRefused(
            f"An extra session may last at most {duration(bounds.extra_session_length)} "
            f"(the hub admins' limit); this one lasts {duration(_length(session))}."
        )
    week = session.day.isocalendar()[:2]
    same_week = [e for e in overrides.extra if e.day.isocalendar()[:2] == week]
    if len(same_week) >= bounds.extra_sessions_per_week:
        limit = bounds.extra_sessions_per_week
        raise OverrideRefused(
            f"The hub admins allow {limit} extra session{'s' if limit != 1 else ''} a week "
            f"and the week of {session.day:%d %b} has {len(same_week)}; remove one first, "
            "or ask the admins."
            if limit
            else "The hub admins do not let instructors add extra sessions; ask them to."
        )
    if session in overrides.extra:
        raise OverrideRefused(f"The extra session {session.describe()} is there already.", 409)
    _refuse_overlap(course, overrides, session)
    return overrides.model_copy(
        update={"extra": tuple(sorted((*overrides.extra, session), key=_extra_key))}
    )


def _refuse_overlap(course: Course, overrides: CourseOverrides, session: ExtraSession) -> None:
    """Refuse ``session`` when it shares time with a class of the course still held (not
    cancelled) or with one of its extra sessions: the schedule would merge them into one
    longer class without saying so. Touching (one ends when the other starts) is allowed."""
    planned = catalog_schedule(course)
    held = dataclasses.replace(planned, no_class=planned.no_class | frozenset(overrides.cancelled))
    [wanted] = _as_class(planned, session)
    zone = planned.timezone
    # A class that starts the day before may run past midnight into the session's day.
    for day in (session.day - timedelta(days=1), session.day):
        for regular in held.classes_on(day):
            if regular.start < wanted.end and wanted.start < regular.end:
                start, end = regular.start.astimezone(zone), regular.end.astimezone(zone)
                raise OverrideRefused(
                    f"The extra session {session.describe()} overlaps the class of "
                    f"{start:%a %d %b %Y} {start:%H:%M}-{end:%H:%M} of {course.title}; pick a "
                    f"time that ends by {start:%H:%M} or starts from {end:%H:%M}, or cancel "
                    "that class first if the extra session replaces it.",
                    409,
                )
    for other in overrides.extra:
        [taken] = _as_class(planned, other)
        if taken.start < wanted.end and wanted.start < taken.end:
            raise OverrideRefused(
                f"The extra session {session.describe()} overlaps the extra session "
                f"{other.describe()} of {course.title}; pick a time that ends by "
                f"{other.start:%H:%M} or starts from {other.end:%H:%M}, or remove that extra "
                "session first.",
                409,
            )


def _as_class(planned: CourseSchedule, extra: ExtraSession) -> list[ClassSession]:
    """``extra`` as a class of ``planned``'s time zone (its start and end in UTC)."""
    alone = dataclasses.replace(
        planned,
        windows=(),
        no_class=frozenset(),
        extra_sessions=((extra.day, extra.start, extra.end),),
    )
    return alone.classes_on(extra.day)


def _extra_key(extra: ExtraSession) -> tuple:
    return (extra.day, extra.start, extra.end)


def remove_extra_change(overrides: CourseOverrides, session: ExtraSession) -> CourseOverrides:
    """Take an extra session off again."""
    if session not in overrides.extra:
        raise OverrideRefused(f"There is no extra session {session.describe()}.", 404)
    return overrides.model_copy(update={"extra": tuple(e for e in overrides.extra if e != session)})


def timing_change(
    bounds: InstructorBounds, overrides: CourseOverrides, name: str, value: timedelta | None
) -> CourseOverrides:
    """Set the lead time, grace or pre-warming (``name``) to ``value`` (None: the catalog's)."""
    _refuse_unless_enabled(bounds)
    if name not in TIMINGS:
        raise OverrideRefused(f"There is no setting {name[:40]!r}; choose one of {TIMINGS}.")
    words = TIMING_WORDS[name]
    allowed = getattr(bounds, name)
    if value is not None:
        if allowed is None:
            raise OverrideRefused(
                f"The hub admins do not let instructors change the {words}; ask them to.", 403
            )
        if not allowed.contains(value):
            raise OverrideRefused(
                f"The {words} must be between {_minutes(allowed.min)} and "
                f"{_minutes(allowed.max)} (the hub admins' bounds); {_minutes(value)} is not."
            )
    minutes = None if value is None else int(value.total_seconds() // 60)
    return overrides.model_copy(update={name: minutes})


def _minutes(span: timedelta) -> str:
    minutes = int(span.total_seconds() // 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


def notice_change(
    bounds: InstructorBounds, overrides: CourseOverrides, text: str
) -> CourseOverrides:
    """Post (or, with an empty ``text``, take down) the notice on the spawn cards."""
    _refuse_unless_enabled(bounds)
    text = " ".join(text.split())
    if text and bounds.notice_length == 0:
        raise OverrideRefused("The hub admins do not let instructors post notices.", 403)
    if len(text) > bounds.notice_length:
        raise OverrideRefused(
            f"A notice may be at most {bounds.notice_length} characters long (the hub "
            f"admins' limit); this one has {len(text)}. Shorten it."
        )
    return overrides.model_copy(update={"notice": text})


def extension_change(
    bounds: InstructorBounds,
    overrides: CourseOverrides,
    user: str,
    server: str,
    started: datetime,
    minutes: int,
) -> CourseOverrides:
    """Keep ``user``'s server ``minutes`` longer, within the admins' limit per server."""
    _refuse_unless_enabled(bounds)
    if bounds.extension <= timedelta(0):
        raise OverrideRefused(
            "The hub admins do not let instructors extend servers; ask them to.", 403
        )
    if minutes < 1:
        raise OverrideRefused("Extend a server by at least 1 minute.")
    already = overrides.extension_for(user, server, started)
    total = already + timedelta(minutes=minutes)
    if total > bounds.extension:
        left = bounds.extension - already
        raise OverrideRefused(
            f"A server may be extended by at most {_minutes(bounds.extension)} in all (the "
            f"hub admins' limit); {user}'s has {_minutes(already)} already, so at most "
            f"{_minutes(max(left, timedelta(0)))} more."
        )
    extension = ServerExtension(
        user=user, server=server, started=started.astimezone(UTC), minutes=minutes
    )
    return overrides.model_copy(update={"extensions": (*overrides.extensions, extension)})


def forget_extensions(overrides: CourseOverrides, before: datetime) -> CourseOverrides:
    """Without the extensions of servers started before ``before`` (long gone)."""
    kept = tuple(e for e in overrides.extensions if e.started >= before)
    if len(kept) == len(overrides.extensions):
        return overrides
    return overrides.model_copy(update={"extensions": kept})


@dataclasses.dataclass(frozen=True)
class ChangeInForce:
    """One of the instructors' changes in force: what it is, its value (JSON-ready), and
    the same in words."""

    kind: str
    """``cancelled``, ``extra``, ``lead_time``, ``grace``, ``prewarm``, ``notice`` or
    ``extended``."""
    value: object
    """A day (``"2026-11-30"``), an extra session (``{day, start, end}``), minutes, the
    notice, or the extended servers (``[{user, server, started, minutes}]``)."""
    text: str

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def changes_in_force(course: Course) -> list[ChangeInForce]:
    """Instructors' changes in force for ``course`` (``gpuspawner check``, the course API)."""
    overrides = course_overrides(course)
    found = [
        ChangeInForce("cancelled", day.isoformat(), f"cancelled {day:%a %d %b %Y}")
        for day in overrides.cancelled
    ]
    found += [
        ChangeInForce(
            "extra",
            {
                "day": extra.day.isoformat(),
                "start": f"{extra.start:%H:%M}",
                "end": f"{extra.end:%H:%M}",
            },
            f"extra session {extra.describe()}",
        )
        for extra in overrides.extra
    ]
    for name in TIMINGS:
        value = overrides.timing(name)
        if value is not None:
            minutes = getattr(overrides, name)
            found.append(ChangeInForce(name, minutes, f"{TIMING_WORDS[name]} {_minutes(value)}"))
    if overrides.notice:
        found.append(ChangeInForce("notice", overrides.notice, f"notice {overrides.notice!r}"))
    servers: dict[tuple[str, str, datetime], int] = {}
    for extension in overrides.extensions:
        key = (extension.user, extension.server, extension.started)
        servers[key] = servers.get(key, 0) + extension.minutes
    if servers:
        extended = [
            {"user": user, "server": server, "started": started.isoformat(), "minutes": minutes}
            for (user, server, started), minutes in servers.items()
        ]
        count = len(extended)
        found.append(
            ChangeInForce(
                "extended", extended, f"{count} server{'s' if count != 1 else ''} extended"
            )
        )
    return found


def describe_overrides(course: Course) -> list[str]:
    """Instructors' changes in force for ``course``, in words (``gpuspawner check``)."""
    return [change.text for change in changes_in_force(course)]


def classes_between(course: Course, first: date, last: date) -> list[tuple[date, list]]:
    """Each day from ``first`` to ``last`` with the course's classes that day as planned by
    the catalog (``(session, cancelled)``) and its extra sessions (``(session, None)``)."""
    planned = catalog_schedule(course)
    overrides = course_overrides(course)
    days = []
    day = first
    while day <= last:
        found: list[tuple[ClassSession, bool | None]] = [
            (session, day in overrides.cancelled) for session in planned.classes_on(day)
        ]
        extra_only = dataclasses.replace(
            planned,
            extra_sessions=tuple((e.day, e.start, e.end) for e in overrides.extra if e.day == day),
            windows=(),
        )
        found += [(session, None) for session in extra_only.classes_on(day)]
        if found:
            days.append((day, found))
        day += timedelta(days=1)
    return days
