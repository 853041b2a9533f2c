"""Course schedules: weekly class windows in a named time zone.

Design notes: docs/design/policy.md, "gpuspawner.policy.schedule".
"""

from __future__ import annotations

import enum
from bisect import bisect_right
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from functools import cached_property
from zoneinfo import ZoneInfo

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
WEEKDAY_ABBREVIATIONS = {name[:3]: index for index, name in enumerate(WEEKDAYS)}

# How far ahead "when does it open next" looks: a term rarely runs longer.
MAX_LOOKAHEAD_DAYS = 400
# The longest term whose sessions are computed (the catalog refuses longer terms).
MAX_TERM_DAYS = 3 * 366
DAY_MINUTES = 24 * 60
WEEK_MINUTES = 7 * DAY_MINUTES


class Phase(enum.Enum):
    """Where an instant falls relative to a course's class sessions."""

    OPENING = "opening"
    OPEN = "open"
    GRACE = "grace"
    CLOSED = "closed"

    @property
    def accepts_new_servers(self) -> bool:
        """Students may start a server in the lead time and during class."""
        return self in (Phase.OPENING, Phase.OPEN)


def parse_weekday(value: object) -> int:
    """``"Mon"``, ``"monday"`` or ``0`` (Monday) to 0-6."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 6:
        return value
    if isinstance(value, str):
        key = value.strip().lower()[:3]
        if key in WEEKDAY_ABBREVIATIONS and WEEKDAYS[WEEKDAY_ABBREVIATIONS[key]].startswith(
            value.strip().lower()
        ):
            return WEEKDAY_ABBREVIATIONS[key]
    raise ValueError(f"expected a day of the week such as Mon or monday, got {value!r}")


def parse_clock(value: object) -> time:
    """``"10:00"`` or ``"9:05"`` to a wall-clock time. YAML may give minutes since midnight."""
    if isinstance(value, int) and not isinstance(value, bool):
        # YAML 1.1 reads an unquoted 10:00 as the sexagesimal number 600.
        if 0 <= value < 24 * 60:
            return time(value // 60, value % 60)
        if value >= 0:
            # Show what the instructor wrote (25:00), not the number YAML made of it (1500).
            value = f"{value // 60}:{value % 60:02d}"
    if isinstance(value, str):
        parts = value.strip().split(":")
        if len(parts) == 2 and all(p.isdigit() for p in parts):
            hour, minute = int(parts[0]), int(parts[1])
            if 0 <= hour <= 23 and 0 <= minute <= 59:
                return time(hour, minute)
    raise ValueError(f"expected a time of day as HH:MM, such as 10:00 or 14:30, got {value!r}")


def parse_timezone(value: object) -> ZoneInfo:
    """A named IANA time zone such as ``Europe/Zurich``."""
    if isinstance(value, str) and value.strip():
        try:
            return ZoneInfo(value.strip())
        except (KeyError, ValueError, OSError):
            pass
    raise ValueError(
        f"expected a named time zone such as Europe/Zurich or America/New_York, got {value!r}"
    )


@dataclass(frozen=True)
class WeeklyWindow:
    """A class time that repeats every week, in the course's wall-clock time."""

    weekday: int
    start: time
    end: time

    def __post_init__(self) -> None:
        if self.start == self.end:
            raise ValueError("a class window must end at a different time than it starts")

    def describe(self) -> str:
        """``Mon 10:00-12:00``."""
        return f"{WEEKDAYS[self.weekday][:3].title()} {self.start:%H:%M}-{self.end:%H:%M}"

    def overlaps(self, other: WeeklyWindow) -> bool:
        """True when the two windows share some time of the week (touching is not sharing)."""
        here, there = self._week_minutes(), other._week_minutes()
        # Minutes on a circle of one week: a window past Sunday midnight goes on on Monday.
        return (there[0] - here[0]) % WEEK_MINUTES < here[1] or (
            here[0] - there[0]
        ) % WEEK_MINUTES < there[1]

    def _week_minutes(self) -> tuple[int, int]:
        """(start, length) in minutes from Monday 00:00."""
        start = self.start.hour * 60 + self.start.minute
        end = self.end.hour * 60 + self.end.minute
        return self.weekday * DAY_MINUTES + start, (end - start) % DAY_MINUTES


@dataclass(frozen=True)
class ClassSession:
    """One concrete class meeting, in UTC, with the course's lead time and grace."""

    start: datetime
    end: datetime
    lead_time: timedelta
    grace: timedelta

    @property
    def opens_at(self) -> datetime:
        """When students may start servers for this session."""
        return self.start - self.lead_time

    @property
    def reclaim_at(self) -> datetime:
        """When the sessions service stops the session's servers."""
        return self.end + self.grace


