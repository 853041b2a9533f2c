"""The scheduler's time in tests: moments of Wednesday 25 November 2026 (UTC) and a clock
the test moves."""

from __future__ import annotations

from datetime import UTC, datetime


def at(hh_mm: str, second: int = 0) -> datetime:
    """``hh_mm`` (and ``second``) on 25 November 2026, UTC."""
    hour, minute = (int(part) for part in hh_mm.split(":"))
    return datetime(2026, 11, 25, hour, minute, second, tzinfo=UTC)


class Clock:
    """The scheduler's time, moved by the test."""

    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now
