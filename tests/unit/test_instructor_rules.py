"""The instructors' course API decides by the course a server runs and who teaches it
(gpuspawner/policy/instructors.py)."""

from __future__ import annotations

import textwrap

import pytest

from gpuspawner.policy import UserIdentity, load_catalog
from gpuspawner.policy.instructors import InstructorRefusal as Refused
from gpuspawner.policy.instructors import (
    course_to_manage,
    server_to_stop,
    servers_of_course,
    taught_courses,
)

CATALOG = """\
    courses:
      - id: ml101
        title: ML 101
        instructors: [prof]
        schedule:
          timezone: UTC
          term: {first_day: 2024-02-19, last_day: 2024-06-01}
          windows: [{day: Mon, start: "10:00", end: "12:00"}]
      - id: phys201
        title: Physics 201
        schedule:
          timezone: UTC
          term: {first_day: 2024-02-19, last_day: 2024-06-01}
          windows: [{day: Tue, start: "10:00", end: "12:00"}]
"""
PROF = UserIdentity("prof")
IVAN = UserIdentity("ivan", frozenset({"course-phys201-instructors"}))
BOTH = UserIdentity("bea", frozenset({"course-ml101-instructors", "course-phys201-instructors"}))
ADMIN = UserIdentity("root", admin=True)
STUDENT = UserIdentity("stu", frozenset({"course-ml101-students"}))


def user(name: str, **servers: str) -> dict:
    return {
        "name": name,
        "servers": {
            ("" if key == "default" else key): {"user_options": {"profile": profile}}
            for key, profile in servers.items()
        },
    }


@pytest.fixture
def catalog(tmp_path):
    path = tmp_path / "courses.yaml"
    path.write_text(textwrap.dedent(CATALOG))
    return load_catalog(path)


def test_who_manages_which_course(catalog):
    assert [c.id for c in taught_courses(catalog, PROF)] == ["ml101"]
    assert [c.id for c in taught_courses(catalog, IVAN)] == ["phys201"]
    assert [c.id for c in taught_courses(catalog, ADMIN)] == ["ml101", "phys201"]
    assert taught_courses(catalog, STUDENT) == []
    with pytest.raises(Refused) as refused:
        course_to_manage(catalog, PROF, "phys201")
    assert (refused.value.status, refused.value.reason) == (403, "not-your-course")
    with pytest.raises(Refused) as missing:
        course_to_manage(catalog, ADMIN, "nope")
    assert missing.value.status == 404


def test_a_course_lists_only_the_servers_running_it(catalog):
    users = [user("zoe", default="ml101", extra="phys201"), user("amy", default="cpu")]
    listed = servers_of_course(catalog.courses_by_id["ml101"], users)
    assert [(s["user"], s["server"]) for s in listed] == [("zoe", "")]


@pytest.mark.parametrize(
    ("caller", "course", "server", "status"),
    [
        (PROF, "ml101", "default", None),  # hers, running her course
        (PROF, "ml101", "extra", 403),  # zoe's PHYS201 server: not hers
        (BOTH, "ml101", "extra", 409),  # she teaches both: the URL names the wrong one
        (PROF, "ml101", "missing", 404),
        (ADMIN, "phys201", "extra", None),
    ],
)
def test_stopping_checks_the_course_the_server_runs(catalog, caller, course, server, status):
    zoe = user("zoe", default="ml101", extra="phys201")
    name = "" if server == "default" else server
    if status is None:
        server_to_stop(catalog, caller, catalog.courses_by_id[course], zoe, "zoe", name)
        return
    with pytest.raises(Refused) as refused:
        server_to_stop(catalog, caller, catalog.courses_by_id[course], zoe, "zoe", name)
    assert refused.value.status == status
    assert refused.value.message.endswith(".")
