"""Where the server extension's job requests go: the hub's job service, or an embedded manager.

Both back ends answer with the same JSON documents and raise the same
:class:`~jupyter_to_job.rest.ApiError`, so the handlers do not know which one runs:

- :class:`ServiceRelay` (in a JupyterHub): forwards to the job service with the server's own
  ``$JUPYTERHUB_API_TOKEN``; the service decides what this user may do.
- :class:`EmbeddedJobs` (standalone: Binder, a laptop): a :class:`JobManager` with the
  local executor inside this server, for this server's one user.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote, urlencode

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest, HTTPResponse

from ..access import Caller
from ..jobs_api import JobsAPI
from ..manager import JobManager
from ..models import CreateJob
from ..pipelines import CreatePipeline
from ..pipelines_api import PipelinesAPI
from ..rest import ApiError
from ..schedules import CreateSchedule
from ..schedules_api import SchedulesAPI
from ..scopes import READ_JOBS_SCOPE, WRITE_JOBS_SCOPE

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutputFile:
    filename: str
    content: bytes


class JobsBackend(Protocol):
    """What the extension's handlers call; every method raises ApiError (or a job error)."""

    mode: str

    async def list_jobs(self, params: dict[str, str]) -> dict[str, Any]: ...

    async def create_job(
        self, request: CreateJob, notebook: dict[str, Any] | None
    ) -> tuple[int, dict[str, Any]]: ...

    async def input_notebook(self, job_id: str) -> dict[str, Any]: ...

    async def describe(self, job_id: str) -> dict[str, Any]: ...

    async def update(self, job_id: str, body: bytes) -> dict[str, Any]: ...

    async def delete(self, job_id: str) -> None: ...

    async def read_log(self, job_id: str, params: dict[str, str]) -> dict[str, Any]: ...

    async def follow_log(self, job_id: str, params: dict[str, str]) -> AsyncIterator[bytes]:
        """Newline-delimited JSON log chunks until the job is final (checked before the
        first yield, so errors are ordinary answers)."""
        ...

    async def output(self, job_id: str, fmt: str) -> OutputFile: ...

    async def flavors(self) -> dict[str, Any]: ...

    async def config(self) -> dict[str, Any]: ...

    async def list_schedules(self) -> dict[str, Any]: ...

    async def create_schedule(
        self,
        request: CreateSchedule,
        notebook: dict[str, Any] | None,
        notebooks: dict[str, dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """``notebook`` for a job schedule, ``notebooks`` (by input path) for a pipeline's."""
        ...

    async def describe_schedule(self, schedule_id: str) -> dict[str, Any]: ...

    async def update_schedule(self, schedule_id: str, body: bytes) -> dict[str, Any]: ...

    async def delete_schedule(self, schedule_id: str) -> None: ...

    async def list_pipelines(self) -> dict[str, Any]: ...

    async def create_pipeline(
        self, request: CreatePipeline, notebooks: dict[str, dict[str, Any]]
    ) -> dict[str, Any]: ...

    async def describe_pipeline(self, pipeline_id: str) -> dict[str, Any]: ...

    async def update_pipeline(self, pipeline_id: str, body: bytes) -> dict[str, Any]: ...

    async def delete_pipeline(self, pipeline_id: str) -> None: ...

    async def notification_settings(self) -> dict[str, Any]: ...

    async def put_notification_settings(self, body: bytes) -> dict[str, Any]: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...


# -- hub mode ---------------------------------------------------------------------------


def _unreachable(url: str) -> ApiError:
    return ApiError(
        503,
        f"The job service cannot be reached at {url}. Try again in a minute; if it keeps "
        "happening, tell the hub admins.",
        "service-unreachable",
    )


def _service_error(response: HTTPResponse, body: bytes) -> ApiError:
    """The service's own JSON error, passed on; anything else as a 502."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return ApiError(response.code, data["message"], str(data.get("reason") or "error"))
    return ApiError(
        502,
        f"The job service answered {response.code} without an explanation. Try again; if it "
        "keeps happening, tell the hub admins.",
        "bad-gateway",
    )


class ServiceRelay:
    """The job service over HTTP, as this server's user (the server's hub token)."""

    mode = "hub"

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

    def _url(self, path: str, params: dict[str, str] | None = None) -> str:
        url = self.service_url + "api/" + path
        return f"{url}?{urlencode(params)}" if params else url

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

    async def _fetch(
        self, method: str, path: str, *, params: dict[str, str] | None = None, body: Any = None
    ) -> HTTPResponse:
        self._check_configured()
        request = HTTPRequest(
            self._url(path, params),
            method=method,
            headers=self._headers(body is not None),
            body=body if body is None or isinstance(body, bytes) else json.dumps(body),
            request_timeout=self.request_timeout,
            allow_nonstandard_methods=True,
        )
        try:
            response = await self._http.fetch(request, raise_error=False)
        except (OSError, HTTPClientError):
            raise _unreachable(self.service_url) from None
        if response.code == 599:  # tornado's "no answer" (refused, timed out)
            raise _unreachable(self.service_url)
        if response.code >= 400:
            raise _service_error(response, response.body or b"")
        return response

    async def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = await self._fetch(method, path, **kwargs)
        result: dict[str, Any] = json.loads(response.body or b"{}")
        return result

    @staticmethod
    def _job(job_id: str) -> str:
        return "jobs/" + quote(job_id, safe="")

    async def list_jobs(self, params: dict[str, str]) -> dict[str, Any]:
        return await self._json("GET", "jobs", params=params)

    async def create_job(
        self, request: CreateJob, notebook: dict[str, Any] | None
    ) -> tuple[int, dict[str, Any]]:
        payload = request.model_dump(mode="json", exclude_none=True)
        if notebook is not None:  # None: a rerun of the job's own snapshot
            payload["notebook"] = notebook
        response = await self._fetch("POST", "jobs", body=json.dumps(payload).encode())
        return response.code, json.loads(response.body)

    async def input_notebook(self, job_id: str) -> dict[str, Any]:
        return await self._json("GET", self._job(job_id) + "/input")

    async def describe(self, job_id: str) -> dict[str, Any]:
        return await self._json("GET", self._job(job_id))

    async def update(self, job_id: str, body: bytes) -> dict[str, Any]:
        return await self._json("PATCH", self._job(job_id), body=body)

    async def delete(self, job_id: str) -> None:
        await self._fetch("DELETE", self._job(job_id))

    async def read_log(self, job_id: str, params: dict[str, str]) -> dict[str, Any]:
        return await self._json("GET", self._job(job_id) + "/logs", params=params)

    async def follow_log(self, job_id: str, params: dict[str, str]) -> AsyncIterator[bytes]:
        await self.describe(job_id)  # not found, forbidden...: an ordinary error answer
        return self._stream(self._url(self._job(job_id) + "/logs", {**params, "follow": "1"}))

    async def _stream(self, url: str) -> AsyncIterator[bytes]:
        self._check_configured()
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        status: dict[str, int] = {}
        gone = False

        def on_header(line: str) -> None:
            if line.startswith("HTTP/"):
                status["code"] = int(line.split()[1])

        def on_chunk(data: bytes) -> None:
            if gone:  # the reader left: raising here makes tornado drop the connection
                raise ConnectionAbortedError("the log reader went away")
            queue.put_nowait(data)

        request = HTTPRequest(
            url,
            headers=self._headers(),
            streaming_callback=on_chunk,
            header_callback=on_header,
            request_timeout=self.follow_timeout,
        )
        fetch = asyncio.ensure_future(self._http.fetch(request, raise_error=False))
        fetch.add_done_callback(lambda _: queue.put_nowait(None))
        error_body = b""
        try:
            while (data := await queue.get()) is not None:
                if status.get("code") == 200:
                    yield data
                else:
                    error_body += data
            response = fetch.result()
            if response.code == 599:
                raise _unreachable(self.service_url)
            if response.code >= 400:
                raise _service_error(response, error_body)
        finally:
            gone = True

    async def output(self, job_id: str, fmt: str) -> OutputFile:
        response = await self._fetch("GET", f"{self._job(job_id)}/outputs/{fmt}")
        filename = _filename(response.headers.get("Content-Disposition", "")) or f"{job_id}.{fmt}"
        return OutputFile(filename, response.body or b"")

    async def flavors(self) -> dict[str, Any]:
        return await self._json("GET", "flavors")

    @staticmethod
    def _schedule(schedule_id: str) -> str:
        return "schedules/" + quote(schedule_id, safe="")

    async def list_schedules(self) -> dict[str, Any]:
        return await self._json("GET", "schedules")

    async def create_schedule(
        self,
        request: CreateSchedule,
        notebook: dict[str, Any] | None,
        notebooks: dict[str, dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        payload = request.model_dump(mode="json", exclude_none=True)
        if request.pipeline is not None:
            payload["notebooks"] = notebooks
        else:
            payload["notebook"] = notebook
        return await self._json("POST", "schedules", body=json.dumps(payload).encode())

    async def describe_schedule(self, schedule_id: str) -> dict[str, Any]:
        return await self._json("GET", self._schedule(schedule_id))

    async def update_schedule(self, schedule_id: str, body: bytes) -> dict[str, Any]:
        return await self._json("PATCH", self._schedule(schedule_id), body=body)

    async def delete_schedule(self, schedule_id: str) -> None:
        await self._fetch("DELETE", self._schedule(schedule_id))

    @staticmethod
    def _pipeline(pipeline_id: str) -> str:
        return "pipelines/" + quote(pipeline_id, safe="")

    async def list_pipelines(self) -> dict[str, Any]:
        return await self._json("GET", "pipelines")

    async def create_pipeline(
        self, request: CreatePipeline, notebooks: dict[str, dict[str, Any]]
    ) -> dict[str, Any]:
        payload = {**request.model_dump(mode="json", exclude_none=True), "notebooks": notebooks}
        return await self._json("POST", "pipelines", body=json.dumps(payload).encode())

    async def describe_pipeline(self, pipeline_id: str) -> dict[str, Any]:
        return await self._json("GET", self._pipeline(pipeline_id))

    async def update_pipeline(self, pipeline_id: str, body: bytes) -> dict[str, Any]:
        return await self._json("PATCH", self._pipeline(pipeline_id), body=body)

    async def delete_pipeline(self, pipeline_id: str) -> None:
        await self._fetch("DELETE", self._pipeline(pipeline_id))

    async def notification_settings(self) -> dict[str, Any]:
        return await self._json("GET", "notification-settings")

    async def put_notification_settings(self, body: bytes) -> dict[str, Any]:
        return await self._json("PUT", "notification-settings", body=body)

    async def config(self) -> dict[str, Any]:
        config = await self._json("GET", "config")
        config.setdefault("features", {})["save_outputs"] = True  # this extension's own
        return config

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None


def _filename(disposition: str) -> str | None:
    """The plain ``filename="..."`` of a Content-Disposition header."""
    marker = 'filename="'
    start = disposition.find(marker)
    if start < 0:
        return None
    start += len(marker)
    end = disposition.find('"', start)
    return disposition[start:end] if end > start else None


# -- standalone mode ---------------------------------------------------------------------


def local_caller(name: str) -> Caller:
    """The one user of a standalone server: their own jobs, read and write."""
    return Caller(
        name=name,
        scopes=frozenset({f"{READ_JOBS_SCOPE}!user={name}", f"{WRITE_JOBS_SCOPE}!user={name}"}),
    )


class EmbeddedJobs:
    """Jobs run by a manager inside this server, for its one user."""

    mode = "standalone"

    def __init__(
        self,
        api: JobsAPI,
        owner: str,
        schedules: SchedulesAPI | None = None,
        pipelines: PipelinesAPI | None = None,
    ):
        self.api = api
        self.caller = local_caller(owner)
        self.schedules = schedules
        self.pipelines = pipelines

    def _pipelines(self) -> PipelinesAPI:
        if self.pipelines is None:
            raise ApiError(404, "This server runs no pipelines.", "not-found")
        return self.pipelines

    def _schedules(self) -> SchedulesAPI:
        if self.schedules is None:
            raise ApiError(404, "This server runs no schedules.", "not-found")
        return self.schedules

    @property
    def manager(self) -> JobManager:
        return self.api.manager

    async def list_jobs(self, params: dict[str, str]) -> dict[str, Any]:
        return (await self.api.list_jobs(self.caller, params)).model_dump(mode="json")

    async def create_job(
        self, request: CreateJob, notebook: dict[str, Any] | None
    ) -> tuple[int, dict[str, Any]]:
        result = await self.api.create(self.caller, request, notebook)
        return (201 if result.created else 200), result.model_dump(mode="json")

    async def input_notebook(self, job_id: str) -> dict[str, Any]:
        return await self.api.input_notebook(self.caller, job_id)

    async def describe(self, job_id: str) -> dict[str, Any]:
        return (await self.api.describe(self.caller, job_id)).model_dump(mode="json")

    async def update(self, job_id: str, body: bytes) -> dict[str, Any]:
        return (await self.api.update(self.caller, job_id, body)).model_dump(mode="json")

    async def delete(self, job_id: str) -> None:
        await self.api.delete(self.caller, job_id)

    async def read_log(self, job_id: str, params: dict[str, str]) -> dict[str, Any]:
        return (await self.api.read_log(self.caller, job_id, params)).model_dump(mode="json")

    async def follow_log(self, job_id: str, params: dict[str, str]) -> AsyncIterator[bytes]:
        chunks = await self.api.follow_log(self.caller, job_id, params)

        async def lines() -> AsyncIterator[bytes]:
            try:
                async for chunk in chunks:
                    yield chunk.model_dump_json().encode() + b"\n"
            finally:
                await chunks.aclose()  # type: ignore[attr-defined]

        return lines()

    async def output(self, job_id: str, fmt: str) -> OutputFile:
        download = await self.api.output(self.caller, job_id, fmt)
        with download.open() as stream:
            return OutputFile(download.filename, stream.read())

    async def flavors(self) -> dict[str, Any]:
        return (await self.api.flavors(self.caller)).model_dump(mode="json")

    async def config(self) -> dict[str, Any]:
        return self.api.config(self.caller).model_dump(mode="json")

    async def list_schedules(self) -> dict[str, Any]:
        return self._schedules().list_schedules(self.caller).model_dump(mode="json")

    async def create_schedule(
        self,
        request: CreateSchedule,
        notebook: dict[str, Any] | None,
        notebooks: dict[str, dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        created = await self._schedules().create(
            self.caller, request, notebook, notebooks=notebooks
        )
        return created.model_dump(mode="json")

    async def describe_schedule(self, schedule_id: str) -> dict[str, Any]:
        return self._schedules().describe(self.caller, schedule_id).model_dump(mode="json")

    async def update_schedule(self, schedule_id: str, body: bytes) -> dict[str, Any]:
        updated = self._schedules().update(self.caller, schedule_id, body)
        return updated.model_dump(mode="json")

    async def delete_schedule(self, schedule_id: str) -> None:
        self._schedules().delete(self.caller, schedule_id)

    async def list_pipelines(self) -> dict[str, Any]:
        return self._pipelines().list_pipelines(self.caller).model_dump(mode="json")

    async def create_pipeline(
        self, request: CreatePipeline, notebooks: dict[str, dict[str, Any]]
    ) -> dict[str, Any]:
        created = await self._pipelines().create(self.caller, request, notebooks)
        return created.model_dump(mode="json")

    async def describe_pipeline(self, pipeline_id: str) -> dict[str, Any]:
        return self._pipelines().describe(self.caller, pipeline_id).model_dump(mode="json")

    async def update_pipeline(self, pipeline_id: str, body: bytes) -> dict[str, Any]:
        updated = await self._pipelines().update(self.caller, pipeline_id, body)
        return updated.model_dump(mode="json")

    async def delete_pipeline(self, pipeline_id: str) -> None:
        self._pipelines().delete(self.caller, pipeline_id)

    async def notification_settings(self) -> dict[str, Any]:
        """The embedded manager keeps its owner's default in its own store and sends it with
        its own notifier, as the job service does."""
        return self.api.notification_settings(self.caller).model_dump(mode="json")

    async def put_notification_settings(self, body: bytes) -> dict[str, Any]:
        saved = self.api.put_notification_settings(self.caller, body)
        return saved.model_dump(mode="json")

    async def start(self) -> None:
        report = await self.manager.start()
        log.info(
            "Run as Job (standalone): %d job(s) adopted, %d queued",
            len(report.adopted),
            report.queued,
        )
        if self.schedules is not None:
            self.schedules.scheduler.start()
        if self.pipelines is not None:
            self.pipelines.pipelines.start()

    async def close(self) -> None:
        if self.schedules is not None:
            await self.schedules.scheduler.stop()
        if self.pipelines is not None:
            await self.pipelines.pipelines.close()
        if not self.manager.closed:
            await self.manager.shutdown(stop_jobs=False)
