"""When a schedule runs: its slots, from its cron expression or interval, inside its daily
window and before its end date (pure functions of the request and the time)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from croniter import croniter

from .models import CreateSchedule

MAX_SLOT_SEARCH = 100_000
"""How many candidate times the scheduler looks through for the next slot in the window."""


def _candidates(spec: CreateSchedule, after: datetime, anchor: datetime) -> Iterator[datetime]:
    """The rhythm's times strictly after ``after`` (aware, UTC), window not applied."""
    if spec.cron is not None:
        times = croniter(spec.cron, after.astimezone(spec.zone))
        while True:
            yield times.get_next(datetime).astimezone(UTC)
    else:
        assert spec.interval_seconds is not None
        step = timedelta(seconds=spec.interval_seconds)
        steps = max(0, (after - anchor) // step + 1) if after >= anchor else 0
        moment = anchor + steps * step
        while True:
            if moment > after:
                yield moment
            moment += step


def next_slot(spec: CreateSchedule, after: datetime, anchor: datetime) -> datetime | None:
    """The first slot strictly after ``after``, inside the window and before the end date;
    None when there is none."""
    if spec.start_time is not None and after < spec.start_time:
        after = spec.start_time - timedelta(microseconds=1)
    for count, moment in enumerate(_candidates(spec, after, anchor)):
        if spec.end_time is not None and moment > spec.end_time:
            return None
        if spec.window is None or spec.window.holds(moment.astimezone(spec.zone).time()):
            return moment
        if count >= MAX_SLOT_SEARCH:
            return None
    return None  # pragma: no cover: the candidates never end


def latest_due_slot(
    spec: CreateSchedule, first_due: datetime, now: datetime, anchor: datetime
) -> datetime:
    """The last slot at or before ``now``, from ``first_due`` (itself a slot, due)."""
    latest = first_due
    for _ in range(MAX_SLOT_SEARCH):
        following = next_slot(spec, latest, anchor)
        if following is None or following > now:
            break
        latest = following
    return latest
