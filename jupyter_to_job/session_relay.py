"""The lab's questions about this server's course session, relayed to the hub's
course-sessions service with the server's own ``$JUPYTERHUB_API_TOKEN``.

Design notes: docs/design/jobs.md, "jupyter_to_job.session_relay".
"""

from __future__ import annotations

import json
import os
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from .lab_handlers import URL_PREFIX, LabAPIHandler
from .models import ServerSession
from .rest import ApiError


class ReclaimRelay:
    """The course-sessions service's owner API, as this server (its hub token and name)."""

    def __init__(
        self,
        service_url: str,
        token: str,
        server_name: str,
        *,
        request_timeout: float = 10.0,
        http: AsyncHTTPClient | None = None,
    ):
        self.configured = bool(service_url and token)
        self.service_url = service_url.rstrip("/") + "/"
        self._token = token
        self.server_name = server_name
        self.request_timeout = request_timeout
        self._http = http or AsyncHTTPClient()

    async def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        request = HTTPRequest(
            self.service_url + "api/reclaim" + path,
            method=method,
            headers={
                "Authorization": f"token {self._token}",
                "Accept": "application/json",
                "Content-Type": "application/json",
            },
            body=json.dumps(body) if body is not None else None,
            request_timeout=self.request_timeout,
        )
        try:
            response = await self._http.fetch(request, raise_error=False)
        except (OSError, HTTPClientError):
            response = None
        if response is None or response.code == 599:
            raise ApiError(
                503,
                "The hub's course-sessions service did not answer; try again in a moment.",
                "sessions-unavailable",
            )
        try:
            data = json.loads(response.body or b"{}")
        except ValueError:
            data = {}
        if response.code >= 400:
            message = data.get("message") if isinstance(data, dict) else None
            raise ApiError(
                response.code if response.code < 500 else 502,
                message or f"The course-sessions service answered {response.code}.",
                (data.get("reason") if isinstance(data, dict) else None) or "sessions-refused",
            )
        return data if isinstance(data, dict) else {}

    def _mine(self, data: dict[str, Any]) -> dict[str, Any] | None:
        for warning in data.get("warnings") or []:
            if isinstance(warning, dict) and warning.get("server") == self.server_name:
                return warning
        return None

    async def warning(self) -> dict[str, Any]:
        if not self.configured:
            return {"warning": None}
        return {"warning": self._mine(await self._call("GET", ""))}

    async def session_end(self) -> str | None:
        """When the service stops this server now (an instructor may have extended it), or
        None when it does not say (no service, or it did not answer)."""
        if not self.configured:
            return None
        try:
            ends = (await self._call("GET", "")).get("session_ends")
        except ApiError:
            return None
        end = ends.get(self.server_name) if isinstance(ends, dict) else None
        return end if isinstance(end, str) else None

    async def keep(self) -> dict[str, Any]:
        if not self.configured:
            raise ApiError(
                409,
                "This server is not run by a hub that reclaims servers; there is nothing to keep.",
                "not-configured",
            )
        data = await self._call("POST", "/keep", {"server": self.server_name})
        return {"message": data.get("message", ""), "warning": self._mine(data)}


def relay_of(app: Any) -> ReclaimRelay:
    """The app's relay, made once from its settings and the hub's environment."""
    relay = getattr(app, "_reclaim_relay", None)
    if relay is None:
        relay = ReclaimRelay(
            app.sessions_service_url,
            os.environ.get("JUPYTERHUB_API_TOKEN", ""),
            os.environ.get("JUPYTERHUB_SERVER_NAME", ""),
        )
        app._reclaim_relay = relay
    return relay


class ReclaimWarningHandler(LabAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        """This server's reclaim warning, or ``{"warning": null}``."""
        self.write_json(await relay_of(self.extensionapp).warning())


class KeepServerHandler(LabAPIHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Ask the service to keep this server once ("I'm still using it")."""
        self.write_json(await relay_of(self.extensionapp).keep())


class SessionHandler(LabAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        """The server's GPU share and course session end, from the spawner's environment;
        the end as the hub's course-sessions service has it now, where it says (an
        instructor may have extended the server)."""
        env = os.environ
        session_end = await relay_of(self.extensionapp).session_end()
        self.write_json(
            ServerSession(
                profile=env.get("GPUSPAWNER_PROFILE") or None,
                gpu_share=env.get("GPUSPAWNER_GPU_SHARE") or None,
                session_end=session_end or env.get("GPUSPAWNER_SESSION_END") or None,
                class_end=env.get("GPUSPAWNER_CLASS_END") or None,
            )
        )


def session_handlers() -> list[tuple[str, type]]:
    """The routes, relative to the server's base URL."""
    return [
        (f"{URL_PREFIX}/session", SessionHandler),
        (f"{URL_PREFIX}/reclaim", ReclaimWarningHandler),
        (f"{URL_PREFIX}/reclaim/keep", KeepServerHandler),
    ]
