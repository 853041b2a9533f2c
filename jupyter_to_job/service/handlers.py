"""The job service's REST handlers, under ``/services/<name>/api/``.

Design notes: docs/design/job-service.md, "jupyter_to_job.service.handlers".
"""

from __future__ import annotations

import json
import logging
from typing import Any

from jupyterhub.services.auth import HubAuthenticated, UserNotAllowed
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry
from pydantic import BaseModel
from tornado import web
from tornado.http1connection import HTTP1Connection
from tornado.iostream import StreamClosedError

from ..access import Caller
from ..jobs_api import JobsAPI
from ..metrics import METRICS_SCOPE, metrics_text
from ..output_uploads import (
    MAX_OUTPUT_BYTES,
    OutputTooLarge,
    OutputUpload,
    upload_token_valid,
)
from ..pipelines_api import PipelinesAPI
from ..rest import (
    CREATE_BODY_SLACK,
    OUTPUT_CONTENT_TYPES,
    ApiError,
    BoundedBodyMixin,
    as_api_error,
    change_bounds,
    content_disposition,
    error_response,
    log_error,
    query_arguments,
    settings_bounds,
    too_large,
)
from ..schedules_api import SchedulesAPI
from ..store import ACTIVE

log = logging.getLogger("jupyter_to_job.service")

JOB_ID = r"(?P<job_id>[^/]+)"
SCHEDULE_ID = r"(?P<schedule_id>[^/]+)"
PIPELINE_ID = r"(?P<pipeline_id>[^/]+)"
DOWNLOAD_CHUNK = 256 * 1024
TRUE_WORDS = {"1", "true", "yes", "on"}


class JSONErrorsMixin:
    """JSON error bodies and quiet logs for expected refusals (one place, every handler)."""

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        error = as_api_error(kwargs.get("exc_info", (None, None, None))[1], status_code)
        self.set_status(error.status)  # type: ignore[attr-defined]
        self.clear_header("Content-Disposition")  # type: ignore[attr-defined]
        self.set_header("Content-Type", "application/json; charset=utf-8")  # type: ignore[attr-defined]
        self.finish(error_response(error))  # type: ignore[attr-defined]

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        log_error(log, value, as_api_error(value))


class HubScopedMixin:
    """A handler of the job API that lets in whom the hub grants one of ``access_scopes``."""

    def initialize(self, api: JobsAPI, hub_auth: Any, access_scopes: set[str]) -> None:
        self.api = api
        self.hub_auth = hub_auth
        self._access_scopes = access_scopes

    @property
    def hub_scopes(self) -> set[str]:
        return self._access_scopes