@dataclass(frozen=True)
class ScheduleStatus:
    """A course's situation at one instant."""

    phase: Phase
    session: ClassSession | None
    """The session the instant falls in (lead time and grace included), if any."""
    next_session: ClassSession | None
    """The next session whose lead time has not begun yet, if the term has one."""


@dataclass(frozen=True)
class CourseSchedule:
    """When a course meets: weekly windows inside a term, minus dates without class."""

    timezone: tzinfo
    windows: tuple[WeeklyWindow, ...]
    first_day: date
    last_day: date
    no_class: frozenset[date] = field(default_factory=frozenset)
    lead_time: timedelta = timedelta(minutes=10)
    grace: timedelta = timedelta(minutes=10)
    prewarm: timedelta | None = None
    """How long before the start the sessions service starts servers, if it does."""
    extra_sessions: tuple[tuple[date, time, time], ...] = ()
    """One-off sessions ``(day, start, end)`` in wall-clock time, added by an instructor
    (:mod:`.course_overrides`); they take place on a ``no_class`` day too."""

    def __post_init__(self) -> None:
        if self.first_day > self.last_day:
            raise ValueError("the term's first day comes after its last day")
        if self.lead_time < timedelta(0) or self.grace < timedelta(0):
            raise ValueError("lead time and grace cannot be negative")

    def in_term(self, day: date) -> bool:
        """True when the local date ``day`` is one of the term's days, first and last included."""
        return self.first_day <= day <= self.last_day

    # -- sessions -----------------------------------------------------------------

    def _sessions_starting_on(self, day: date) -> list[tuple[datetime, datetime]]:
        """Raw (unmerged) UTC intervals of windows that start on local date ``day``."""
        result = []
        for extra_day, start_clock, end_clock in self.extra_sessions:
            if extra_day == day:
                result.append(
                    (
                        _wall_to_utc(day, start_clock, self.timezone),
                        _wall_to_utc(day, end_clock, self.timezone),
                    )
                )
        if not self.in_term(day) or day in self.no_class:
            return result
        weekday = day.weekday()
        for window in self.windows:
            if window.weekday != weekday:
                continue
            end_day = day if window.end > window.start else day + timedelta(days=1)
            start = _wall_to_utc(day, window.start, self.timezone)
            end = _wall_to_utc(end_day, window.end, self.timezone)
            if end > start:
                result.append((start, end))
        return result

    def sessions_between(self, begin: datetime, finish: datetime) -> list[ClassSession]:
        """Merged class sessions that overlap ``[begin, finish)`` (aware datetimes)."""
        begin_local = begin.astimezone(self.timezone).date() - timedelta(days=2)
        finish_local = finish.astimezone(self.timezone).date() + timedelta(days=1)
        first = max(begin_local, self.first_day)
        last = min(finish_local, self.last_day)
        raw: list[tuple[datetime, datetime]] = []
        day = first
        while day <= last:
            raw.extend(self._sessions_starting_on(day))
            day += timedelta(days=1)
        merged = _merge(raw)
        return [
            ClassSession(start, end, self.lead_time, self.grace)
            for start, end in merged
            if end + self.grace > begin - self.lead_time and start - self.lead_time < finish
        ]

    @cached_property
    def term_sessions(self) -> tuple[ClassSession, ...]:
        """Every class session of the term, merged and in order, computed once.

        ``status()`` then only searches this list, which keeps evaluating hundreds of
        courses per spawn-page render cheap.
        """
        weekdays = {w.weekday for w in self.windows}
        extra_days = {extra[0] for extra in self.extra_sessions}
        last = min(self.last_day, self.first_day + timedelta(days=MAX_TERM_DAYS))
        raw: list[tuple[datetime, datetime]] = []
        day = self.first_day
        while day <= last:
            if day.weekday() in weekdays or day in extra_days:
                raw.extend(self._sessions_starting_on(day))
            day += timedelta(days=1)
        return tuple(
            ClassSession(start, end, self.lead_time, self.grace) for start, end in _merge(raw)
        )

    @cached_property
    def _openings(self) -> list[datetime]:
        return [session.opens_at for session in self.term_sessions]

    def status(self, now: datetime) -> ScheduleStatus:
        """Which phase ``now`` (an aware datetime) is in, and the next session."""
        if now.tzinfo is None:
            raise ValueError("status() needs an aware datetime")
        now = now.astimezone(UTC)
        sessions = self.term_sessions
        # sessions[:index] opened (lead time included) at or before now; the rest later.
        index = bisect_right(self._openings, now)
        upcoming = sessions[index] if index < len(sessions) else None
        # Ends, and so reclaim times, increase along the list: the sessions still in
        # their lead time, class or grace are a run just before ``index``.
        first = index
        while first > 0 and sessions[first - 1].reclaim_at > now:
            first -= 1
        current = None
        for session in sessions[first:index]:
            # The grace of one class may overlap the lead time of the next: the next
            # one's opening wins, so students can start for it.
            if current is None or now >= current.end:
                current = session
        if current is None:
            return ScheduleStatus(Phase.CLOSED, None, upcoming)
        if now < current.start:
            phase = Phase.OPENING
        elif now < current.end:
            phase = Phase.OPEN
        else:
            phase = Phase.GRACE
        return ScheduleStatus(phase, current, upcoming)

    def classes_on(self, day: date) -> list[ClassSession]:
        """The class sessions that start on the local date ``day`` (merged, in order)."""
        return [
            ClassSession(start, end, self.lead_time, self.grace)
            for start, end in _merge(self._sessions_starting_on(day))
        ]

    def week(self, start: datetime) -> list[ClassSession]:
        """The sessions in the seven days from ``start``, for ``gpuspawner check``."""
        return [
            s
            for s in self.sessions_between(start, start + timedelta(days=7))
            if s.start >= start - timedelta(days=1) and s.start < start + timedelta(days=7)
        ]


