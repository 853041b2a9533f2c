"""The instructors' API of the course-sessions service: a course's servers, and stopping one.

Design notes: docs/design/sessions.md, "gpuspawner.sessions.course_api".
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

from tornado import web

from gpuspawner.accounting.store import UsageStore
from gpuspawner.accounting.usage_command import UsageCommandError, build_report
from gpuspawner.policy import Catalog, UserIdentity
from gpuspawner.policy.course_overrides import changes_in_force
from gpuspawner.policy.instructors import InstructorRefusal as Refused
from gpuspawner.policy.instructors import (
    course_to_manage,
    server_to_stop,
    servers_of_course,
    taught_courses,
)

from .hub_client import HubUnavailable

if TYPE_CHECKING:
    from .service import SessionsService

log = logging.getLogger("gpuspawner.sessions.api")


def identity_of(model: dict[str, Any]) -> UserIdentity:
    """The token's owner, as the hub describes it (a service is never an admin here)."""
    return UserIdentity(
        name=str(model.get("name", "")),
        groups=frozenset(str(g) for g in model.get("groups") or ()),
        admin=bool(model.get("admin")) and model.get("kind", "user") == "user",
    )


@dataclass
class CourseAPI:
    """What the handlers need: the sessions service (its hub client, catalog, audit log and
    clock) and how to check a caller's token."""

    service: SessionsService
    authenticate: Callable[[str], Any]
    """``token -> awaitable user model or None`` (HubAuth.user_for_token)."""
    access_scope: str
    check_scopes: Callable[[set[str], dict], set[str]]
    usage: UsageStore | None = None
    """The GPU-hour usage record (``--usage-db``), for ``api/usage``; None: not kept."""
    hub_auth: Any = None
    """The service's HubOAuth, for the usage report opened in a browser; None: tokens only."""

    def current_catalog(self) -> Catalog:
        catalog = self.service.catalog.current(self.service.clock())
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
    caller: UserIdentity
    scope_refusal = (
        "This token may not use the course sessions API: it is for the instructors of "
        "a course, with a token that can access the course-sessions service."
    )

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
            raise Refused(403, self.scope_refusal, "missing-scope")
        self.caller = identity_of(model)
        self.caller_model = model

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
        self.write_json(
            200,
            {
                "courses": [
                    {
                        "id": course.id,
                        "title": course.title,
                        "changes": [change.to_json() for change in changes_in_force(course)],
                    }
                    for course in courses
                ]
            },
        )


class CourseServersHandler(CourseHandler):
    async def get(self, course_id: str) -> None:
        catalog = self.api.current_catalog()
        course = course_to_manage(catalog, self.caller, course_id)
        users = await self.api.service.client.list_users(state="active")
        self.write_json(200, {"course": course.id, "servers": servers_of_course(course, users)})


class CourseServerHandler(CourseHandler):
    async def delete(self, course_id: str, owner: str, server_name: str = "") -> None:
        catalog = self.api.current_catalog()
        course = course_to_manage(catalog, self.caller, course_id)
        client = self.api.service.client
        user = await client.get_user(owner)
        server_to_stop(catalog, self.caller, course, user, owner, server_name)
        reply = await client.stop_server(owner, server_name)
        if not reply.ok:
            raise Refused(
                502 if reply.status >= 500 else reply.status,
                f"The hub did not stop {owner}'s server: {reply.message}",
                "hub-refused",
            )
        label = f"{owner}'s {course.title} server"
        self.api.service.audit.record(
            self.api.service.clock(),
            "instructor-stop",
            user=owner,
            server=server_name,
            course=course.id,
            detail=f"{self.caller.name} stopped {label}.",
        )
        self.write_json(202, {"message": f"Stopping {label}.", "user": owner, "course": course.id})


class UsageHandler(CourseHandler):
    """The GPU-hour report: admins every course's, instructors their own courses'; with a
    token, or in a browser signed in to the hub (:func:`usage_handler_class`)."""

    async def get(self) -> None:
        usage = self.api.usage
        if usage is None:
            raise Refused(
                404,
                "This hub keeps no GPU-hour usage record; the hub admins can start one "
                "(c.GPUAdmission.usage_db_url, and the course-sessions service's usage_db_url).",
                "no-usage-record",
            )
        catalog = self.api.current_catalog()
        courses = (
            None if self.caller.admin else [c.id for c in taught_courses(catalog, self.caller)]
        )
        course = self.get_argument("course", None)
        if courses is not None and (not courses or (course is not None and course not in courses)):
            raise Refused(
                403,
                "GPU-hour reports are for hub admins, and for instructors about the courses "
                "they teach.",
                "not-instructor",
            )
        try:
            report = build_report(
                usage,
                catalog=catalog,
                first_day=_day_argument(self, "from"),
                last_day=_day_argument(self, "to"),
                term=self.get_argument("term", None),
                by=self.get_argument("by", "user"),
                now=self.api.service.clock(),
                course=course,
                courses=courses,
            )
        except UsageCommandError as error:
            raise Refused(400, error.web, "bad-request") from None
        except ValueError as error:
            raise Refused(400, str(error), "bad-request") from None
        if self.get_argument("format", "json") == "csv":
            self.set_header("Content-Type", "text/csv; charset=utf-8")
            self.set_header("Content-Disposition", 'attachment; filename="gpu-usage.csv"')
            self.finish(report.to_csv())
            return
        self.write_json(200, report.to_json())


def _day_argument(handler: web.RequestHandler, name: str) -> date | None:
    text = handler.get_argument(name, None)
    if text is None:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise Refused(
            400, f"Give {name} as a date such as 2026-09-14, not {text[:40]!r}.", "bad-request"
        ) from None


def usage_handler_class(api: CourseAPI) -> type[UsageHandler]:
    """The report's handler: with ``api.hub_auth``, one that also takes the hub's browser
    sign-in (its OAuth cookie), for a request without a token. Reading only (GET), so no
    XSRF token is needed."""
    if api.hub_auth is None:
        return UsageHandler
    from jupyterhub.services.auth import HubOAuthenticated

    class BrowserUsageHandler(HubOAuthenticated, UsageHandler):
        def initialize(self, api: CourseAPI) -> None:
            super().initialize(api)
            self.hub_auth = api.hub_auth

        async def prepare(self) -> None:
            if self.request.headers.get("Authorization"):
                await super().prepare()
                return
            model = self.current_user
            if not model:
                if self.hub_auth.get_token(self):
                    raise Refused(403, self.scope_refusal, "missing-scope")
                # Not signed in to this service yet: through the hub's login, and back.
                self.redirect(self.get_login_url())
                return
            self.caller = identity_of(model)
            self.caller_model = model

    return BrowserUsageHandler


def course_api_handlers(prefix: str, api: CourseAPI) -> list[tuple[str, type, dict]]:
    """Tornado routes under the service's prefix (``/services/course-sessions/``)."""
    base = prefix.rstrip("/") + "/api/courses"
    name = r"([^/]+)"
    return [
        (base, CoursesHandler, {"api": api}),
        (f"{base}/{name}/servers", CourseServersHandler, {"api": api}),
        (f"{base}/{name}/servers/{name}", CourseServerHandler, {"api": api}),
        (f"{base}/{name}/servers/{name}/{name}", CourseServerHandler, {"api": api}),
        (prefix.rstrip("/") + "/api/usage", usage_handler_class(api), {"api": api}),
    ]
