"""Standalone mode (Binder, a laptop): the job service's own handlers, inside this server.

:class:`EmbeddedService` serves :func:`~jupyter_to_job.service.handlers.service_handlers`
over a manager with the local executor, on a loopback port of this process, for this
server's one user: the extension relays to it as it relays to the hub's job service.
Only the relay's token is let in (:class:`LocalAuth`, in the place of the hub's).
"""

from __future__ import annotations

import hmac
import logging
import secrets
import socket
from typing import Any

from tornado import web
from tornado.httpclient import AsyncHTTPClient
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from ..access import Caller
from ..jobs_api import JobsAPI
from ..pipelines_api import PipelinesAPI
from ..rest import CREATE_BODY_SLACK
from ..schedules_api import SchedulesAPI
from ..scopes import READ_JOBS_SCOPE, WRITE_JOBS_SCOPE
from ..service.handlers import NotFoundHandler, service_handlers
from .relay import ServiceRelay

log = logging.getLogger(__name__)

PREFIX = "/services/jupyter-to-job/"


def local_caller(name: str) -> Caller:
    """The one user of a standalone server: their own jobs, read and write."""
    return Caller(
        name=name,
        scopes=frozenset({f"{READ_JOBS_SCOPE}!user={name}", f"{WRITE_JOBS_SCOPE}!user={name}"}),
    )


class LocalAuth:
    """Who asks the embedded service: its owner with the one token this server holds, else
    nobody (a 401). In the place of the hub's ``HubAuth``, with the same two methods."""

    def __init__(self, owner: str):
        self.token = secrets.token_urlsafe(32)
        caller = local_caller(owner)
        self.scopes = set(caller.scopes)
        self._model = {"kind": "user", "name": owner, "admin": False, "groups": []}

    async def get_user(self, handler: web.RequestHandler, sync: bool = False) -> dict | None:
        scheme, _, token = handler.request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "token" or not hmac.compare_digest(token, self.token):
            return None
        return {**self._model, "scopes": sorted(self.scopes)}

    def check_scopes(self, required: set[str], model: dict[str, Any]) -> set[str]:
        return set(required) & set(model.get("scopes") or ())


def _log_request(handler: web.RequestHandler) -> None:
    # The server's own access log has the lab's request already.
    log.debug("%d %s %s", handler.get_status(), handler.request.method, handler.request.path)


class EmbeddedService:
    """The job service's handlers over ``api``'s manager, for ``owner``, on a loopback port."""

    def __init__(
        self,
        api: JobsAPI,
        owner: str,
        schedules: SchedulesAPI,
        pipelines: PipelinesAPI,
        *,
        request_timeout: float = 60.0,
    ):
        self.api = api
        self.schedules = schedules
        self.pipelines = pipelines
        self.auth = LocalAuth(owner)
        # Bound now, so the relay knows the address; served once the server's loop runs.
        self._sockets = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
        port = self._sockets[0].getsockname()[1]
        self.relay = ServiceRelay(
            f"http://127.0.0.1:{port}{PREFIX}",
            self.auth.token,
            request_timeout=request_timeout,
            # Its own connections: followed logs hold theirs while the job runs.
            http=AsyncHTTPClient(force_instance=True, max_clients=64),
        )
        self._server: HTTPServer | None = None

    def web_app(self) -> web.Application:
        handlers = service_handlers(
            PREFIX,
            schedules=self.schedules,
            pipelines=self.pipelines,
            api=self.api,
            hub_auth=self.auth,
            access_scopes=self.auth.scopes,
        )
        return web.Application(
            handlers,
            default_handler_class=NotFoundHandler,
            log_function=_log_request,
        )

    async def start(self) -> None:
        manager = self.api.manager
        report = await manager.start()
        log.info(
            "Run as Job (standalone): %d job(s) adopted, %d queued",
            len(report.adopted),
            report.queued,
        )
        self.schedules.scheduler.start()
        self.pipelines.pipelines.start()
        limit = self.api.max_notebook_bytes + CREATE_BODY_SLACK
        self._server = HTTPServer(self.web_app(), max_body_size=2 * limit)
        self._server.add_sockets(self._sockets)

    async def close(self) -> None:
        if self._server is not None:
            self._server.stop()
        else:
            for sock in self._sockets:
                sock.close()
        await self.schedules.scheduler.stop()
        await self.pipelines.pipelines.close()
        if not self.api.manager.closed:
            await self.api.manager.shutdown(stop_jobs=False)
        self.relay.close()
