"""The course-sessions service's GPU-hour report (``api/usage``): hub admins read every
course's, instructors only their own courses', students none; JSON or CSV."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest
from tornado.httpclient import AsyncHTTPClient

from gpuspawner.accounting.intervals import UsageInterval
from gpuspawner.accounting.store import UsageStore
from tests.support.course_api_server import ACCESS, serve_course_api

MONDAY = datetime(2026, 10, 5, 8, 0, tzinfo=UTC)
CATALOG = """\
courses:
  - id: cs101
    title: CS101
    instructors: [prof]
    enrolment: {users: [ana]}
    schedule: &term
      timezone: UTC
      term: {first_day: 2026-09-01, last_day: 2026-12-31}
      windows: [{day: Mon, start: "10:00", end: "12:00"}]
  - id: cs102
    title: CS102
    instructors: [olga]
    enrolment: {users: [ben]}
    schedule: *term
"""
TOKENS = {
    "root-token": {"kind": "user", "name": "root", "admin": True, "scopes": [ACCESS]},
    "prof-token": {"kind": "user", "name": "prof", "scopes": [ACCESS]},
    "ana-token": {"kind": "user", "name": "ana", "scopes": [ACCESS]},
}


def used(owner: str, share: Fraction, hours: int, *, course=None, allocation=None):
    return UsageInterval(
        key=f"server:{owner}/",
        kind="server",
        owner=owner,
        name="",
        profile=course or allocation,
        share=share,
        started=MONDAY,
        ended=MONDAY + timedelta(hours=hours),
        course=course,
        allocation=allocation,
    )


@pytest.fixture
async def usage_api(tmp_path):
    """The service's course API on a free port, over a usage record of three servers."""
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(CATALOG)
    store = UsageStore(f"sqlite:///{tmp_path / 'usage.sqlite'}")
    for interval in (
        used("ana", Fraction(1, 4), 4, course="cs101"),
        used("ben", Fraction(1, 2), 2, course="cs102"),
        used("rex", Fraction(1), 1, allocation="vision"),
    ):
        store.open(interval)
        store.close_interval(interval.key, interval.ended)
    api, server = serve_course_api(catalog, TOKENS, lambda: MONDAY + timedelta(days=1), usage=store)
    base = f"{api}usage"

    async def get(token: str, query: str):
        response = await AsyncHTTPClient().fetch(
            f"{base}?{query}", headers={"Authorization": f"token {token}"}, raise_error=False
        )
        return response

    yield get
    server.stop()
    store.close()


async def test_an_admin_reads_every_course_and_an_instructor_only_theirs(usage_api):
    week = "from=2026-10-05&to=2026-10-11"

    # When the hub admin asks for the week by course
    answer = await usage_api("root-token", f"{week}&by=course")
    rows = {
        row["course"]: Fraction(row["gpu_hours_exact"]) for row in json.loads(answer.body)["rows"]
    }

    # Then every course is there, and the research server under its allocation's name
    assert answer.code == 200
    assert rows == {"cs101": 1, "cs102": 1, "research allocation vision": 1}

    # When CS101's instructor asks by user
    answer = await usage_api("prof-token", f"{week}&by=user")

    # Then only the GPU-hours of CS101 are in it
    body = json.loads(answer.body)
    assert [(row["user"], row["gpu_hours"]) for row in body["rows"]] == [("ana", "1.000000")]
    assert body["total"]["gpu_hours_exact"] == "1"


async def test_the_report_comes_as_csv_for_spreadsheets(usage_api):
    answer = await usage_api("root-token", "from=2026-10-05&to=2026-10-05&by=user&format=csv")
    assert answer.code == 200
    assert answer.headers["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(answer.body.decode())))
    assert {row["user"]: row["gpu_hours_exact"] for row in rows} == {
        "ana": "1",
        "ben": "1",
        "rex": "1",
    }


@pytest.mark.parametrize(
    "token, query, status, reason",
    [
        ("ana-token", "from=2026-10-05&to=2026-10-11", 403, "not-instructor"),
        ("prof-token", "from=2026-10-05&to=2026-10-11&course=cs102", 403, "not-instructor"),
        ("root-token", "from=5%20October&to=2026-10-11", 400, "bad-request"),
        ("root-token", "to=2026-10-11", 400, "bad-request"),
        ("nobody", "from=2026-10-05&to=2026-10-11", 401, "bad-token"),
    ],
)
async def test_who_may_not_read_a_report_is_told_why(usage_api, token, query, status, reason):
    answer = await usage_api(token, query)
    body = json.loads(answer.body)
    assert (answer.code, body["reason"]) == (status, reason)
    assert body["message"].endswith(".")
    assert "--" not in body["message"]


async def test_a_report_without_its_days_says_what_to_add_to_the_address(usage_api):
    # When an admin opens the report without saying which days
    answer = await usage_api("root-token", "to=2026-10-11")

    # Then the refusal speaks of the address, not of the command's options
    assert answer.code == 400
    assert json.loads(answer.body)["message"] == (
        "Say which days the report covers: add from=DATE&to=DATE to the address (dates "
        "such as 2026-09-14, both days included), or term=NAME for a term of the catalog "
        "or a course's term."
    )
