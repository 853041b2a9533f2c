"""The course-sessions service running as a real hub-managed service.

It pre-warms enrolled students' servers before class (the student could not start
one yet) and stops course servers once class end plus grace has passed, leaving
instructors' servers alone. Both happen on the real clock.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest

from ..support.course_catalogs import catalog, course, minute, now, spawner_config, write_catalog
from ..support.hub_pages import process_environment

pytestmark = pytest.mark.integration

TWO_GPUS = '[{"model": "RTX 4090", "memory": "24GiB", "count": 2}]'
SECRET = "integration-prewarm-secret-0123456789abcdef"


def sessions_config(catalog_dir, audit_log) -> str:
    return f"""
from gpuspawner.sessions import course_sessions_service, sessions_service_role
c.GPUAdmission.prewarm_secret = {SECRET!r}
c.JupyterHub.services.append(course_sessions_service(
    {str(catalog_dir)!r}, prewarm_secret={SECRET!r}, interval=1, audit_log={str(audit_log)!r}))
c.JupyterHub.load_roles.append(sessions_service_role())
"""


def audit_actions(path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for(condition, timeout: float, what: str, hub):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(f"{what} did not happen within {timeout:.0f} s.\n{hub.log_tail(80)}")


def test_servers_are_prewarmed_before_class_that_students_cannot_start_yet(
    start_hub, browserless_user, tmp_path
):
    # Given a class that starts in 4 minutes, a 1-minute lead time and 10 minutes of pre-warming
    t = minute(now())
    start, end = t + timedelta(minutes=4), t + timedelta(minutes=64)
    catalog_dir, audit = tmp_path / "catalog", tmp_path / "audit.jsonl"
    write_catalog(
        catalog_dir,
        catalog(
            course(
                "ml101",
                start=start,
                end=end,
                students=["pia", "quinn"],
                lead="1m",
                prewarm="10m",
                gpu="{fraction: 1/4}",
            )
        ),
    )
    # Quinn exists in the hub; Pia too. Both are enrolled.
    hub = start_hub(spawner_config(catalog_dir, TWO_GPUS, sessions_config(catalog_dir, audit)))
    pia, quinn = browserless_user(hub, "pia"), browserless_user(hub, "quinn")

    # When Quinn tries to start the course herself before the lead time, she is refused
    # (the service and the student race here: if the service was faster, her server is
    # already the pre-warmed one and her request is refused as a duplicate start instead)
    early = quinn.spawn_via_api({"profile": "ml101"})
    assert early.status_code in (400, 403), early.text

    # Then the service starts both students' course servers before class
    for student in (pia, quinn):
        wait_for(
            lambda s=student: s.model()["servers"].get(""), 60, f"{student.name}'s prewarm", hub
        )
        server = student.wait_ready()
        assert server["user_options"]["profile"] == "ml101"
    env = process_environment(hub, "pia")
    assert env["GPUSPAWNER_PROFILE"] == "ml101"
    assert env["GPUSPAWNER_SESSION_END"].startswith(
        (end + timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M")
    )
    started = [a for a in audit_actions(audit) if a["action"] == "prewarm-start"]
    assert sorted(a["user"] for a in started) == ["pia", "quinn"]


def test_course_servers_are_stopped_after_class_end_plus_grace_but_not_the_instructors(
    start_hub, browserless_user, tmp_path
):
    # Given a class that ends at the next-but-one minute with no grace, and a running
    # server for a student and one for the instructor
    t = minute(now())
    end = t + timedelta(minutes=2)
    catalog_dir, audit = tmp_path / "catalog", tmp_path / "audit.jsonl"
    write_catalog(
        catalog_dir,
        catalog(
            course(
                "ml101",
                start=t - timedelta(minutes=30),
                end=end,
                students=["pia"],
                grace="0m",
                gpu="{fraction: 1/4}",
                instructors=("teacher",),
            )
        ),
    )
    hub = start_hub(spawner_config(catalog_dir, TWO_GPUS, sessions_config(catalog_dir, audit)))
    pia, teacher = browserless_user(hub, "pia"), browserless_user(hub, "teacher")
    for person in (pia, teacher):
        assert person.spawn_via_api({"profile": "ml101"}).status_code in (201, 202)
        person.wait_ready()

    # When class ends (the service checks every second)
    wait_for(lambda: "" not in pia.model()["servers"], 200, "reclaiming Pia's server", hub)

    # Then Pia's server was stopped after the end, and the audit log says so
    assert now() >= end
    reclaimed = [a for a in audit_actions(audit) if a["action"] == "reclaim"]
    assert [a["user"] for a in reclaimed] == ["pia"]

    # And the instructor's server keeps running, and its GPU slice alone is still held
    time.sleep(3)
    assert teacher.model()["servers"][""]["ready"] is True
    assert teacher.get_from_server("api/status").status_code == 200
