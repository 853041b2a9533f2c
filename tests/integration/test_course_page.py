"""The course page on a real hub: an instructor extends a student's server.

Given a class that ends in two minutes with no grace, an instructor (named in the catalog,
with no hub role for the course: the service decides who teaches) and a student whose
course server runs, with the Run as Job server extension that feeds the lab's countdown.
The instructor extends the server by 15 minutes on the course page; the page, the
service's owner API and the student's own server (``jupyter-to-job/api/session``, what the
countdown reads) all tell the new end, the audit log names the instructor, and the
service does not stop the server at the planned end; the student's home page on the hub
shows the new stop time too. (That it does stop it 15 minutes later is
tests/sessions/test_course_extension.py, on a clock the test moves.) Someone added to the
course's instructor group while the hub runs uses the page at once.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta

import pytest

from ..support.course_catalogs import (
    catalog,
    minute,
    now,
    spawner_config,
    window,
    write_catalog,
)
from ..support.hubprocess import free_loopback_ports

pytestmark = pytest.mark.integration

SERVICE = "/services/course-sessions"
TWO_GPUS = '[{"model": "RTX 4090", "memory": "24GiB", "count": 2}]'


def course_catalog(start: datetime, end: datetime) -> str:
    first_day = (start - timedelta(days=1)).date()
    term = f"{{first_day: {first_day}, last_day: {first_day + timedelta(days=30)}}}"
    courses = f"""\
  - id: ml101
    title: Machine Learning 101
    instructors: [teacher]
    enrolment: {{users: [pia]}}
    gpu: {{fraction: 1/4}}
    max_gpu_servers: 4
    schedule:
      timezone: UTC
      term: {term}
      windows:
        - {window(start, end)}
      lead_time: 10m
      grace: 0m
  - id: cv201
    title: Computer Vision 201
    instructors: [ines]
    enrolment: {{users: [quinn]}}
    schedule:
      timezone: UTC
      term: {term}
      windows:
        - {window(start, end)}
"""
    bounds = """\
settings:
  instructor_bounds:
    overrides_file: overrides.json
    extension: 30m
"""
    return bounds + catalog(courses)


def hub_config(catalog_dir, audit) -> str:
    (port,) = free_loopback_ports(1)
    return spawner_config(
        catalog_dir,
        TWO_GPUS,
        f"""
from gpuspawner.sessions import course_sessions_service, sessions_service_role
from gpuspawner.sessions.registration import reclaim_access_scopes
c.JupyterHub.services.append(course_sessions_service(
    {str(catalog_dir)!r}, interval=1, port={port}, audit_log={str(audit)!r}))
