"""What an instructor may do with their course's servers: the rules of the course API.

Decided by the course a server runs (its ``profile`` user option) and by who teaches the
course (the catalog's instructors and the course's instructor group); hub admins manage
every course. Pure: the hub's user and server models come in as plain dictionaries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .catalog import Catalog
from .catalog_models import Course
from .entitlements import UserIdentity


class InstructorRefusal(Exception):
    """A request refused with an HTTP ``status``, a sentence and a short ``reason`` code."""

    def __init__(self, status: int, message: str, reason: str):
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason


def profile_of(server: Mapping[str, Any]) -> str | None:
    """The profile (course id) a hub server model runs, from its ``user_options``."""
    options = server.get("user_options")
    profile = options.get("profile") if isinstance(options, dict) else None
    return profile if isinstance(profile, str) else None


def taught_courses(catalog: Catalog, caller: UserIdentity) -> list[Course]:
    """The courses ``caller`` may manage: those they teach, or all of them for an admin."""
    if caller.admin:
        return list(catalog.courses)
    courses, teaching = catalog.courses_for(caller.name, caller.groups)
    return [course for course in courses if course.id in teaching]


def course_to_manage(catalog: Catalog, caller: UserIdentity, course_id: str) -> Course:
    """The course ``caller`` asks about, if they may manage it; else a refusal."""
    course = catalog.courses_by_id.get(course_id)
    if course is None:
        raise InstructorRefusal(
            404, f"There is no course {course_id[:64]!r} in the catalog.", "no-course"
        )
    if course not in taught_courses(catalog, caller):
        raise InstructorRefusal(
            403,
            f"You do not teach {course.title}: instructors see and stop only the servers of "
            "the courses they teach.",
            "not-your-course",
        )
    return course


def servers_of_course(course: Course, users: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The servers running ``course`` (its profile), in user order."""
    found = []
    for user in sorted(users, key=lambda u: str(u.get("name"))):
        for name, server in sorted((user.get("servers") or {}).items()):
            if profile_of(server) == course.id:
                found.append(
                    {
                        "user": user.get("name"),
                        "server": name,
                        "started": server.get("started"),
                        "last_activity": server.get("last_activity"),
                        "ready": bool(server.get("ready")),
                        "pending": server.get("pending"),
                    }
                )
    return found


def server_to_stop(
    catalog: Catalog,
    caller: UserIdentity,
    course: Course,
    user: Mapping[str, Any] | None,
    owner: str,
    server_name: str,
) -> None:
    """Check that ``owner``'s server ``server_name`` runs ``course``; else a refusal.

    A server of another course is refused with 403 unless the caller may manage that
    course too (then the URL names the wrong course: 409, naming the right one).
    """
    label = f"{owner}'s server" + (f" {server_name!r}" if server_name else "")
    server = (user.get("servers") or {}).get(server_name) if user else None
    if server is None:
        raise InstructorRefusal(404, f"{label} is not running.", "no-server")
    running = profile_of(server)
    if running == course.id:
        return
    other = catalog.courses_by_id.get(running or "")
    if other is not None and other in taught_courses(catalog, caller):
        raise InstructorRefusal(
            409,
            f"{label} runs {other.title}, not {course.title}; stop it from that course.",
            "other-course",
        )
    raise InstructorRefusal(
        403,
        f"{label} does not run {course.title}: you may stop only the servers of the courses "
        "you teach.",
        "not-your-course",
    )
