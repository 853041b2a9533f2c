"""The course-sessions service's course API (``api/courses``, ``api/usage``) served on a free
loopback port in the test process, with hub tokens looked up in a table."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from jupyterhub.services.auth import HubAuth
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port
from tornado.web import Application

from gpuspawner.sessions.audit import AuditLog
from gpuspawner.sessions.course_api import CourseAPI, course_api_handlers
from gpuspawner.sessions.hub_client import HubClient
from gpuspawner.sessions.service import SessionsService
from gpuspawner.sessions.watched_catalog import WatchedCatalog

ACCESS = "access:services!service=course-sessions"
PREFIX = "/services/course-sessions/"


def serve_course_api(
    catalog: Path,
    tokens: dict[str, dict[str, Any]],
    clock: Callable[[], datetime],
    **api: Any,
) -> tuple[str, HTTPServer]:
    """Serve the course API over ``catalog`` at ``clock``'s time; a request's token is
    looked up in ``tokens`` (the hub's answer for it). ``api``: more CourseAPI traits
    (``usage=store``). Returns the API's URL (``.../services/course-sessions/api/``) and the
    server, for the test to stop."""
    audit = AuditLog(None)
    service = SessionsService(
        HubClient("http://127.0.0.1:9/hub/api/", "unused"),  # the API never asks the hub
        WatchedCatalog(catalog, audit),
        audit,
        clock=clock,
    )

    async def authenticate(token: str) -> dict[str, Any] | None:
        return tokens.get(token)

    course_api = CourseAPI(
        service=service,
        authenticate=authenticate,
        access_scope=ACCESS,
        check_scopes=HubAuth(api_token="unused").check_scopes,
        **api,
    )
    sock, port = bind_unused_port()
    server = HTTPServer(Application(course_api_handlers(PREFIX, course_api)))
    server.add_sockets([sock])
    return f"http://127.0.0.1:{port}{PREFIX}api/", server
