"""GPU-hours as exact fractions: share × time over intervals, clipped to a range.

Pure: plain data in, :class:`~fractions.Fraction` out. A share is the number of GPUs an
allocation holds (``1/4``, ``1/7``, ``2`` for two whole GPUs); times are aware datetimes
with microseconds, so a sum of GPU-hours over any number of intervals is exact and equals
the sum of each allocation's share times its duration.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from fractions import Fraction

from ..policy.capacity import Allocation
from ..policy.schedule import _wall_to_utc

MICROSECONDS_PER_HOUR = 3_600_000_000
_MICROSECOND = timedelta(microseconds=1)


def allocation_share(allocation: Allocation) -> Fraction:
    """The GPUs ``allocation`` holds: its fraction of each device times the devices."""
    return allocation.fraction * max(len(allocation.device_ids), 1)


def hours_between(start: datetime, end: datetime) -> Fraction:
    """The hours from ``start`` to ``end`` (zero when ``end`` is not after ``start``), exactly."""
    if end <= start:
        return Fraction(0)
    return Fraction((end - start) // _MICROSECOND, MICROSECONDS_PER_HOUR)


def clip(
    start: datetime, end: datetime, begin: datetime | None, finish: datetime | None
) -> tuple[datetime, datetime] | None:
    """The part of ``[start, end)`` inside ``[begin, finish)`` (None: no bound), or None."""
    low = max(start, begin) if begin is not None else start
    high = min(end, finish) if finish is not None else end
    return (low, high) if high > low else None


@dataclass(frozen=True)
class IntervalUse:
    """How much of its GPUs an interval used, as read while it ran (the course-sessions
    service's rounds): per holder where its processes could be told apart, else its GPU's
    numbers (device-wide)."""

    observed_seconds: float
    """How long its use was read."""
    busy_seconds: float
    """Its utilisation summed over that time: seconds at 100 % of one GPU's SMs."""
    device_wide_seconds: float
    """The part of ``observed_seconds`` whose numbers were its GPU's, not its own."""
    peak_memory_mib: int | None = None
    """The most GPU memory it was seen holding; None when never said."""


@dataclass(frozen=True)
class UsageInterval:
    """One allocation's time on the GPU: a server's run or a job's, as the record keeps it."""

    key: str
    """The allocation key (``server:<user>/<name>``, ``job:<id>``)."""
    kind: str
    """``server`` or ``job``."""
    owner: str
    name: str
    """The server's name (empty for the default server) or the job's id."""
    profile: str
    """The profile (servers) or job flavor (jobs) it started from."""
    share: Fraction
    started: datetime
    ended: datetime | None = None
    """None while it still runs."""
    course: str | None = None
    allocation: str | None = None
    """The research allocation it is charged to, if any."""
    groups: tuple[str, ...] = ()
    use: IntervalUse | None = None
    """What it used of its GPUs, where that was read; None: never read."""

    def gpu_hours(
        self,
        begin: datetime | None = None,
        finish: datetime | None = None,
        *,
        now: datetime,
    ) -> Fraction:
        """GPU-hours inside ``[begin, finish)``; a running interval counts up to ``now``."""
        end = self.ended if self.ended is not None else max(now, self.started)
        part = clip(self.started, end, begin, finish)
        return self.share * hours_between(*part) if part else Fraction(0)


def week_of(moment: datetime, zone: tzinfo) -> tuple[datetime, datetime]:
    """The week holding ``moment``: ``[Monday 00:00, next Monday 00:00)`` in ``zone``, in UTC.

    Wall-clock midnight, whatever daylight saving does: a week holding a change has 167
    or 169 hours. Where a Monday's midnight does not exist (clocks jump over it) the week
    starts at the first instant after the jump.
    """
    local = moment.astimezone(zone)
    monday = local.date() - timedelta(days=local.weekday())
    return day_start(monday, zone), day_start(monday + timedelta(days=7), zone)


def day_start(day: date, zone: tzinfo) -> datetime:
    """00:00 of ``day`` in ``zone``, in UTC (the first instant after a jump over midnight)."""
    return _wall_to_utc(day, time(0), zone)


def days_range(first: date, last: date, zone: tzinfo) -> tuple[datetime, datetime]:
    """``[first 00:00, the day after last 00:00)`` in ``zone``, in UTC: whole days, both included."""
    return day_start(first, zone), day_start(last + timedelta(days=1), zone)


def utc(moment: datetime) -> datetime:
    """``moment`` (aware) in UTC."""
    if moment.tzinfo is None:
        raise ValueError("GPU-hours need aware datetimes")
    return moment.astimezone(UTC)
