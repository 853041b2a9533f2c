"""A stand-in for the hub's REST API, for the sessions service's unit tests.

It answers the calls the service makes, the way JupyterHub 6.1 does (paginated
``GET /users`` with ``state=active``, ``GET /users/{name}``, ``GET /groups/{name}``, ``POST`` and ``DELETE`` of a
server, JSON errors ``{"status", "message"}``), checks the token, and records every
request. The service against a real hub is covered by the integration tests.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime

from tornado import web
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port

from gpuspawner.policy.schedule import UTC

from .scenario import hub_server

PAGINATION_MEDIA_TYPE = "application/jupyterhub-pagination+json"


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    authorization: str | None
    body: dict | None


@dataclass
class FakeHub:
    """Users, groups and scripted answers; ``requests`` lists what the service asked."""

    token: str
    users: dict[str, dict]
    groups: dict[str, list[str]] = field(default_factory=dict)
    replies: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Scripted answers to a start, by username: (status, message)."""
    page_size: int = 2
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    """The hub's clock: what it stamps as a started server's ``started``."""
    requests: list[Request] = field(default_factory=list)

    def calls(self, method: str) -> list[Request]:
        return [r for r in self.requests if r.method == method]

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[str]:
        """Listen on 127.0.0.1 on a free port; yields the API URL (``.../hub/api``)."""
        handlers = [
            (r"/hub/api/users", UserListHandler),
            (r"/hub/api/groups", GroupListHandler),
            (r"/hub/api/groups/([^/]+)", GroupHandler),
            (r"/hub/api/users/([^/]+)", UserHandler),
            (r"/hub/api/users/([^/]+)/server", ServerHandler),
            (r"/hub/api/users/([^/]+)/servers/([^/]+)", ServerHandler),
        ]
        app = web.Application(handlers, hub=self)
        sock, port = bind_unused_port()
        server = HTTPServer(app)
        server.add_sockets([sock])
        try:
            yield f"http://127.0.0.1:{port}/hub/api"
        finally:
            server.stop()
            await server.close_all_connections()


class FakeHubHandler(web.RequestHandler):
    @property
    def hub(self) -> FakeHub:
        return self.settings["hub"]

    def prepare(self) -> None:
        body = json.loads(self.request.body) if self.request.body else None
        self.hub.requests.append(
            Request(
                self.request.method or "",
                self.request.path,
                {k: self.get_argument(k) for k in self.request.arguments},
                self.request.headers.get("Authorization"),
                body,
            )
        )
        if self.request.headers.get("Authorization") != f"token {self.hub.token}":
            raise web.HTTPError(403)

    def write_error(self, status_code: int, **kwargs) -> None:
        exception = kwargs.get("exc_info", (None, None))[1]
        message = exception.log_message if isinstance(exception, web.HTTPError) else None
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"status": status_code, "message": message}))


class UserListHandler(FakeHubHandler):
    def get(self) -> None:
        users = list(self.hub.users.values())
        if self.get_argument("state", None) == "active":
            users = [u for u in users if u["servers"]]
        offset = int(self.get_argument("offset", "0"))
        limit = min(int(self.get_argument("limit", str(self.hub.page_size))), self.hub.page_size)
        page = users[offset : offset + limit]
        if PAGINATION_MEDIA_TYPE not in self.request.headers.get("Accept", ""):
            self.finish(json.dumps(page))
            return
        following = None
        if offset + limit < len(users):
            following = {"offset": offset + limit, "limit": limit, "url": "unused"}
        pagination = {"offset": offset, "limit": limit, "total": len(users), "next": following}
        self.finish(json.dumps({"items": page, "_pagination": pagination}))


class UserHandler(FakeHubHandler):
    def get(self, name: str) -> None:
        if name not in self.hub.users:
            raise web.HTTPError(404)
        self.finish(json.dumps(self.hub.users[name]))


class GroupListHandler(FakeHubHandler):
    def get(self) -> None:
        raise web.HTTPError(403, "Action is not authorized with current scopes")


class GroupHandler(FakeHubHandler):
    def get(self, name: str) -> None:
        if name not in self.hub.groups:
            raise web.HTTPError(404, f"No such group: {name}")
        model = {"kind": "group", "name": name, "users": self.hub.groups[name], "properties": {}}
        self.finish(json.dumps(model))


class ServerHandler(FakeHubHandler):
    def _user(self, name: str) -> dict:
        if name not in self.hub.users:
            raise web.HTTPError(404)
        return self.hub.users[name]

    def post(self, name: str, server_name: str = "") -> None:
        user = self._user(name)
        status, message = self.hub.replies.get(name, (201, ""))
        if status >= 400:
            raise web.HTTPError(status, message)
        if server_name in user["servers"]:
            raise web.HTTPError(400, f"{name} is already running")
        options = json.loads(self.request.body)
        server = hub_server(name, server_name, profile=None, started=self.hub.now)
        user["servers"][server_name] = {**server, "user_options": options}
        self.set_status(status)
        self.finish()

    def delete(self, name: str, server_name: str = "") -> None:
        user = self._user(name)
        if server_name not in user["servers"]:
            raise web.HTTPError(404)
        del user["servers"][server_name]
        self.set_status(204)
        self.finish()
