"""JupyterHub's timestamps as aware datetimes."""

from __future__ import annotations

from datetime import datetime

from gpuspawner.policy.schedule import UTC


def parse_hub_time(value: object) -> datetime | None:
    """A JupyterHub timestamp (``2025-03-03T09:55:00.123456Z``) as an aware datetime."""
    if not isinstance(value, str) or not value:
        return None
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"  # fromisoformat reads "Z" only from Python 3.11
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