class JobServiceHandler(JSONErrorsMixin, HubScopedMixin, HubAuthenticated, web.RequestHandler):
    """Base of the authenticated handlers: ``self.caller`` is who the hub says is asking."""

    caller: Caller

    async def prepare(self) -> None:
        # Async, instead of HubAuth's thread-pool bridge behind get_current_user.
        model = await self.hub_auth.get_user(self, sync=False)
        if not model:
            raise ApiError(
                401,
                "Sign in first: send your JupyterHub token as 'Authorization: token …'.",
                "unauthenticated",
            )
        try:
            self._hub_auth_user_cache = self.check_hub_user(model)
        except UserNotAllowed:
            raise ApiError(
                403,
                "This token may not use the job service: it lacks the "
                f"{' or '.join(sorted(self._access_scopes))} scope.",
                "forbidden",
            ) from None
        self.caller = Caller.from_hub_model(model)

    def params(self) -> dict[str, str]:
        return query_arguments(self.request.query_arguments)

    def write_model(self, model: BaseModel, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(model.model_dump_json())


@web.stream_request_body
class JobBodyHandler(BoundedBodyMixin, JobServiceHandler):
    """Base of the handlers whose verbs take a body: streamed, bounded, and refused only
    once it is in, so that a proxy in front passes the refusal on instead of its own error.
    """

    _refusal: ApiError | None = None

    async def prepare(self) -> None:
        bounds = self.body_bounds()
        try:
            await super().prepare()
        except ApiError as refusal:
            if bounds is None or self.body_beyond_server_ceiling():
                raise
            self._refusal = refusal  # the body is read (and dropped) first
            return
        if bounds is not None:
            self.limit_body(*bounds)

    def get_current_user(self) -> Any:
        # Every verb is @web.authenticated, so each asks this before doing anything.
        if self._refusal is not None:
            raise self._refusal
        return super().get_current_user()


class NotebookBodyHandler(JobBodyHandler):
    """A POST carries a notebook (a job's or a schedule's): bounded by the notebook limit."""

    def body_bounds(self) -> tuple[int, ApiError] | None:
        if self.request.method != "POST":
            return None
        limit = self.api.max_notebook_bytes
        return limit + CREATE_BODY_SLACK, too_large("The notebook", limit)


class JobsHandler(NotebookBodyHandler):
    @web.authenticated
    async def get(self) -> None:
        self.write_model(await self.api.list_jobs(self.caller, self.params()))

    @web.authenticated
    async def post(self) -> None:
        result = await self.api.create_job(self.caller, self.request_body())
        self.write_model(result, 201 if result.created else 200)


class JobHandler(JobBodyHandler):
    def body_bounds(self) -> tuple[int, ApiError] | None:
        return change_bounds(self.request.method, "job_id")

    @web.authenticated
    async def get(self, job_id: str) -> None:
        self.write_model(await self.api.describe(self.caller, job_id))

    @web.authenticated
    async def patch(self, job_id: str) -> None:
        self.write_model(await self.api.update(self.caller, job_id, self.request_body()))

    @web.authenticated
    async def delete(self, job_id: str) -> None:
        await self.api.delete(self.caller, job_id)
        self.set_status(204)
        self.finish()


class JobLogHandler(JobServiceHandler):
    @web.authenticated
    async def get(self, job_id: str) -> None:
        params = self.params()
        if params.pop("follow", "").lower() not in TRUE_WORDS:
            self.write_model(await self.api.read_log(self.caller, job_id, params))
            return
        chunks = await self.api.follow_log(self.caller, job_id, params)
        # Newline-delimited JSON: one JobLogChunk per line, the last with complete=true.
        self.set_header("Content-Type", "application/x-ndjson; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Accel-Buffering", "no")
        try:
            async for chunk in chunks:
                self.write(chunk.model_dump_json() + "\n")
                await self.flush()
        except StreamClosedError:
            return  # the reader went away
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]
        self.finish()


class JobInputHandler(JobServiceHandler):
    @web.authenticated
    async def get(self, job_id: str) -> None:
        """The notebook snapshot the job ran (JSON): what its rerun runs."""
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(await self.api.input_notebook(self.caller, job_id)))


class JobOutputHandler(JobServiceHandler):
    @web.authenticated
    async def get(self, job_id: str, fmt: str) -> None:
        download = await self.api.output(self.caller, job_id, fmt)
        self.set_header("Content-Type", OUTPUT_CONTENT_TYPES[fmt])
        self.set_header("Content-Disposition", content_disposition(download.filename))
        self.set_header("X-Content-Type-Options", "nosniff")
        # Notebook HTML is the user's content: never let it script the hub's origin.
        self.set_header("Content-Security-Policy", "sandbox")
        self.set_header("Cache-Control", "no-store")
        try:
            with download.open() as stream:
                while data := stream.read(DOWNLOAD_CHUNK):
                    self.write(data)
                    await self.flush()
        except StreamClosedError:
            return
        self.finish()


