"""The experimental zone's daily wipe: when it is due, and when its warning starts.

The wipe happens every day at ``settings.experimental_zone.wipe_at`` in the catalog's time
zone (a wall-clock time: across a daylight-saving change it stays at that hour). A
course-sessions round at or after a wipe moment wipes, once; a round that comes more than
``CATCH_UP`` late (the service was down) leaves that wipe out rather than wiping long after
the hour people were told.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta, tzinfo

from .catalog import ExperimentalZone

CATCH_UP = timedelta(hours=1)
"""How late a round may still carry out a wipe it missed."""


def wipe_moment(day_start: datetime, at: time, zone: tzinfo) -> datetime:
    """The wipe of the local day of ``day_start``, as an aware instant."""
    local = day_start.astimezone(zone)
    return datetime.combine(local.date(), at, tzinfo=zone)


@dataclass(frozen=True)
class WipeSchedule:
    """The wipes around one instant."""

    previous: datetime
    """The latest wipe moment at or before now."""
    next: datetime
    """The first wipe moment after now."""
    warning: timedelta

    @property
    def warn_from(self) -> datetime:
        """When the warning about the next wipe starts."""
        return self.next - self.warning

    def warning_due(self, now: datetime) -> bool:
        """True inside the warning period before the next wipe."""
        return self.warn_from <= now < self.next

    def wipe_due(self, now: datetime) -> bool:
        """True when the latest wipe moment has come and is not more than CATCH_UP ago."""
        return self.previous <= now < self.previous + CATCH_UP


def wipe_schedule(settings: ExperimentalZone, zone: tzinfo, now: datetime) -> WipeSchedule:
    """The previous and next wipe moments around ``now`` (aware)."""
    if now.tzinfo is None:
        raise ValueError("wipe_schedule() needs an aware datetime")
    today = wipe_moment(now, settings.wipe_at, zone)
    if today <= now:
        previous = today
        following = wipe_moment(now + timedelta(days=1), settings.wipe_at, zone)
    else:
        previous = wipe_moment(now - timedelta(days=1), settings.wipe_at, zone)
        following = today
    return WipeSchedule(previous, following, settings.warning)
