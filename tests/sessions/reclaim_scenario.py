"""The catalog and the servers the GPU-aware reclaim tests share.

The same week as scenario.py: Monday 3 March 2025 in Europe/Zurich (UTC+1).

- ml101 meets Mondays 10:00-12:00 local (09:00-11:00 UTC), pre-warming from 08:30 UTC;
  its students' servers are reclaimed after 30 min without GPU use, and a pre-warmed
  server nobody opened 15 min after class start (09:15 UTC); warning 10 min ahead.
- gpu-anytime, a standing profile for everyone, reclaims after 1 h idle, warning 5 min.
- protein-lab, a research allocation of rita's (and root's), expired on Sunday 2 March:
  it ended at midnight in Zurich, 23:00 UTC on Sunday.
"""

from __future__ import annotations

from datetime import datetime

from gpuspawner.policy.capacity import Allocation
from gpuspawner.policy.prewarm import prewarm_token

from .scenario import SECRET, hub_server, hub_time

RECLAIM_CATALOG_YAML = """\
settings:
  timezone: Europe/Zurich
standing:
  - id: cpu
    title: CPU only
    default: true
  - id: gpu-anytime
    title: GPU any time
    gpu: {fraction: 1/4}
    reclaim: {idle_after: 1h, warning: 5m}
courses:
  - id: ml101
    title: Machine Learning 101
    instructors: [prof]
    enrolment: {users: [alice, bob, carol, dave]}
    gpu: {fraction: 1/4}
    schedule:
      term: {first_day: 2025-02-17, last_day: 2025-06-01}
      windows: [{day: Mon, start: "10:00", end: "12:00"}]
      lead_time: 10m
      grace: 15m
      prewarm: 30m
    reclaim: {idle_after: 30m, warning: 10m, unopened_after: 15m}
research:
  - id: protein-lab
    title: Protein folding lab
    users: [rita, root]
    gpu: {fraction: 1/2}
    expires: 2025-03-02
"""


def gpu_server(
    user: str,
    profile: str,
    started: datetime,
    *,
    name: str = "",
    last_activity: datetime | None = None,
    prewarmed_for: datetime | None = None,
) -> dict:
    """A running server of ``profile``; ``prewarmed_for``: started by the service for
    the class at that time (its user options carry the pre-warm token)."""
    server = hub_server(user, name, profile=profile, started=started)
    if last_activity is not None:
        server["last_activity"] = hub_time(last_activity)
    if prewarmed_for is not None:
        token = prewarm_token(SECRET, user, name, profile, prewarmed_for)
        server["user_options"] = {"profile": profile, "prewarm_token": token}
    return server


def server_allocation(user: str, profile: str, course: str | None, device: str) -> Allocation:
    """The allocation of a user's default server: a quarter of ``device``."""
    from fractions import Fraction

    return Allocation(
        key=f"server:{user}/",
        owner=user,
        profile_id=profile,
        course_id=course,
        device_ids=(device,),
        fraction=Fraction(1, 4),
        memory_mib=6144,
        compute_min_pct=0,
    )
