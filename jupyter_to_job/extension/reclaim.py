"""The lab's questions about reclaim, relayed to the hub's course-sessions service.

``GET  {base_url}jupyter-to-job/api/reclaim``: ``{"warning": ...}``, this server's reclaim
warning (reason, when it stops, seconds left, whether its user may keep it once, a
sentence), or ``{"warning": null}``.

``POST {base_url}jupyter-to-job/api/reclaim/keep``: "I'm still using it". The server asks,
the service decides: it is sent with this server's own ``$JUPYTERHUB_API_TOKEN``, so the
service knows whose server it is, and refuses (403, with a sentence) once the user has
kept it already or when the reason cannot be kept off (an expired grant, the end of class).

The service's address comes from ``c.JobsExtensionApp.sessions_service_url``
(``$COURSE_SESSIONS_SERVICE_URL``, which the hub config sets for every server). Without
it, or outside a hub, there is never a warning.

Saving: the lab saves its open, modified documents when a warning is about to run out
(see ``reclaimWarning.ts``). The server has no general way to save what only the browser
holds, so a server nobody has open is stopped with what is on disk.
"""

from __future__ import annotations

import json
import os
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from ..rest import ApiError
from .handlers import URL_PREFIX, JobsExtensionHandler


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


class ReclaimWarningHandler(JobsExtensionHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        """This server's reclaim warning, or ``{"warning": null}``."""
        self.write_json(await relay_of(self.extensionapp).warning())


class KeepServerHandler(JobsExtensionHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Ask the service to keep this server once ("I'm still using it")."""
        self.write_json(await relay_of(self.extensionapp).keep())


def reclaim_handlers() -> list[tuple[str, type]]:
    return [
        (f"{URL_PREFIX}/reclaim", ReclaimWarningHandler),
        (f"{URL_PREFIX}/reclaim/keep", KeepServerHandler),
    ]
