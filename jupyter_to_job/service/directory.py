"""Group membership from the hub's REST API, asked with the service's own token, cached briefly.

Used for tokens filtered by ``!group=`` and for courses that enrol groups. The service's
role needs ``read:users:groups`` (a user's groups) and ``read:groups`` (a group's members);
see :data:`jupyter_to_job.hub.SERVICE_SCOPE_REASONS`. When the hub cannot answer, the
lookup counts as "no groups", which can only narrow what a caller sees.
"""

from __future__ import annotations

import json
import logging
import time
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

log = logging.getLogger(__name__)

REQUEST_TIMEOUT = 20.0


class HubDirectory:
    """``groups_of(user)`` and ``members_of(group)``, each answer kept ``max_age`` seconds."""

    def __init__(
        self,
        api_url: str,
        token: str,
        *,
        max_age: float = 30.0,
        http: AsyncHTTPClient | None = None,
    ):
        self.api_url = api_url.rstrip("/")
        self._token = token
        self.max_age = max_age
        self._http = http or AsyncHTTPClient()
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}

    async def groups_of(self, user: str) -> frozenset[str]:
        return await self._names(f"/users/{quote(user, safe='')}", "groups")

    async def members_of(self, group: str) -> frozenset[str]:
        return await self._names(f"/groups/{quote(group, safe='')}", "users")

    async def _names(self, path: str, field: str) -> frozenset[str]:
        cached = self._cache.get(path)
        now = time.monotonic()
        if cached is not None and now - cached[0] < self.max_age:
            return cached[1]
        request = HTTPRequest(
            self.api_url + path,
            headers={"Authorization": f"token {self._token}", "Accept": "application/json"},
            request_timeout=REQUEST_TIMEOUT,
        )
        try:
            response = await self._http.fetch(request, raise_error=False)
        except (OSError, HTTPClientError) as error:
            log.warning("The hub did not answer GET %s: %s", path, error)
            return frozenset()
        if response.code == 404:
            names: frozenset[str] = frozenset()
        elif response.code == 200:
            try:
                names = frozenset(str(n) for n in json.loads(response.body).get(field) or [])
            except (ValueError, AttributeError):
                log.warning("The hub's answer to GET %s is not a JSON model", path)
                return frozenset()
        else:
            log.warning(
                "The hub answered GET %s with %s; does the service's role have %s?",
                path,
                response.code,
                "read:users:groups" if field == "groups" else "read:groups",
            )
            return frozenset()
        self._cache[path] = (now, names)
        return names
