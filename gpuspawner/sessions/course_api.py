"""The instructors' API of the course-sessions service: a course's servers, and stopping one.

JupyterHub's roles can say "the servers of the members of group G" but not "the servers
running course C": a student who takes two courses would be stoppable by the instructors
of both, and a refusal is JupyterHub's 404 ("No access to resources or resources not
found"). This API decides by the course a server runs (its ``profile`` user option) and
by who teaches it (the catalog's instructors and the course's instructor group), and
answers a refusal with a 403 that says why:

- ``GET  api/courses``: the courses the caller teaches (every course for hub admins);
- ``GET  api/courses/<course>/servers``: the servers running that course now;
- ``DELETE api/courses/<course>/servers/<user>[/<server>]``: stop one of them.

Callers authenticate with a hub token (``Authorization: token ...``) that holds
``access:services!service=course-sessions`` (the instructor roles of
:func:`gpuspawner.policy.roles.course_roles` grant it). The service stops servers with its
own token (``delete:servers``); the caller never needs JupyterHub's server scopes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tornado import web

from gpuspawner.policy import Catalog
from gpuspawner.policy.catalog import Course

from .audit import AuditLog
from .hub_client import HubClient, HubUnavailable

log = logging.getLogger("gpuspawner.sessions.api")


@dataclass(frozen=True)
class Caller:
    """The token's owner as the hub describes it."""

    name: str
    admin: bool
    groups: frozenset[str]

    @classmethod
    def from_model(cls, model: dict[str, Any]) -> Caller:
        return cls(
            name=str(model.get("name", "")),
            admin=bool(model.get("admin")) and model.get("kind", "user") == "user",
            groups=frozenset(str(g) for g in model.get("groups") or ()),
        )


class Refused(Exception):
    """A request the API answers with ``status`` and a sentence."""

    def __init__(self, status: int, message: str, reason: str):
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason


def taught_courses(catalog: Catalog, caller: Caller) -> list[Course]:
    """The courses ``caller`` may manage: those they teach, or all of them for an admin."""
    if caller.admin:
        return list(catalog.courses)
    return [c for c in catalog.courses if catalog.teaches(c, caller.name, caller.groups)]


def course_to_manage(catalog: Catalog, caller: Caller, course_id: str) -> Course:
    """The course ``caller`` asks about, if they may manage it; else :class:`Refused`."""
    course = catalog.courses_by_id.get(course_id)
    if course is None:
        raise Refused(404, f"There is no course {course_id[:64]!r} in the catalog.", "no-course")
    if course not in taught_courses(catalog, caller):
        raise Refused(
            403,
            f"You do not teach {course.title}: instructors see and stop only the servers of "
            "the courses they teach.",
            "not-your-course",
        )
    return course


def profile_of(server: dict[str, Any]) -> str | None:
    options = server.get("user_options")
    profile = options.get("profile") if isinstance(options, dict) else None
    return profile if isinstance(profile, str) else None


def servers_of_course(course: Course, users: list[dict[str, Any]]) -> list[dict[str, Any]]:
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
    caller: Caller,
    course: Course,
    user: dict[str, Any] | None,
    owner: str,
    server_name: str,
) -> None:
    """Check that ``owner``'s server ``server_name`` runs ``course``; else :class:`Refused`.

    A server of another course is refused with 403 unless the caller may manage that
    course too (then the URL names the wrong course: 409, naming the right one).
    """
    label = f"{owner}'s server" + (f" {server_name!r}" if server_name else "")
    server = (user or {}).get("servers", {}).get(server_name) if user else None
    if server is None:
        raise Refused(404, f"{label} is not running.", "no-server")
    running = profile_of(server)
    if running == course.id:
        return
    other = catalog.courses_by_id.get(running or "")
    if other is not None and other in taught_courses(catalog, caller):
        raise Refused(
            409,
            f"{label} runs {other.title}, not {course.title}; stop it from that course.",
            "other-course",
        )
    raise Refused(
        403,
        f"{label} does not run {course.title}: you may stop only the servers of the courses "
        "you teach.",
        "not-your-course",
    )


@dataclass
class CourseAPI:
    """What the handlers need: the hub, the catalog in force, the audit log, the clock."""

    client: HubClient
    catalog: Callable[[datetime], Catalog | None]
    audit: AuditLog
    clock: Callable[[], datetime]
    authenticate: Callable[[str], Any]
    """``token -> awaitable user model or None`` (HubAuth.user_for_token)."""
    access_scope: str
    check_scopes: Callable[[set[str], dict], set[str]]

    def current_catalog(self) -> Catalog:
        catalog = self.catalog(self.clock())
        if catalog is None:
            raise Refused(
                503,
                "The course catalog cannot be loaded right now; try again later (the hub "
                "admins see why in the service's log).",
                "no-catalog",
            )
        return catalog


