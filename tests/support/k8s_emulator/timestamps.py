"""Timestamps in the two formats the API uses: metav1.Time (seconds) and MicroTime."""

from __future__ import annotations

import datetime as dt


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def rfc3339(moment: dt.datetime | None = None) -> str:
    """metav1.Time, such as creationTimestamp: second precision, 'Z' suffix."""
    return (moment or now()).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro(moment: dt.datetime | None = None) -> str:
    """metav1.MicroTime, such as an event's eventTime."""
    return (moment or now()).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
