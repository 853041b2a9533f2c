"""The authorization rules of the job service, as a matrix over callers and job owners.

Pure: no hub, no HTTP. tests/jobs_service/test_authorization.py checks the same rules
through a real JupyterHub and every endpoint.
"""

from __future__ import annotations

import pytest

from gpuspawner.policy import load_catalog
from jupyter_to_job.access import (
    Access,
    Caller,
    Roster,
    groups_to_expand,
    job_access,
    job_grants,
    readable_owners,
    teaching_roster,
)
from jupyter_to_job.scopes import READ_JOBS_SCOPE as READ
from jupyter_to_job.scopes import WRITE_JOBS_SCOPE as WRITE

STUDENTS = frozenset({"ml101-students"})
ML101 = Roster(users=frozenset({"carl"}), groups=STUDENTS)


def server_token(name: str) -> frozenset[str]:
    """What the hub reports for a server token: !user resolved, write implying read."""
    return frozenset({f"{READ}!user={name}", f"{WRITE}!user={name}"})


CALLERS = {
    "alice": Caller("alice", groups=STUDENTS, scopes=server_token("alice")),
    "ines": Caller("ines", scopes=server_token("ines")),
    "olga": Caller("olga", scopes=server_token("olga")),
    "root": Caller("root", admin=True, scopes=server_token("root")),
    "tara (read !group=ml101-students)": Caller(
        "tara", scopes=frozenset({f"{READ}!group=ml101-students"})
    ),
    "staff (unfiltered write)": Caller("staff", scopes=frozenset({WRITE})),
    "auditor (unfiltered read)": Caller("auditor", scopes=frozenset({READ})),
    "root without job scopes": Caller("root", admin=True, scopes=frozenset()),
    "a service with unfiltered read": Caller("grader", kind="service", scopes=frozenset({READ})),
    "a service marked admin, own scopes only": Caller(
        "svc", kind="service", admin=True, scopes=server_token("svc")
    ),
}
ROSTERS = {"ines": ML101}

# (caller, owner of the job, owner's groups) -> what the caller may do
MATRIX = [
    ("alice", "alice", STUDENTS, Access.WRITE),
    ("alice", "bob", STUDENTS, Access.NONE),
    ("ines", "bob", STUDENTS, Access.READ),  # instructor of bob's course, through the group
    ("ines", "carl", frozenset(), Access.READ),  # enrolled by name
    ("ines", "dora", frozenset(), Access.NONE),  # not her student
    ("ines", "ines", frozenset(), Access.WRITE),
    ("olga", "bob", STUDENTS, Access.NONE),
    ("root", "bob", STUDENTS, Access.WRITE),  # hub admins read, stop and delete every job
    ("root", "root", frozenset(), Access.WRITE),
    ("tara (read !group=ml101-students)", "bob", STUDENTS, Access.READ),
    ("tara (read !group=ml101-students)", "dora", frozenset(), Access.NONE),
    ("tara (read !group=ml101-students)", "tara", frozenset(), Access.NONE),
    ("staff (unfiltered write)", "bob", STUDENTS, Access.WRITE),
    ("auditor (unfiltered read)", "bob", STUDENTS, Access.READ),
    ("root without job scopes", "bob", STUDENTS, Access.NONE),
    ("a service with unfiltered read", "bob", STUDENTS, Access.READ),
    ("a service marked admin, own scopes only", "bob", STUDENTS, Access.NONE),
]


@pytest.mark.parametrize(("who", "owner", "owner_groups", "expected"), MATRIX)
def test_what_a_caller_may_do_with_a_job(who, owner, owner_groups, expected):
    caller = CALLERS[who]
    assert job_access(caller, owner, owner_groups, ROSTERS.get(caller.name, Roster())) is expected


def test_an_instructor_never_writes_their_students_jobs_even_with_read_and_write_scopes():
    ines = Caller("ines", scopes=frozenset({f"{WRITE}!user=ines"}))
    assert job_access(ines, "bob", STUDENTS, ML101) is Access.READ


def test_write_scopes_imply_read_and_filters_stay_apart():
    grants = job_grants(
        {
            f"{WRITE}!user=alice",
            f"{READ}!group=tas",
            "access:services!service=jupyter-to-job",
            f"{READ}!server=alice/",  # names no user or group: covers nothing
        }
    )
    assert grants[Access.WRITE].users == {"alice"} and not grants[Access.WRITE].groups
    assert grants[Access.READ].users == {"alice"} and grants[Access.READ].groups == {"tas"}
    assert not grants[Access.READ].everyone


def test_listings_show_the_owners_a_caller_may_read():
    members = {"ml101-students": frozenset({"alice", "bob"})}
    ines = CALLERS["ines"]
    assert groups_to_expand(ines, ML101) == {"ml101-students"}
    assert readable_owners(ines, ML101, members) == {"ines", "carl", "alice", "bob"}
    assert readable_owners(CALLERS["alice"]) == {"alice"}
    assert readable_owners(CALLERS["root"]) is None  # everyone's
    assert readable_owners(CALLERS["auditor (unfiltered read)"]) is None
    assert readable_owners(CALLERS["root without job scopes"]) == frozenset()
    tara = CALLERS["tara (read !group=ml101-students)"]
    assert readable_owners(tara, Roster(), members) == {"alice", "bob"}


def test_the_roster_comes_from_the_catalog_instructors_and_enrolment(tmp_path):
    (tmp_path / "catalog.yaml").write_text(
        """\
courses:
  - id: ml101
    title: ML 101
    instructors: [ines]
    enrolment: {users: [carl], groups: [ml101-students]}
    schedule:
      timezone: UTC
      term: {first_day: 2026-01-05, last_day: 2026-06-30}
      windows: [{day: Mon, start: "10:00", end: "12:00"}]
  - id: phys201
    title: Physics
    instructors: [olga]
    enrolment: {users: [pete]}
    schedule:
      timezone: UTC
      term: {first_day: 2026-01-05, last_day: 2026-06-30}
      windows: [{day: Tue, start: "10:00", end: "12:00"}]
"""
    )
    catalog = load_catalog(tmp_path / "catalog.yaml")
    # Each course's own groups (settings.course_groups, filled by single sign-on) count too
    ml101 = Roster(ML101.users, ML101.groups | {"course-ml101-students"})
    phys201 = Roster(frozenset({"pete"}), frozenset({"course-phys201-students"}))
    assert teaching_roster(catalog, "ines") == ml101
    assert teaching_roster(catalog, "olga") == phys201
    assert not teaching_roster(catalog, "alice")
    assert not teaching_roster(None, "ines")
    # An instructor through the course's instructor group, as the identity provider says
    assert teaching_roster(catalog, "ivan", frozenset({"course-phys201-instructors"})) == phys201
    assert not teaching_roster(catalog, "ivan", frozenset({"course-phys201-students"}))


def test_the_caller_comes_from_the_hub_user_model():
    caller = Caller.from_hub_model(
        {
            "kind": "user",
            "name": "alice",
            "admin": False,
            "groups": ["ml101-students"],
            "scopes": sorted(server_token("alice") | {"access:services!service=jupyter-to-job"}),
        }
    )
    assert caller.identity.name == "alice" and caller.identity.groups == STUDENTS
    assert caller.holds(Access.WRITE) and caller.holds(Access.READ)