c.JupyterHub.load_roles.append(sessions_service_role())
c.JupyterHub.load_roles.append({{"name": "user", "scopes": ["self", *reclaim_access_scopes()]}})
c.Spawner.server_token_scopes = reclaim_access_scopes()
# A server with the Run as Job extension may take longer than the hub's 10 s to start on a
# loaded machine: answer the start at once (202) instead.
c.JupyterHub.tornado_settings = {{"slow_spawn_timeout": 0}}
# The hub's home page with the server's stop time (gpuspawner's templates).
import gpuspawner
c.JupyterHub.template_paths = [str(Path(gpuspawner.__file__).parent / "templates")]
c.Spawner.args.append("--ServerApp.jpserver_extensions=jupyter_to_job=True")
c.Spawner.environment.update(
    {{"COURSE_SESSIONS_SERVICE_URL": "http://127.0.0.1:{port}/services/course-sessions/"}}
)
""",
    )


def form_xsrf(page_text: str) -> str:
    return re.search(r'name="_xsrf" value="([^"]+)"', page_text).group(1)


def stop_time(moment: datetime) -> str:
    """How the course page writes a server's stop in the course's zone (UTC) before the
    browser tells it in its own: ``<time ...>11:10 UTC</time>``."""
    utc = moment.astimezone(UTC)
    return (
        f'<time datetime="{utc.isoformat()}" data-local-time="clock" '
        f'data-day="{utc.date()}">{utc:%H:%M} UTC</time>'
    )


def audit_entries(path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_an_instructor_extends_a_students_server_by_15_minutes(
    start_hub, browserless_user, tmp_path
):
    t = minute(now())
    start, end = t - timedelta(minutes=30), t + timedelta(minutes=2)
    catalog_dir, audit = tmp_path / "catalog", tmp_path / "audit.jsonl"
    write_catalog(catalog_dir, course_catalog(start, end))
    hub = start_hub(hub_config(catalog_dir, audit))
    pia = browserless_user(hub, "pia")
    assert pia.spawn_via_api({"profile": "ml101"}).status_code in (201, 202)
    pia.wait_ready()
    later = (end + timedelta(minutes=15)).strftime("%H:%M")

    # Given the instructor on the course page, which shows pia's server stopping at class end
    teacher = browserless_user(hub, "teacher")
    teacher.login()
    page = teacher.session.get(f"{hub.url}{SERVICE}/courses", timeout=60)
    assert page.status_code == 200, page.text[:500]
    assert 'data-server-user="pia"' in page.text
    # (a time naming its zone, which the page tells again in its reader's)
    assert f"<td data-stops>{stop_time(end)}" in page.text

    # When the instructor extends it by 15 minutes
    done = teacher.session.post(
        f"{hub.url}{SERVICE}/courses/ml101/extend",
        data={"_xsrf": form_xsrf(page.text), "user": "pia", "server": "", "minutes": "15"},
        timeout=60,
    )

    # Then the page says so and shows the new end
    assert done.status_code == 200, done.text[:500]
    assert "teacher extended pia&#39;s Machine Learning 101 server by 15 minutes" in done.text
    assert f"<td data-stops>{stop_time(end + timedelta(minutes=15))}" in done.text
    # And the audit log names the instructor
    entry = next(e for e in audit_entries(audit) if e["action"] == "instructor-extend")
    assert (entry["by"], entry["user"], entry["course"]) == ("teacher", "pia", "ml101")
    # And the student's server tells the lab's countdown the new end
    session = pia.get_from_server("jupyter-to-job/api/session")
    assert session.status_code == 200, session.text
    assert session.json()["session_end"].startswith(
        (end + timedelta(minutes=15)).strftime("%Y-%m-%dT%H:%M")
    )
    # And so does her home page on the hub
    home = pia.login()
    home_text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", home.text))
    assert f"The hub stops it at {later} UTC" in home_text

    # When a second extension would pass the admins' 30 minutes, it is refused with a sentence
    refused = teacher.session.post(
        f"{hub.url}{SERVICE}/courses/ml101/extend",
        data={"_xsrf": form_xsrf(done.text), "user": "pia", "server": "", "minutes": "20"},
        timeout=60,
    )
    assert refused.status_code == 400
    assert "at most 30 minutes in all" in refused.text

    # And a tampered number, or a form without the page's XSRF token, is refused with a sentence
    huge = teacher.session.post(
        f"{hub.url}{SERVICE}/courses/ml101/extend",
        data={"_xsrf": form_xsrf(done.text), "user": "pia", "minutes": "9" * 30},
        timeout=60,
    )
    assert huge.status_code == 400 and "whole number of minutes" in huge.text
    forged = teacher.session.post(
        f"{hub.url}{SERVICE}/courses/ml101/extend",
        data={"user": "pia", "minutes": "5"},
        timeout=60,
    )
    assert forged.status_code == 403 and "XSRF token did not match" in forged.text

    # And another course's instructor may not extend it (403, with a sentence)
    ines = browserless_user(hub, "ines")
    ines.login()
    own = ines.session.get(f"{hub.url}{SERVICE}/courses", timeout=60)
    assert "Computer Vision 201" in own.text and "Machine Learning 101" not in own.text
    foreign = ines.session.post(
        f"{hub.url}{SERVICE}/courses/ml101/extend",
        data={"_xsrf": form_xsrf(own.text), "user": "pia", "server": "", "minutes": "5"},
        timeout=60,
    )
    assert foreign.status_code == 403
    assert "You do not teach Machine Learning 101" in foreign.text

    # And someone put in the course's instructor group while the hub runs (no hub restart,
    # no hub role) teaches it at once
    tess = browserless_user(hub, "tess")
    tess.login()
    refused_before = tess.session.get(f"{hub.url}{SERVICE}/courses", timeout=60)
    assert refused_before.status_code == 403 and "You teach no course" in refused_before.text
    added = hub.api("POST", "/groups/course-ml101-instructors", json={"users": ["tess"]})
    assert added.status_code in (200, 201), added.text
    hers = tess.session.get(f"{hub.url}{SERVICE}/courses", timeout=60)
    assert hers.status_code == 200 and 'id="course-ml101"' in hers.text

    # And the service lets the planned end pass without stopping the server
    while now() < end + timedelta(seconds=5):
        time.sleep(1)
    time.sleep(3)  # a few of the service's one-second rounds
    assert "" in pia.model()["servers"]
    assert not [e for e in audit_entries(audit) if e["action"] == "reclaim"]
