"""JupyterHub roles built from the catalog: what an instructor may do with their course.

Design notes: docs/design/policy.md, "gpuspawner.policy.roles".
"""

from __future__ import annotations

from collections.abc import Iterable

from .catalog import Catalog
from .catalog_models import Course

# The job service's name and read scope, as jupyter_to_job.scopes defines them (a test
# keeps the two in step; importing that package here would type-check all of it).
JOB_SERVICE = "jupyter-to-job"
SESSIONS_SERVICE = "course-sessions"
READ_JOBS_SCOPE = "custom:jupyter-to-job:read:jobs"

# The scopes an instructor holds over each of their students, and why.
STUDENT_SCOPES = {
    "list:users": "their students on the admin page (implies read:users:name)",
    "read:users:activity": "when each student was last active",
    "read:servers": "which servers run, since when, and with which profile",
    "delete:servers": "stop a student's server (never start one)",
}


def instructor_role_name(course: Course) -> str:
    """``course-<id>-instructor``: the role of ``course``'s instructors."""
    return f"course-{course.id}-instructor"


def student_filters(catalog: Catalog, course: Course) -> list[str]:
    """JupyterHub scope filters that select ``course``'s students."""
    return [f"!group={group}" for group in catalog.student_groups(course)] + [
        f"!user={name}" for name in course.enrolment.users
    ]


def instructor_role(
    catalog: Catalog,
    course: Course,
    *,
    job_service: str | None = JOB_SERVICE,
    sessions_service: str | None = SESSIONS_SERVICE,
) -> dict | None:
    """The role of ``course``'s instructors, or None when it has neither instructors nor
    students to give it meaning."""
    filters = student_filters(catalog, course)
    users = list(dict.fromkeys(course.instructors))
    groups = list(catalog.instructor_groups(course))
    if not filters or not (users or groups):
        return None
    scopes = ["admin-ui"]
    for scope in STUDENT_SCOPES:
        scopes.extend(scope + selector for selector in filters)
    if job_service is not None:
        scopes.append(f"access:services!service={job_service}")
        scopes.extend(READ_JOBS_SCOPE + selector for selector in filters)
    if sessions_service is not None:
        scopes.append(f"access:services!service={sessions_service}")
    return {
        "name": instructor_role_name(course),
        "description": (
            f"Instructors of {course.title}: see and stop their students' servers and read "
            "their Run as Job jobs."
        ),
        "scopes": scopes,
        "users": users,
        "groups": groups,
    }


def course_roles(
    catalog: Catalog,
    *,
    job_service: str | None = JOB_SERVICE,
    sessions_service: str | None = SESSIONS_SERVICE,
    courses: Iterable[Course] | None = None,
) -> list[dict]:
    """The instructor role of every course (``courses``: a subset), for ``load_roles``.

    ``job_service``, ``sessions_service``: the services' names, or None on a hub without
    Run as Job or without the course API.
    """
    roles = []
    for course in catalog.courses if courses is None else courses:
        role = instructor_role(
            catalog, course, job_service=job_service, sessions_service=sessions_service
        )
        if role is not None:
            roles.append(role)
    return roles