@web.stream_request_body
class JobUploadHandler(JSONErrorsMixin, web.RequestHandler):
    """A running job sends an output back (see :mod:`jupyter_to_job.output_uploads`).

    Authenticated by the job's own upload token (``Authorization: Bearer …``), which the
    job service gave that job's pod alone; it opens this job's uploads only, and only while
    the job runs. The body streams into a temporary file in the job's folder and replaces
    the output whole when it is all in.
    """

    _upload: OutputUpload | None = None

    def initialize(self, api: JobsAPI, **_: Any) -> None:
        self.api = api

    def get_current_user(self) -> str:
        """The job whose upload token the request carries; a 401 for anything else."""
        job_id = self.path_kwargs["job_id"]
        scheme, _, token = self.request.headers.get("Authorization", "").partition(" ")
        manager = self.api.manager
        try:
            files = manager.job_files(job_id)
        except ValueError:
            files = None
        if files is None or scheme.lower() != "bearer" or not upload_token_valid(files, token):
            raise ApiError(
                401,
                "Only a running job sends its outputs here, with its own upload token.",
                "unauthenticated",
            )
        row = manager.store.get(job_id)
        if row is None or row.job_status not in ACTIVE:
            raise ApiError(409, "The job has ended; its outputs are final.", "job-ended")
        fmt = self.path_kwargs["fmt"]
        if fmt not in (row.output_formats or ["ipynb"]):
            raise ApiError(400, f"The job was not asked for a {fmt} output.", "invalid")
        return job_id

    def prepare(self) -> None:
        if self.request.method != "PUT":
            return  # tornado answers 405
        job_id = self.current_user
        connection = self.request.connection
        declared = self.request.headers.get("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_OUTPUT_BYTES:
            raise self._too_large()
        if isinstance(connection, HTTP1Connection):
            connection.set_max_body_size(MAX_OUTPUT_BYTES + 1)
        files = self.api.manager.job_files(job_id)
        self._upload = OutputUpload(files.output(self.path_kwargs["fmt"]), MAX_OUTPUT_BYTES)

    def data_received(self, chunk: bytes) -> None:
        if self._upload is not None:
            self._upload.write(chunk)

    @staticmethod
    def _too_large() -> ApiError:
        limit = MAX_OUTPUT_BYTES // (1024 * 1024)
        return ApiError(413, f"An output may be at most {limit} MiB.", "too-large")

    @web.authenticated
    async def put(self, job_id: str, fmt: str) -> None:
        assert self._upload is not None
        upload, self._upload = self._upload, None
        try:
            upload.commit()
        except OutputTooLarge:
            raise self._too_large() from None
        log.info("Job %s sent its %s output (%d bytes)", job_id, fmt, upload.size)
        self.set_status(204)
        self.finish()

    def on_finish(self) -> None:
        if self._upload is not None:  # refused, or broken off: drop the part
            self._upload.discard()

    def on_connection_close(self) -> None:
        self.on_finish()


class NotificationSettingsHandler(JobBodyHandler):
    """The caller's default notifications: GET them, PUT them (see JobsAPI)."""

    def body_bounds(self) -> tuple[int, ApiError] | None:
        return settings_bounds(self.request.method)

    @web.authenticated
    async def get(self) -> None:
        self.write_model(self.api.notification_settings(self.caller))

    @web.authenticated
    async def put(self) -> None:
        self.write_model(self.api.put_notification_settings(self.caller, self.request_body()))


class SchedulesAndPipelines:
    """The handlers' ``self.schedules`` and ``self.pipelines``; a 404 where the service runs
    none."""

    _schedules: SchedulesAPI | None = None
    _pipelines: PipelinesAPI | None = None

    def initialize(  # type: ignore[override]
        self,
        schedules: SchedulesAPI | None = None,
        pipelines: PipelinesAPI | None = None,
        **kwargs: Any,
    ) -> None:
        super().initialize(**kwargs)  # type: ignore[misc]
        self._schedules = schedules
        self._pipelines = pipelines

    @property
    def schedules(self) -> SchedulesAPI:
        if self._schedules is None:
            raise ApiError(404, "This job service runs no schedules.", "not-found")
        return self._schedules

    @property
    def pipelines(self) -> PipelinesAPI:
        if self._pipelines is None:
            raise ApiError(404, "This job service runs no pipelines.", "not-found")
        return self._pipelines


class SchedulesHandler(SchedulesAndPipelines, NotebookBodyHandler):
    @web.authenticated
    async def get(self) -> None:
        self.write_model(self.schedules.list_schedules(self.caller))

    @web.authenticated
    async def post(self) -> None:
        result = await self.schedules.create_schedule(self.caller, self.request_body())
        self.write_model(result, 201)


class ScheduleHandler(SchedulesAndPipelines, JobBodyHandler):
    def body_bounds(self) -> tuple[int, ApiError] | None:
        return change_bounds(self.request.method, "schedule_id")

    @web.authenticated
    async def get(self, schedule_id: str) -> None:
        self.write_model(self.schedules.describe(self.caller, schedule_id))

    @web.authenticated
    async def patch(self, schedule_id: str) -> None:
        self.write_model(self.schedules.update(self.caller, schedule_id, self.request_body()))

    @web.authenticated
    async def delete(self, schedule_id: str) -> None:
        self.schedules.delete(self.caller, schedule_id)
        self.set_status(204)
        self.finish()


class PipelinesHandler(SchedulesAndPipelines, JobBodyHandler):
    def body_bounds(self) -> tuple[int, ApiError] | None:
        # All the pipeline's notebooks together are bounded by the notebook limit.
        if self.request.method != "POST":
            return None
        limit = self.api.max_notebook_bytes
        return limit + CREATE_BODY_SLACK, too_large("The notebooks of the pipeline", limit)

    @web.authenticated
    async def get(self) -> None:
        self.write_model(self.pipelines.list_pipelines(self.caller))

    @web.authenticated
    async def post(self) -> None:
        result = await self.pipelines.create_pipeline(self.caller, self.request_body())
        self.write_model(result, 201)


class PipelineHandler(SchedulesAndPipelines, JobBodyHandler):
    def body_bounds(self) -> tuple[int, ApiError] | None:
        return change_bounds(self.request.method, "pipeline_id")

    @web.authenticated
    async def get(self, pipeline_id: str) -> None:
        self.write_model(self.pipelines.describe(self.caller, pipeline_id))

    @web.authenticated
    async def patch(self, pipeline_id: str) -> None:
        updated = await self.pipelines.update(self.caller, pipeline_id, self.request_body())
        self.write_model(updated)

    @web.authenticated
    async def delete(self, pipeline_id: str) -> None:
        self.pipelines.delete(self.caller, pipeline_id)
        self.set_status(204)
        self.finish()


class FlavorsHandler(JobServiceHandler):
    @web.authenticated
    async def get(self) -> None:
        self.write_model(await self.api.flavors(self.caller))


class ConfigHandler(JobServiceHandler):
    @web.authenticated
    async def get(self) -> None:
        self.write_model(self.api.config(self.caller))


class MetricsHandler(JobServiceHandler):
    """Prometheus metrics, for tokens with JupyterHub's ``read:metrics`` scope (the scope
    that guards ``/hub/metrics``): no token is a 401, a token without it a 403."""

    def initialize(  # type: ignore[override]
        self, hub_auth: Any, registry: CollectorRegistry | None = None, **_: Any
    ) -> None:
        self.hub_auth = hub_auth
        self._access_scopes = {METRICS_SCOPE}
        self.registry = registry or CollectorRegistry(auto_describe=False)

    @web.authenticated
    async def get(self) -> None:
        self.set_header("Content-Type", CONTENT_TYPE_LATEST)
        self.finish(metrics_text(self.registry))


class HealthHandler(JSONErrorsMixin, web.RequestHandler):
    """The only anonymous endpoint: says the service runs, and nothing else."""

    def get(self) -> None:
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(json.dumps({"status": "ok"}))


class NotFoundHandler(JSONErrorsMixin, web.RequestHandler):
    """Any other address: a JSON 404 (anonymous, like tornado's default)."""

    def prepare(self) -> None:
        raise ApiError(404, "There is nothing at this address of the job service.", "not-found")


def service_handlers(
    prefix: str,
    *,
    metrics: CollectorRegistry | None = None,
    schedules: SchedulesAPI | None = None,
    pipelines: PipelinesAPI | None = None,
    **kwargs: Any,
) -> list[tuple[str, type, dict[str, Any]]]:
    """The routes under ``prefix`` (``/services/jupyter-to-job/``), each with ``kwargs``;
    ``metrics``: the service's registry of job metrics, served at ``metrics``;
    ``schedules``: the schedule API (None: ``api/schedules`` answers 404);
    ``pipelines``: the pipeline API (None: ``api/pipelines`` answers 404)."""
    base = prefix.rstrip("/") + "/api"
    with_schedules = {**kwargs, "schedules": schedules}
    with_pipelines = {**kwargs, "pipelines": pipelines}
    return [
        (prefix.rstrip("/") + "/metrics", MetricsHandler, {**kwargs, "registry": metrics}),
        (f"{base}/jobs", JobsHandler, kwargs),
        (f"{base}/jobs/{JOB_ID}", JobHandler, kwargs),
        (f"{base}/jobs/{JOB_ID}/logs", JobLogHandler, kwargs),
        (f"{base}/jobs/{JOB_ID}/input", JobInputHandler, kwargs),
        (f"{base}/jobs/{JOB_ID}/outputs/(?P<fmt>ipynb|html)", JobOutputHandler, kwargs),
        (f"{base}/jobs/{JOB_ID}/uploads/(?P<fmt>ipynb|html)", JobUploadHandler, kwargs),
        (f"{base}/notification-settings", NotificationSettingsHandler, kwargs),
        (f"{base}/schedules", SchedulesHandler, with_schedules),
        (f"{base}/schedules/{SCHEDULE_ID}", ScheduleHandler, with_schedules),
        (f"{base}/pipelines", PipelinesHandler, with_pipelines),
        (f"{base}/pipelines/{PIPELINE_ID}", PipelineHandler, with_pipelines),
        (f"{base}/flavors", FlavorsHandler, kwargs),
        (f"{base}/config", ConfigHandler, kwargs),
        (f"{base}/health", HealthHandler, {}),
    ]
