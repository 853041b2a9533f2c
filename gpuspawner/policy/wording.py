"""Times as a student reads them on the spawn page: "12:10", "Mon 10:00", "Mon 7 Dec 10:00"."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo


def when(moment: datetime, now: datetime, zone: tzinfo) -> str:
    """A short local time relative to ``now``: ``12:10``, ``tomorrow 10:00``, ``Mon 10:00``."""
    local = moment.astimezone(zone)
    today = now.astimezone(zone).date()
    days = (local.date() - today).days
    clock = f"{local.hour:02d}:{local.minute:02d}"  # %H:%M, without strftime's cost
    if days == 0:
        return clock
    if days == 1:
        return f"tomorrow {clock}"
    if 1 < days < 7:
        return f"{local:%a} {clock}"
    return f"{local:%a} {local.day} {local:%b} {clock}"


@dataclass(frozen=True)
class Told:
    """A sentence that tells moments: ``pattern`` ("Open until {0}") with a ``{i}`` for
    each of ``moments``, and ``text``, the sentence with each moment as :func:`when`
    writes it in the zone it was told in. A page can show ``text``, or tell each moment
    again in its reader's own zone."""

    pattern: str
    moments: tuple[datetime, ...]
    words: tuple[str, ...]
    """Each moment as :func:`when` wrote it."""

    @property
    def text(self) -> str:
        return self.pattern.format(*self.words)


def tell(pattern: str, now: datetime, zone: tzinfo, *moments: datetime) -> Told:
    """``pattern`` with each ``{i}`` told as ``when(moments[i], now, zone)``."""
    return Told(pattern, moments, tuple(when(m, now, zone) for m in moments))


def duration(span: timedelta) -> str:
    """``1 h 5 min``, ``12 min``, ``less than a minute``."""
    minutes = int(span.total_seconds() // 60)
    if minutes < 1:
        return "less than a minute"
    hours, minutes = divmod(minutes, 60)
    if hours and minutes:
        return f"{hours} h {minutes} min"
    return f"{hours} h" if hours else f"{minutes} min"
