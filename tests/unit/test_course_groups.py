"""Course groups: enrolment and teaching through hub groups (filled by single sign-on),
the groups a campus login keeps, and the instructor roles built from the catalog."""

from __future__ import annotations

import pytest
from jupyterhub.scopes import _check_scopes_exist, expand_scopes

from gpuspawner.policy import CatalogError, Role, UserIdentity, evaluate
from gpuspawner.policy.flavors import flavor_for
from gpuspawner.policy.idp_groups import GroupMapping
from gpuspawner.policy.roles import (
    JOB_SERVICE,
    READ_JOBS_SCOPE,
    course_roles,
    instructor_role_name,
)
from gpuspawner.sessions.plan import plan_actions
from jupyter_to_job import scopes as job_scopes

from .conftest import UTC, at

CATALOG = """\
    courses:
      - id: ml101
        title: Machine Learning 101
        instructors: [prof]
        enrolment: {users: [carl], groups: [ml101-legacy]}
        gpu: {fraction: 1/4}
        instructors_anytime: true
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
    research:
      - id: vision
        title: Vision lab
        groups: [vision-lab]
        expires: 2030-01-01
    standing:
      - id: club
        title: GPU club
        groups: [gpu-club]
    flavors:
      - id: course-gpu
        title: Course GPU
        gpu: {fraction: 1/4}
        access: {courses: [ml101]}
      - id: staff-cpu
        title: Staff CPU
        access: {groups: [staff-jobs]}
"""
MONDAY_NINE = at("2024-03-18 09:00", UTC)  # before class: only instructors may start


def ids(entitlements, available=None):
    return [e.profile.id for e in entitlements if available is None or e.available is available]


def test_each_course_has_a_student_and_an_instructor_group_by_default(catalog_from):
    catalog = catalog_from(CATALOG)
    ml101, phys201 = catalog.courses
    assert catalog.student_groups(ml101) == ("ml101-legacy", "course-ml101-students")
    assert catalog.instructor_groups(phys201) == ("course-phys201-instructors",)
    assert catalog.takes(phys201, "dora", {"course-phys201-students"})
    assert not catalog.takes(phys201, "dora", {"course-ml101-students"})
    assert catalog.teaches(phys201, "ivan", frozenset({"course-phys201-instructors"}))
    assert not catalog.teaches(phys201, "ivan", frozenset({"course-phys201-students"}))
    assert catalog.teaches(ml101, "prof", frozenset())  # by name, as before


def test_a_student_through_the_course_group_sees_the_course_as_a_student(catalog_from):
    catalog = catalog_from(CATALOG)
    seen = evaluate(
        catalog, UserIdentity("dora", frozenset({"course-ml101-students"})), MONDAY_NINE
    )
    assert ids(seen) == ["ml101"]
    assert seen[0].role is Role.STUDENT and not seen[0].available  # class is at 10:00


def test_an_instructor_through_the_course_group_starts_it_any_time_in_term(catalog_from):
    catalog = catalog_from(CATALOG)
    ivan = UserIdentity("ivan", frozenset({"course-ml101-instructors"}))
    seen = evaluate(catalog, ivan, MONDAY_NINE)
    assert ids(seen, available=True) == ["ml101"]
    assert seen[0].role is Role.INSTRUCTOR
    # An admin who also teaches it is shown as its instructor, the other course as admin
    admin = evaluate(
        catalog, UserIdentity("ada", frozenset({"course-ml101-instructors"}), True), MONDAY_NINE
    )
    assert [(e.profile.id, e.role) for e in admin if e.profile.kind.value == "course"] == [
        ("ml101", Role.INSTRUCTOR),
        ("phys201", Role.ADMIN),
    ]


def test_research_allocations_and_flavors_follow_groups(catalog_from):
    catalog = catalog_from(CATALOG)
    researcher = UserIdentity("rhea", frozenset({"vision-lab"}))
    assert ids(evaluate(catalog, researcher, MONDAY_NINE)) == ["vision"]
    assert ids(evaluate(catalog, UserIdentity("rhea"), MONDAY_NINE)) == []
    student = UserIdentity("dora", frozenset({"course-ml101-students"}))
    assert flavor_for(catalog, student, "course-gpu", MONDAY_NINE).available
    stranger = UserIdentity("eve", frozenset({"course-phys201-students"}))
    assert not flavor_for(catalog, stranger, "course-gpu", MONDAY_NINE).available


def test_course_groups_can_be_renamed_or_turned_off(catalog_from):
    renamed = catalog_from(
        CATALOG
        + """\
    settings:
      course_groups: {students: "{course}", instructors: null}
"""
    )
    phys201 = renamed.courses_by_id["phys201"]
    assert renamed.student_groups(phys201) == ("phys201",)
    assert renamed.instructor_groups(phys201) == ()
    assert not renamed.teaches(phys201, "ivan", frozenset({"course-phys201-instructors"}))


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("students-of-ml", "containing {course}"),
        ("{course}-{term}", "no other placeholder than {course}"),
        ("{course", "containing {course}"),
    ],
)
def test_a_bad_group_template_is_a_located_error(write_yaml, template, message):
    from gpuspawner.policy import load_catalog

    path = write_yaml(
        f"""\
        settings:
          course_groups:
            students: "{template}"
        """
    )
    with pytest.raises(CatalogError) as caught:
        load_catalog(path)
    (problem,) = caught.value.problems
    assert (problem.line, problem.field) == (3, "settings.course_groups.students")
    assert message in problem.message