@dataclass(frozen=True)
class GapClash:
    """A day on which a class window meets a daylight-saving gap (clocks jumping forward)."""

    window: WeeklyWindow
    day: date
    """The day the class starts."""
    jump_from: time
    """The wall-clock time at which the clocks jump (02:00 in Europe)."""
    jump_to: time
    """The wall-clock time they jump to (03:00)."""
    starts_in_gap: bool
    ends_in_gap: bool

    @property
    def wholly(self) -> bool:
        """True when the whole class lies in the gap, so it does not take place that day."""
        return self.starts_in_gap and self.ends_in_gap


def gap_clashes(
    window: WeeklyWindow,
    zone: tzinfo,
    first_day: date,
    last_day: date,
    no_class: frozenset[date] = frozenset(),
) -> list[GapClash]:
    """The days of the term on which ``window`` starts or ends in a daylight-saving gap.

    On such a day the class starts (or ends) at the end of the gap; a class wholly inside
    the gap has no time at all and does not take place.
    """
    clashes = []
    day = first_day + timedelta(days=(window.weekday - first_day.weekday()) % 7)
    while day <= last_day:
        if day not in no_class:
            end_day = day if window.end > window.start else day + timedelta(days=1)
            starts_in_gap = _in_gap(day, window.start, zone)
            ends_in_gap = _in_gap(end_day, window.end, zone)
            if starts_in_gap or ends_in_gap:
                # Gaps are months apart and a window is shorter than a day: both ends in
                # a gap means both in the same one.
                jump = _wall_to_utc(
                    day if starts_in_gap else end_day,
                    window.start if starts_in_gap else window.end,
                    zone,
                )
                before = (jump - timedelta(seconds=1)).astimezone(zone).utcoffset()
                assert before is not None
                clashes.append(
                    GapClash(
                        window,
                        day,
                        jump_from=(jump.replace(tzinfo=None) + before).time(),
                        jump_to=jump.astimezone(zone).time(),
                        starts_in_gap=starts_in_gap,
                        ends_in_gap=ends_in_gap,
                    )
                )
        day += timedelta(days=7)
    return clashes


def _in_gap(day: date, clock: time, zone: tzinfo) -> bool:
    """True when wall-clock ``day clock`` does not exist in ``zone`` (clocks jump past it)."""
    local = datetime.combine(day, clock, tzinfo=zone)
    return local.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != local.replace(tzinfo=None)


def _wall_to_utc(day: date, clock: time, zone: tzinfo) -> datetime:
    """Wall-clock ``day clock`` in ``zone`` as UTC, stepping out of a DST gap forwards.

    ``fold=0`` picks the first of two repeated times in the autumn; a time that
    does not exist in spring (02:30 on the change day) maps past the gap.
    """
    local = datetime.combine(day, clock, tzinfo=zone)
    as_utc = local.astimezone(UTC)
    roundtrip = as_utc.astimezone(zone)
    if roundtrip.replace(tzinfo=None) != local.replace(tzinfo=None):
        # Inside a spring-forward gap: start at the first instant after the gap.
        # The transition lies between the two readings of the wall time; find it.
        low = local.replace(fold=1).astimezone(UTC)
        high = local.replace(fold=0).astimezone(UTC)
        low, high = min(low, high), max(low, high)
        offset_after = high.astimezone(zone).utcoffset()
        while high - low > timedelta(seconds=1):
            middle = low + (high - low) / 2
            if middle.astimezone(zone).utcoffset() == offset_after:
                high = middle
            else:
                low = middle
        return high.replace(microsecond=0)
    return as_utc


def _merge(intervals: list[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    """Merge overlapping or touching intervals."""
    merged: list[tuple[datetime, datetime]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