class CourseHandler(web.RequestHandler):
    """Base: token authentication, JSON answers, refusals as ``{status, message, reason}``."""

    api: CourseAPI
    caller: Caller

    def initialize(self, api: CourseAPI) -> None:
        self.api = api

    def check_xsrf_cookie(self) -> None:
        """Token-authenticated only: no cookies, so no cross-site request forgery."""

    async def prepare(self) -> None:
        header = self.request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() not in ("token", "bearer") or not token.strip():
            raise Refused(
                401,
                "Send a hub token: Authorization: token <your token> (make one on the hub's "
                "Token page).",
                "no-token",
            )
        model = await self.api.authenticate(token.strip())
        if not model:
            raise Refused(401, "The hub does not know this token; make a new one.", "bad-token")
        if not self.api.check_scopes({self.api.access_scope}, model):
            raise Refused(
                403,
                "This token may not use the course sessions API: it is for the instructors of "
                "a course, with a token that can access the course-sessions service.",
                "missing-scope",
            )
        self.caller = Caller.from_model(model)

    def write_json(self, status: int, body: dict[str, Any]) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(body))

    def _handle_request_exception(self, error: BaseException) -> None:
        if isinstance(error, Refused):
            self.write_json(
                error.status,
                {"status": error.status, "message": error.message, "reason": error.reason},
            )
            return
        if isinstance(error, HubUnavailable):
            log.warning("The hub did not answer: %s", error)
            self.write_json(
                503,
                {
                    "status": 503,
                    "message": "The hub did not answer; try again in a moment.",
                    "reason": "hub-unavailable",
                },
            )
            return
        super()._handle_request_exception(error)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        reason = "not-found" if status_code == 404 else "error"
        message = (
            "There is nothing at this address of the course sessions API."
            if status_code == 404
            else "The course sessions API failed; the hub admins see why in its log."
        )
        self.write_json(status_code, {"status": status_code, "message": message, "reason": reason})


class CoursesHandler(CourseHandler):
    async def get(self) -> None:
        catalog = self.api.current_catalog()
        courses = taught_courses(catalog, self.caller)
        self.write_json(200, {"courses": [{"id": c.id, "title": c.title} for c in courses]})


class CourseServersHandler(CourseHandler):
    async def get(self, course_id: str) -> None:
        catalog = self.api.current_catalog()
        course = course_to_manage(catalog, self.caller, course_id)
        users = await self.api.client.list_users(state="active")
        self.write_json(200, {"course": course.id, "servers": servers_of_course(course, users)})


class CourseServerHandler(CourseHandler):
    async def delete(self, course_id: str, owner: str, server_name: str = "") -> None:
        catalog = self.api.current_catalog()
        course = course_to_manage(catalog, self.caller, course_id)
        users = await self.api.client.list_users(state="active")
        user = next((u for u in users if u.get("name") == owner), None)
        server_to_stop(catalog, self.caller, course, user, owner, server_name)
        reply = await self.api.client.stop_server(owner, server_name)
        if not reply.ok:
            raise Refused(
                502 if reply.status >= 500 else reply.status,
                f"The hub did not stop {owner}'s server: {reply.message}",
                "hub-refused",
            )
        label = f"{owner}'s {course.title} server"
        self.api.audit.record(
            self.api.clock(),
            "instructor-stop",
            user=owner,
            server=server_name,
            course=course.id,
            detail=f"{self.caller.name} stopped {label}.",
        )
        self.write_json(202, {"message": f"Stopping {label}.", "user": owner, "course": course.id})


def course_api_handlers(prefix: str, api: CourseAPI) -> list[tuple[str, type, dict]]:
    """Tornado routes under the service's prefix (``/services/course-sessions/``)."""
    base = prefix.rstrip("/") + "/api/courses"
    name = r"([^/]+)"
    return [
        (base, CoursesHandler, {"api": api}),
        (f"{base}/{name}/servers", CourseServersHandler, {"api": api}),
        (f"{base}/{name}/servers/{name}", CourseServerHandler, {"api": api}),
        (f"{base}/{name}/servers/{name}/{name}", CourseServerHandler, {"api": api}),
    ]