def test_the_sessions_service_never_reclaims_a_server_of_an_instructor_through_a_group(
    catalog_from,
):
    catalog = catalog_from(CATALOG)
    after_class = at("2024-03-18 13:00", UTC)

    def user(name, groups):
        server = {"started": "2024-03-18T10:05:00Z", "user_options": {"profile": "ml101"}}
        return {"name": name, "groups": groups, "servers": {"": server}}

    users = [user("ivan", ["course-ml101-instructors"]), user("dora", ["course-ml101-students"])]
    plan = plan_actions(catalog, users, {}, after_class, None, set())
    assert [(a.kind.value, a.user) for a in plan] == [("reclaim", "dora")]


# -- the groups a campus login keeps ----------------------------------------------------


def test_a_login_keeps_role_groups_catalog_groups_aliases_and_patterns(catalog_from):
    catalog = catalog_from(CATALOG)
    mapping = GroupMapping.build(
        aliases={"/staff/hpc": "admins", "0f3c-guid": ["students", "course-phys201-students"]},
        keep={"students", "instructors", "researchers", "admins"},
        patterns=[r"lab-[a-z]+"],
    )
    claimed = [
        "students",
        "course-ml101-students",  # the course's group
        "vision-lab",  # a research allocation's group
        "gpu-club",  # a standing profile's group
        "staff-jobs",  # a flavor's group
        "/staff/hpc",
        "0f3c-guid",
        "lab-optics",
        "all-staff-mailing-list",
        "lab-Optics2",
        17,
    ]
    mapped = mapping.map(claimed, catalog.known_groups())
    assert mapped.kept == {
        "students",
        "course-ml101-students",
        "vision-lab",
        "gpu-club",
        "staff-jobs",
        "admins",
        "course-phys201-students",
        "lab-optics",
    }
    assert mapped.dropped == {"all-staff-mailing-list", "lab-Optics2", "17"}


def test_a_bad_keep_pattern_is_named():
    with pytest.raises(ValueError, match=r"'lab-\(' is not a regular expression"):
        GroupMapping.build(patterns=["lab-("])


# -- instructor roles ---------------------------------------------------------------------


def test_each_course_with_instructors_gets_a_least_privilege_role(catalog_from):
    catalog = catalog_from(CATALOG)
    ml101, phys201 = course_roles(catalog)
    assert ml101["name"] == instructor_role_name(catalog.courses[0]) == "course-ml101-instructor"
    assert ml101["users"] == ["prof"]
    assert ml101["groups"] == ["course-ml101-instructors"]
    assert phys201["users"] == [] and phys201["groups"] == ["course-phys201-instructors"]
    # JupyterHub knows every scope (the job service's are defined by the hub at start)
    hub_scopes = [scope for scope in ml101["scopes"] if not scope.startswith("custom:")]
    _check_scopes_exist(hub_scopes)
    expanded = expand_scopes(hub_scopes) | set(ml101["scopes"])
    students = ("!group=ml101-legacy", "!group=course-ml101-students", "!user=carl")
    for selector in students:
        assert "delete:servers" + selector in expanded
        assert "read:servers" + selector in expanded
        assert READ_JOBS_SCOPE + selector in ml101["scopes"]
    # Never more than seeing and stopping: no start, no access, no account changes, no
    # write on jobs, and nothing unfiltered apart from the admin page itself.
    bases = {scope.partition("!")[0] for scope in expanded}
    assert not bases & {
        "start:servers",
        "access:servers",
        "admin:users",
        "admin:servers",
        "users",
        "tokens",
        "read:tokens",
        "admin:auth_state",
        job_scopes.WRITE_JOBS_SCOPE,
    }
    unfiltered = {scope for scope in expanded if "!" not in scope}
    assert unfiltered == {"admin-ui"}
    assert f"access:services!service={JOB_SERVICE}" in ml101["scopes"]


def test_a_hub_without_the_job_service_gets_no_job_scopes(catalog_from):
    (ml101, _) = course_roles(catalog_from(CATALOG), job_service=None)
    assert not [scope for scope in ml101["scopes"] if "jupyter-to-job" in scope]


def test_a_course_without_students_or_instructors_gets_no_role(catalog_from):
    catalog = catalog_from(
        CATALOG
        + """\
    settings:
      course_groups: {students: null, instructors: null}
"""
    )
    assert [role["name"] for role in course_roles(catalog)] == ["course-ml101-instructor"]


def test_the_role_module_names_the_job_service_as_the_service_does():
    assert JOB_SERVICE == job_scopes.SERVICE_NAME
    assert READ_JOBS_SCOPE == job_scopes.READ_JOBS_SCOPE
