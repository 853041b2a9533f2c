"""A small JSON client for the Kubernetes API, over kubernetes_asyncio's ApiClient.

The Job executor works with plain dicts (the manifests of ``k8s_objects`` and the pod
status it reads), streams (``pods/log?follow=true``) and watches; kubernetes_asyncio's
generated methods turn objects into models and have no ``sinceTime`` for logs. So this
module keeps their configuration, authentication and connection pool, and sends the
requests itself through ``ApiClient.call_api``.

Nothing is loaded at import time: :func:`connect` reads the kubeconfig (or the pod's
service account, in the cluster) when an executor first needs the API.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncGenerator
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

Object = dict[str, Any]


class KubeError(Exception):
    """An error answer of the API server: ``status`` (HTTP) and its Status ``reason``."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


async def connect(kubeconfig: str | None = None, context: str | None = None) -> KubeClient:
    """A client from ``kubeconfig`` (or ``$KUBECONFIG`` / ``~/.kube/config``), or from the
    pod's service account when running in a cluster without a kubeconfig."""
    configuration = client.Configuration()
    in_cluster = (
        not kubeconfig
        and not os.environ.get("KUBECONFIG")
        and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    )
    if in_cluster:
        config.load_incluster_config(client_configuration=configuration)
    else:
        await config.load_kube_config(
            config_file=kubeconfig or os.environ.get("KUBECONFIG") or None,
            context=context,
            client_configuration=configuration,
        )
    return KubeClient(client.ApiClient(configuration))


class KubeClient:
    """JSON requests, byte streams and watches; ``timeout`` bounds each plain request."""

    def __init__(self, api_client: client.ApiClient, timeout: float = 30.0) -> None:
        self.api_client = api_client
        self.timeout = timeout

    async def close(self) -> None:
        await self.api_client.close()

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: Any = None,
    ) -> aiohttp.ClientResponse:
        """Send one request; the open response when it succeeded, else :class:`KubeError`.

        ``query``: the query parameters; ``body``: sent as JSON (or as ``content_type`` says);
        ``timeout``: seconds or an ``aiohttp.ClientTimeout``, by default ``self.timeout``.
        """
        response: aiohttp.ClientResponse = await self.api_client.call_api(
            path,
            method,
            path_params={},
            query_params=query or [],
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
            _request_timeout=timeout if timeout is not None else self.timeout,
        )
        if not 200 <= response.status <= 299:
            text = await response.text(errors="replace")
            response.release()
            try:
                status = json.loads(text)
                reason, message = status.get("reason", ""), status.get("message", text)
            except ValueError:
                reason, message = response.reason or "", text
            raise KubeError(response.status, reason, message)
        return response

    async def request(self, method: str, path: str, **options: Any) -> Object:
        """One request; the answer as a dict. Raises :class:`KubeError`.

        ``options``: ``query``, ``body``, ``content_type`` and ``timeout``, as for :meth:`_send`.
        """
        response = await self._send(method, path, **options)
        async with response:
            data = await response.read()
        return json.loads(data) if data else {}

    async def get(self, path: str) -> Object | None:
        """The object at ``path``, or None when there is none."""
        try:
            return await self.request("GET", path)
        except KubeError as error:
            if error.status == 404:
                return None
            raise

    async def stream(
        self, path: str, query: list[tuple[str, Any]], *, idle_timeout: float
    ) -> AsyncGenerator[bytes, None]:
        """The body of a long request (a followed log), chunk by chunk, as it comes.

        Ends with the response; raises ``asyncio.TimeoutError`` when nothing arrives for
        ``idle_timeout`` seconds, so a stalled stream is noticed and reconnected.
        """
        timeout = aiohttp.ClientTimeout(
            total=None, connect=self.timeout, sock_connect=self.timeout, sock_read=idle_timeout
        )
        response = await self._send("GET", path, query=query, timeout=timeout)
        async with response:
            async for chunk in response.content.iter_any():
                yield chunk

    async def watch(
        self, path: str, query: list[tuple[str, Any]], *, server_timeout: int = 300
    ) -> AsyncGenerator[Object, None]:
        """Watch events (``{"type", "object"}``) from ``path`` until the server ends the watch."""
        params = [*query, ("watch", "true"), ("timeoutSeconds", server_timeout)]
        buffer = b""
        async for chunk in self.stream(path, params, idle_timeout=server_timeout + 30):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    yield json.loads(line)


async def sleep_or_event(event: asyncio.Event, seconds: float) -> bool:
    """Wait for ``event`` at most ``seconds``; True when it was set."""
    try:
        await asyncio.wait_for(event.wait(), seconds)
    except TimeoutError:
        return False
    return True
