"""The instructors' JSON course API (``api/courses``) lists each taught course with the
instructors' changes in force, in the words ``gpuspawner check`` prints."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import pytest
from tornado.httpclient import AsyncHTTPClient

from gpuspawner.cli import main as gpuspawner
from gpuspawner.policy import load_catalog
from gpuspawner.policy.course_overrides import (
    ExtraSession,
    cancel_change,
    extension_change,
    extra_change,
    notice_change,
    timing_change,
)
from gpuspawner.sessions.audit import AuditLog
from gpuspawner.sessions.course_changes import CourseChanges
from tests.support.course_api_server import ACCESS, serve_course_api

# Wednesday 25 November 2026, 13:00 in Zurich: the next ML101 class is Monday 30 November.
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
MONDAY = date(2026, 11, 30)
CATALOG = """\
settings:
  timezone: Europe/Zurich
  instructor_bounds:
    overrides_file: overrides.json
    extra_sessions_per_week: 1
    lead_time: {min: 0m, max: 30m}
    extension: 30m
courses:
  - id: ml101
    title: Machine Learning 101
    instructors: [bob]
    enrolment: {users: [alice]}
    schedule: &term
      term: {first_day: 2026-09-14, last_day: 2026-12-18}
      windows:
        - {days: [Mon, Wed], start: "10:15", end: "12:00"}
  - id: cs102
    title: CS102
    instructors: [olga]
    enrolment: {users: [ben]}
    schedule: *term
"""
TOKENS = {
    "bob-token": {"kind": "user", "name": "bob", "scopes": [ACCESS]},
    "olga-token": {"kind": "user", "name": "olga", "scopes": [ACCESS]},
}


@pytest.fixture
async def courses_api(tmp_path: Path):
    """``GET api/courses`` of the service's course API on a free port, over the catalog in
    ``tmp_path`` (its overrides file beside it)."""
    (tmp_path / "catalog.yaml").write_text(CATALOG)
    api, server = serve_course_api(tmp_path / "catalog.yaml", TOKENS, lambda: NOW)
    url = f"{api}courses"

    async def courses(token: str) -> list[dict]:
        response = await AsyncHTTPClient().fetch(url, headers={"Authorization": f"token {token}"})
        return json.loads(response.body)["courses"]

    yield courses
    server.stop()


def bob_changes_ml101(folder: Path) -> None:
    """Bob, on the course page: cancels Monday's class, adds a Friday session, sets the lead
    time to 20 minutes, posts a notice and extends alice's server twice (saved and audited
    by the service's writer, as the page saves them)."""
    changes = CourseChanges(AuditLog(None))
    started = datetime(2026, 11, 25, 9, 10, tzinfo=UTC)
    friday = ExtraSession(day=date(2026, 11, 27), start=time(14), end=time(16))
    for update in (
        lambda o, c, b: cancel_change(c, b, o, MONDAY, NOW),
        lambda o, c, b: extra_change(c, b, o, friday, NOW),
        lambda o, c, b: timing_change(b, o, "lead_time", timedelta(minutes=20)),
        lambda o, c, b: notice_change(b, o, "Bring your laptop charger."),
        lambda o, c, b: extension_change(b, o, "alice", "", started, 10),
        lambda o, c, b: extension_change(b, o, "alice", "", started, 5),
    ):
        catalog = load_catalog(folder)
        course = catalog.courses_by_id["ml101"]
        bounds = catalog.settings.instructor_bounds
        changes.change(
            catalog,
            course,
            by="bob",
            now=NOW,
            action="instructor-change",
            detail="bob changed ML101.",
            update=lambda o, course=course, bounds=bounds, update=update: update(o, course, bounds),
        )


async def test_the_course_api_lists_the_instructors_changes_in_force(
    courses_api, tmp_path, capsys
) -> None:
    # Given a course with no changes yet, the API says so
    [before] = await courses_api("bob-token")
    assert before == {"id": "ml101", "title": "Machine Learning 101", "changes": []}

    # when bob changes ML101 on the course page
    bob_changes_ml101(tmp_path)

    # then the API lists each change in force, at once (no restart) ...
    [ml101] = await courses_api("bob-token")
    assert ml101["id"] == "ml101"
    assert [(c["kind"], c["value"]) for c in ml101["changes"]] == [
        ("cancelled", "2026-11-30"),
        ("extra", {"day": "2026-11-27", "start": "14:00", "end": "16:00"}),
        ("lead_time", 20),
        ("notice", "Bring your laptop charger."),
        (
            "extended",
            [
                {
                    "user": "alice",
                    "server": "",
                    "started": "2026-11-25T09:10:00+00:00",
                    "minutes": 15,
                }
            ],
        ),
    ]
    # ... in the very words gpuspawner check prints for the course
    texts = [c["text"] for c in ml101["changes"]]
    assert texts == [
        "cancelled Mon 30 Nov 2026",
        "extra session Fri 27 Nov 2026 14:00-16:00",
        "lead time 20 minutes",
        "notice 'Bring your laptop charger.'",
        "1 server extended",
    ]
    assert gpuspawner(["check", str(tmp_path), "--from", "2026-11-30T00:00"]) == 0
    assert "Instructors: changed on the course page: " + "; ".join(texts) in capsys.readouterr().out

    # and olga, who teaches only CS102, sees her course unchanged and nothing of ML101's
    assert await courses_api("olga-token") == [{"id": "cs102", "title": "CS102", "changes": []}]
