"""An instructor's extension in the service's rounds, on a clock the test moves.

The week of scenario.py: ml101 meets Monday 3 March 2025 09:00-11:00 UTC with 15 minutes of
grace, so a student's server is planned to stop at 11:15. The instructor extends alice's
server by 15 minutes as the course page does (the overrides file, through
:class:`CourseChanges`); the service then warns at 11:20 and stops it at 11:30, not at 11:15,
and tells her server (api/reclaim's ``session_ends``, what the lab's countdown reads) the
new end. The hub is the REST stand-in of fake_hub.py; the real hub is in
tests/integration/test_course_page.py.
"""

from __future__ import annotations

import json

from gpuspawner.policy.course_overrides import extension_change
from gpuspawner.sessions.audit import AuditLog
from gpuspawner.sessions.course_changes import CourseChanges
from gpuspawner.sessions.hub_client import HubClient
from gpuspawner.sessions.plan import session_end_of
from gpuspawner.sessions.service import SessionsService
from gpuspawner.sessions.watched_catalog import WatchedCatalog

from .fake_hub import FakeHub
from .scenario import CATALOG_YAML, hub_server, hub_user, utc

TOKEN = "service-token-123"
BOUNDS = """\
settings:
  timezone: Europe/Zurich
  instructor_bounds:
    overrides_file: overrides.json
    extension: 30m
"""


class Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


def audit(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_an_extended_server_is_stopped_15_minutes_later_than_planned(tmp_path):
    catalog_path = tmp_path / "catalog.yaml"
    catalog_path.write_text(CATALOG_YAML.replace("settings:\n  timezone: Europe/Zurich\n", BOUNDS))
    started = utc(3, 8, 55)
    users = [
        hub_user("alice", hub_server("alice", profile="ml101", started=started)),
        hub_user("bob", hub_server("bob", profile="ml101", started=started)),
    ]
    hub = FakeHub(token=TOKEN, users={u["name"]: u for u in users}, now=started)
    clock = Clock(utc(3, 10, 0))
    audit_path = tmp_path / "audit.jsonl"
    log = AuditLog(audit_path)
    async with hub.serving() as api_url:
        service = SessionsService(
            HubClient(api_url, TOKEN), WatchedCatalog(catalog_path, log), log, clock=clock
        )
        # Given the instructor extends alice's server by 15 minutes at 10:00
        catalog = service.catalog.current(clock.now)
        course = catalog.courses_by_id["ml101"]
        CourseChanges(log).change(
            catalog,
            course,
            by="prof",
            now=clock.now,
            action="instructor-extend",
            detail="prof extended alice's Machine Learning 101 server by 15 minutes.",
            update=lambda o: extension_change(
                catalog.settings.instructor_bounds, o, "alice", "", started, 15
            ),
            user="alice",
            server="",
        )
        # Then her server's end is 11:30, bob's stays 11:15
        catalog = service.catalog.current(clock.now)
        assert session_end_of(catalog, hub.users["alice"], "") == utc(3, 11, 30)
        assert session_end_of(catalog, hub.users["bob"], "") == utc(3, 11, 15)

        # When the service runs its rounds at the planned end and after
        for minute in (15, 16, 20):
            clock.now = utc(3, 11, minute)
            await service.tick()
        # Then only bob's server is stopped at 11:15; alice is warned at 11:20
        assert [r.path for r in hub.calls("DELETE")] == ["/hub/api/users/bob/server"]
        warned = [e for e in audit(audit_path) if e["action"] == "warn" and e["user"] == "alice"]
        assert [e["time"] for e in warned] == [utc(3, 11, 20).isoformat()]
        assert "stopped at 12:30" in warned[0]["detail"]  # Zurich time, UTC+1

        # And at 11:30 hers is stopped, the reason naming the extension
        clock.now = utc(3, 11, 30)
        await service.tick()
        assert [r.path for r in hub.calls("DELETE")] == [
            "/hub/api/users/bob/server",
            "/hub/api/users/alice/server",
        ]
    entries = audit(audit_path)
    extended = next(e for e in entries if e["action"] == "instructor-extend")
    assert (extended["by"], extended["user"]) == ("prof", "alice")
    (reclaim,) = [e for e in entries if e["action"] == "reclaim" and e["user"] == "alice"]
    assert "extended by its instructor by 15 min" in reclaim["detail"]
