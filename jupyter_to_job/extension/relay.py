"""The server extension's one relay to a job service: the hub's, or the one embedded in
this server (standalone mode, :mod:`.embedded`).

:meth:`ServiceRelay.pass_on` sends the lab's request on, as this server's user (a token
in the ``Authorization`` header), and writes the service's answer back as it arrives;
the service decides what this user may do. A refusal comes back as the service's own
:class:`~jupyter_to_job.rest.ApiError`.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest, HTTPResponse
from tornado.httputil import HTTPHeaders
from tornado.iostream import StreamClosedError
from tornado.web import RequestHandler

from ..rest import ApiError

# What of the service's answer reaches the lab besides its status and body.
PASSED_HEADERS = (
    "Content-Type",
    "Content-Disposition",
    "Cache-Control",
    "X-Content-Type-Options",
    "Content-Security-Policy",
    "X-Accel-Buffering",
)


@dataclass(frozen=True)
class OutputFile:
    filename: str
    content: bytes


def _unreachable(url: str) -> ApiError:
    return ApiError(
        503,
        f"The job service cannot be reached at {url}. Try again in a minute; if it keeps "
        "happening, tell the hub admins.",
        "service-unreachable",
    )


def _service_error(code: int, body: bytes) -> ApiError:
    """The service's own JSON error, passed on; anything else as a 502."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return ApiError(code, data["message"], str(data.get("reason") or "error"))
    return ApiError(
        502,
        f"The job service answered {code} without an explanation. Try again; if it "
        "keeps happening, tell the hub admins.",
        "bad-gateway",
    )


def job_path(job_id: str) -> str:
    """The service's address of a job, under ``api/``."""
    return "jobs/" + quote(job_id, safe="")


class ServiceRelay:
    """A job service over HTTP, as this server's user (the token it is given)."""

    def __init__(
        self,
        service_url: str,
        token: str,
        *,
        request_timeout: float = 60.0,
        follow_timeout: float = 24 * 3600.0,
        http: AsyncHTTPClient | None = None,
    ):
        self.configured = bool(service_url)
        self.service_url = service_url.rstrip("/") + "/"
        self._token = token
        self.request_timeout = request_timeout
        self.follow_timeout = follow_timeout
        self._http = http or AsyncHTTPClient()

    def close(self) -> None:
        self._http.close()

    def _url(self, path: str, query: str = "") -> str:
        url = self.service_url + "api/" + path
        return f"{url}?{query}" if query else url

    def _headers(self, body: bool = False) -> dict[str, str]:
        headers = {"Authorization": f"token {self._token}", "Accept": "application/json"}
        if body:
            headers["Content-Type"] = "application/json"
        return headers

    def _check_configured(self) -> None:
        if not self.configured:
            raise ApiError(
                503,
                "Run as Job is not set up on this hub: this server does not know the job "
                "service's address (JUPYTER_TO_JOB_SERVICE_URL). Tell the hub admins.",
                "not-configured",
            )

    def _request(self, method: str, url: str, body: bytes | None, **kwargs: Any) -> HTTPRequest:
        return HTTPRequest(
            url,
            method=method,
            headers=self._headers(body is not None),
            body=body,
            allow_nonstandard_methods=True,
            **kwargs,
        )

    # -- the service's answers, read here ---------------------------------------------

    async def fetch(
        self, method: str, path: str, *, params: dict[str, str] | None = None, body: Any = None
    ) -> HTTPResponse:
        """The service's answer to ``method path``; a 4xx or 5xx raises its ApiError."""
        self._check_configured()
        data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        request = self._request(
            method,
            self._url(path, urlencode(params) if params else ""),
            data,
            request_timeout=self.request_timeout,
        )
        try:
            response = await self._http.fetch(request, raise_error=False)
        except (OSError, HTTPClientError):
            raise _unreachable(self.service_url) from None
        if response.code == 599:  # tornado's "no answer" (refused, timed out)
            raise _unreachable(self.service_url)
        if response.code >= 400:
            raise _service_error(response.code, response.body or b"")
        return response

    async def json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = await self.fetch(method, path, **kwargs)
        result: dict[str, Any] = json.loads(response.body or b"{}")
        return result

    async def describe(self, job_id: str) -> dict[str, Any]:
        return await self.json("GET", job_path(job_id))

    async def input_notebook(self, job_id: str) -> dict[str, Any]:
        return await self.json("GET", job_path(job_id) + "/input")

    async def output(self, job_id: str, fmt: str) -> OutputFile:
        response = await self.fetch("GET", f"{job_path(job_id)}/outputs/{fmt}")
        filename = _filename(response.headers.get("Content-Disposition", "")) or f"{job_id}.{fmt}"
        return OutputFile(filename, response.body or b"")

    # -- the service's answers, passed on to the lab -----------------------------------

    async def pass_on(
        self,
        handler: RequestHandler,
        path: str,
        *,
        body: bytes | None = None,
        stream: bool = False,
        follow: bool = False,
    ) -> None:
        """Send ``handler``'s request (its method and query, with ``body``) to the service's
        ``api/<path>`` and write the answer back: status, :data:`PASSED_HEADERS`, body.
        ``stream``: write each part as it arrives (logs, downloads), else all at once;
        ``follow``: a log that may stream for long. Errors raise before anything is written.
        """
        self._check_configured()
        parts: asyncio.Queue[bytes | None] = asyncio.Queue()
        status: dict[str, int] = {}
        headers = HTTPHeaders()
        gone = False

        def on_header(line: str) -> None:
            if line.startswith("HTTP/"):
                status["code"] = int(line.split()[1])
                headers.clear()
            elif line.strip():
                headers.parse_line(line)

        def on_chunk(data: bytes) -> None:
            if gone:  # the reader left: raising here makes tornado drop the connection
                raise ConnectionAbortedError("the reader went away")
            parts.put_nowait(data)

        request = self._request(
            handler.request.method or "GET",
            self._url(path, handler.request.query),
            body,
            streaming_callback=on_chunk,
            header_callback=on_header,
            request_timeout=self.follow_timeout if follow else self.request_timeout,
        )
        fetch = asyncio.ensure_future(self._http.fetch(request, raise_error=False))
        fetch.add_done_callback(lambda _: parts.put_nowait(None))
        kept: list[bytes] = []
        started = False
        try:
            while (data := await parts.get()) is not None:
                if stream and status.get("code", 599) < 400:
                    if not started:
                        started = _start_answer(handler, status["code"], headers)
                    handler.write(data)
                    await handler.flush()
                else:
                    kept.append(data)
            try:
                code = fetch.result().code
            except (OSError, HTTPClientError):
                code = 599
            if started:
                handler.finish()  # what came of it, should the service have broken off
            elif code == 599:
                raise _unreachable(self.service_url)
            elif code >= 400:
                raise _service_error(code, b"".join(kept))
            else:
                _start_answer(handler, code, headers)
                handler.finish(b"".join(kept) if code != 204 else None)
        except StreamClosedError:
            return  # the reader went away
        finally:
            gone = True


def _start_answer(handler: RequestHandler, code: int, headers: HTTPHeaders) -> bool:
    handler.set_status(code)
    for name in PASSED_HEADERS:
        if name in headers:
            handler.set_header(name, headers[name])
    return True


def _filename(disposition: str) -> str | None:
    """The plain ``filename="..."`` of a Content-Disposition header."""
    marker = 'filename="'
    start = disposition.find(marker)
    if start < 0:
        return None
    start += len(marker)
    end = disposition.find('"', start)
    return disposition[start:end] if end > start else None
