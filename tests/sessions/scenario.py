"""The catalog, the week and the JupyterHub 6.1 REST models the sessions tests share.

The models have exactly the fields JupyterHub 6.1 returns to a token with the service's
scopes (``list:users`` + ``read:servers``, see ``user_model``/``server_model`` in
jupyterhub/apihandlers/base.py): ``kind``, ``name``, ``admin``, ``servers`` and
``user_info``; no ``state`` (that needs ``admin:server_state``).

The week used throughout: Monday 3 March 2025 in Europe/Zurich (UTC+1).

- ml101 meets Mondays 10:00-12:00 local (09:00-11:00 UTC), lead time 10 min, grace 15 min,
  pre-warming 30 min: pre-warm from 08:30 UTC, open from 08:50, reclaim at 11:15.
- vision meets Tuesdays 10:00-12:00 and 12:30-14:00 local (09:00-11:00 and 11:30-13:00
  UTC), no pre-warming: the first session is reclaimed at 11:15, the second opens at 11:20.
"""

from __future__ import annotations

from datetime import datetime

from gpuspawner.policy.schedule import UTC

CATALOG_YAML = """\
settings:
  timezone: Europe/Zurich
standing:
  - id: cpu
    title: CPU only
    default: true
courses:
  - id: ml101
    title: Machine Learning 101
    instructors: [prof]
    enrolment:
      users: [alice, bob, carol, dave]
      groups: [ml101-lab]
    gpu: {fraction: 1/4}
    schedule:
      term: {first_day: 2025-02-17, last_day: 2025-06-01}
      windows: [{day: Mon, start: "10:00", end: "12:00"}]
      lead_time: 10m
      grace: 15m
      prewarm: 30m
  - id: vision
    title: Computer Vision
    enrolment: {users: [frank]}
    schedule:
      term: {first_day: 2025-02-17, last_day: 2025-06-01}
      windows:
        - {day: Tue, start: "10:00", end: "12:00"}
        - {day: Tue, start: "12:30", end: "14:00"}
      lead_time: 10m
      grace: 15m
"""

SECRET = "the-prewarm-secret"
ML101_CLASS_START = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


def utc(day: int, hour: int, minute: int, second: float = 0) -> datetime:
    """An instant in the first week of March 2025, in UTC."""
    whole = int(second)
    return datetime(2025, 3, day, hour, minute, whole, int((second - whole) * 1e6), tzinfo=UTC)


def hub_time(moment: datetime) -> str:
    """A timestamp as JupyterHub writes it (jupyterhub.utils.isoformat): naive UTC plus Z."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"


def hub_server(
    user: str, name: str = "", *, profile: str | None, started: datetime, pending: str | None = None
) -> dict:
    """A server model (server_model) of an active server."""
    ready = pending is None
    return {
        "name": name,
        "display_name": name,
        "full_name": f"{user}/{name}",
        "last_activity": hub_time(started),
        "started": hub_time(started),
        "pending": pending,
        "ready": ready,
        "stopped": False,
        "url": f"/user/{user}/{name + '/' if name else ''}",
        "user_options": {"profile": profile} if profile else {},
        "progress_url": f"/hub/api/users/{user}/{'servers/' + name if name else 'server'}/progress",
        "full_url": None,
        "full_progress_url": None,
    }


def hub_user(name: str, *servers: dict, admin: bool = False) -> dict:
    """A user model (user_model) with the given active servers."""
    return {
        "kind": "user",
        "name": name,
        "admin": admin,
        "servers": {server["name"]: server for server in servers},
        "user_info": None,
    }
