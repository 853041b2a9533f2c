"""The few JupyterHub REST calls the sessions service makes, over tornado's HTTP client.

Every request carries ``Authorization: token <JUPYTERHUB_API_TOKEN>``; the scopes that
token needs are listed, with the reason for each, in :mod:`gpuspawner.sessions.registration`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

# JupyterHub answers collections page by page only when asked with this media type.
PAGINATION_MEDIA_TYPE = "application/jupyterhub-pagination+json"
REQUEST_TIMEOUT = 30.0


class HubUnavailable(Exception):
    """The hub could not be reached, or answered with a server error to a read."""


@dataclass(frozen=True)
class HubReply:
    """The hub's answer to a start or stop: the HTTP status and the hub's message, if any."""

    status: int
    message: str = ""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def _path_part(name: str) -> str:
    """A user or server name as one URL path segment (names may hold ``@``, ``/``, spaces)."""
    return quote(name, safe="")


class HubClient:
    """An async client of the hub's REST API (``JUPYTERHUB_API_URL``, ending in ``/hub/api``)."""

    def __init__(self, api_url: str, token: str, *, http: AsyncHTTPClient | None = None):
        self.api_url = api_url.rstrip("/")
        self._token = token
        self._http = http or AsyncHTTPClient()

    async def _request(
        self, method: str, path: str, body: Any = None, accept: str = "application/json"
    ) -> tuple[int, bytes]:
        headers = {"Authorization": f"token {self._token}", "Accept": accept}
        if body is not None:
            headers["Content-Type"] = "application/json"
        request = HTTPRequest(
            self.api_url + path,
            method=method,
            headers=headers,
            body=json.dumps(body) if body is not None else None,
            request_timeout=REQUEST_TIMEOUT,
        )
        try:
            response = await self._http.fetch(request, raise_error=False)
        except (OSError, HTTPClientError) as error:
            # Connection refused, timeouts (599): the hub is restarting or unreachable.
            raise HubUnavailable(f"{method} {path}: the hub did not answer ({error})") from error
        return response.code, response.body or b""

    async def _get_json(self, path: str, accept: str = "application/json") -> Any:
        status, body = await self._request("GET", path, accept=accept)
        if status != 200:
            raise HubUnavailable(f"GET {path}: the hub answered {status}: {_message(body)}")
        return json.loads(body)

    async def _get_all(self, path: str, query: dict[str, str]) -> list[dict]:
        """Every item of a paginated collection, following the hub's ``next`` offsets."""
        items: list[dict] = []
        offset = 0
        while True:
            page = await self._get_json(
                f"{path}?{urlencode({**query, 'offset': str(offset)})}", PAGINATION_MEDIA_TYPE
            )
            if isinstance(page, list):  # a hub that ignores the pagination media type
                return items + page
            items.extend(page["items"])
            following = (page.get("_pagination") or {}).get("next")
            if not following:
                return items
            offset = int(following["offset"])

    async def list_users(self, state: str | None = None) -> list[dict]:
        """User models with their active servers; ``state="active"``: only users who have one.

        Each model holds ``name`` and ``admin`` (``read:users:name``) and ``servers``
        (``read:servers``): ``{server name: server model}`` with ``started``, ``pending``,
        ``ready`` and ``user_options``.
        """
        return await self._get_all("/users", {"state": state} if state else {})

    async def get_user(self, name: str) -> dict | None:
        """One user's model with their servers (``read:servers``), or None if there is none."""
        status, body = await self._request("GET", f"/users/{_path_part(name)}")
        if status == 404:
            return None
        if status != 200:
            raise HubUnavailable(f"GET /users/{name}: the hub answered {status}: {_message(body)}")
        user: dict = json.loads(body)
        return user

    async def list_services(self) -> dict[str, dict]:
        """``{name: service model}`` with ``url``, ``prefix``, ``display`` and ``info``
        (``list:services``, ``read:services``)."""
        services: dict[str, dict] = await self._get_json("/services")
        return services

    async def group_members(self, names: list[str]) -> dict[str, list[str]]:
        """``{group: [usernames]}`` for the named groups; a group the hub lacks is left out."""
        members: dict[str, list[str]] = {}
        for name in names:
            status, body = await self._request("GET", f"/groups/{_path_part(name)}")
            if status == 404:
                continue
            if status != 200:
                raise HubUnavailable(
                    f"GET /groups/{name}: the hub answered {status}: {_message(body)}"
                )
            members[name] = list(json.loads(body).get("users", []))
        return members

    async def start_server(self, user: str, server_name: str, options: dict) -> HubReply:
        """POST /users/{user}/server(s/{name}) with ``options`` as the server's user_options.

        201: started; 202: starting (or a start was already pending); 4xx: refused, with
        the spawner's or the hub's message; 404: no such user.
        """
        status, body = await self._request("POST", self._server_path(user, server_name), options)
        return HubReply(status, _message(body))

    async def stop_server(self, user: str, server_name: str) -> HubReply:
        """DELETE /users/{user}/server(s/{name}): 204 stopped, 202 stopping."""
        status, body = await self._request("DELETE", self._server_path(user, server_name))
        return HubReply(status, _message(body))

    @staticmethod
    def _server_path(user: str, server_name: str) -> str:
        if server_name:
            return f"/users/{_path_part(user)}/servers/{_path_part(server_name)}"
        return f"/users/{_path_part(user)}/server"


def _message(body: bytes) -> str:
    """The ``message`` of a JupyterHub JSON error (``{"status": 403, "message": ...}``)."""
    if not body:
        return ""
    try:
        data = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")[:500]
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"])
    return ""
