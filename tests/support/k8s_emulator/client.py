"""A small JSON client of the emulator's HTTP API for the simulated controllers.

The kubelet, scheduler and Job controller act only through this client, as their real
counterparts act only through the API server. Informers keep a watched cache per resource.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp

log = logging.getLogger(__name__)

Object = dict[str, Any]


class ClientError(Exception):
    """A non-2xx answer from the API; ``status`` is the HTTP code, ``body`` the Status."""

    def __init__(self, status: int, body: Any) -> None:
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{status}: {message}")
        self.status = status
        self.body = body


class KubeClient:
    def __init__(
        self,
        base_url: str,
        user_agent: str = "emulator-controller",
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """``ssl_context`` verifies a real API server and presents the client's certificate."""
        self.base_url = base_url.rstrip("/")
        self._session: aiohttp.ClientSession | None = None
        self._user_agent = user_agent
        self._ssl = ssl_context

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=0, ssl=self._ssl or True)
            self._session = aiohttp.ClientSession(
                connector=connector, headers={"User-Agent": self._user_agent}
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type} if data is not None else {}
        query = {
            k: str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in (params or {}).items()
            if v is not None
        }
        async with self.session.request(
            method, self.base_url + path, params=query, data=data, headers=headers
        ) as response:
            text = await response.text()
            try:
                payload = json.loads(text) if text else None
            except ValueError:
                payload = text
            if response.status >= 400:
                raise ClientError(response.status, payload)
            return payload

    async def get(self, path: str, **params: Any) -> Any:
        return await self.request("GET", path, params=params)

    async def create(self, path: str, body: Object) -> Object:
        return await self.request("POST", path, body=body)

    async def merge_patch(self, path: str, body: Object) -> Object:
        return await self.request(
            "PATCH", path, body=body, content_type="application/merge-patch+json"
        )

    async def json_patch(self, path: str, operations: list[Object]) -> Object:
        return await self.request(
            "PATCH", path, body=operations, content_type="application/json-patch+json"
        )

    async def delete(self, path: str, body: Object | None = None) -> Any:
        return await self.request("DELETE", path, body=body)

    async def watch(self, path: str, **params: Any) -> AsyncIterator[Object]:
        query = {
            k: str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in params.items()
            if v is not None
        }
        query["watch"] = "true"
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        async with self.session.get(
            self.base_url + path, params=query, timeout=timeout
        ) as response:
            if response.status >= 400:
                raise ClientError(response.status, await response.text())
            async for line in response.content:
                if line.strip():
                    yield json.loads(line)


Handler = Callable[[str, Object, Object | None], None]


class Informer:
    """List, then watch from the list's resourceVersion; relist after 410 or errors.

    ``handler(type, obj, old)`` runs for every change seen, including the differences a
    relist finds. ``cache`` maps (namespace, name) to the latest object.
    """

    def __init__(
        self,
        client: KubeClient,
        path: str,
        handler: Handler,
        *,
        kind: str,
        api_version: str = "v1",
        label_selector: str | None = None,
    ) -> None:
        self.client = client
        self.path = path
        self.kind = kind
        self.api_version = api_version
        self.handler = handler
        self.label_selector = label_selector
        self.cache: dict[tuple[str, str], Object] = {}
        self.synced = asyncio.Event()

    @staticmethod
    def key(obj: Object) -> tuple[str, str]:
        return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]

    def _notify(self, kind: str, obj: Object, old: Object | None) -> None:
        try:
            self.handler(kind, obj, old)
        except Exception:
            log.exception("informer handler failed for %s %s", kind, self.key(obj))

    async def run(self) -> None:
        delay = 0.05
        while True:
            try:
                listed = await self.client.get(self.path, labelSelector=self.label_selector)
                # List items carry no kind/apiVersion; watch events do. Make the cache uniform.
                fresh = {
                    self.key(o): {"apiVersion": self.api_version, "kind": self.kind, **o}
                    for o in listed["items"]
                }
                for key, old in list(self.cache.items()):
                    if key not in fresh:
                        del self.cache[key]
                        self._notify("DELETED", old, old)
                for key, obj in fresh.items():
                    old = self.cache.get(key)
                    self.cache[key] = obj
                    if old is None:
                        self._notify("ADDED", obj, None)
                    elif old["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
                        self._notify("MODIFIED", obj, old)
                self.synced.set()
                version = listed["metadata"]["resourceVersion"]
                async for event in self.client.watch(
                    self.path,
                    resourceVersion=version,
                    labelSelector=self.label_selector,
                    allowWatchBookmarks=True,
                ):
                    kind, obj = event["type"], event["object"]
                    if kind == "ERROR":
                        break
                    if kind == "BOOKMARK":
                        continue
                    key = self.key(obj)
                    old = self.cache.get(key)
                    if kind == "DELETED":
                        self.cache.pop(key, None)
                    else:
                        self.cache[key] = obj
                    self._notify(kind, obj, old)
                delay = 0.05
            except asyncio.CancelledError:
                raise
            except (aiohttp.ClientError, ClientError, ValueError) as error:
                log.debug("informer %s: %s; relisting in %.2fs", self.path, error, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
