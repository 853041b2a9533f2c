"""The job service's REST handlers, under ``/services/<name>/api/``.

Every handler but ``api/health`` is authenticated by the hub (``HubAuthenticated``: a
token in the ``Authorization`` header, as the server extension sends it) and needs the
``access:services!service=<name>`` scope; what the caller may then do with which jobs is
decided by :class:`~jupyter_to_job.jobs_api.JobsAPI`. Errors are JSON, mapped in one
place (``write_error``). The handlers that take a body stream it
(:class:`~jupyter_to_job.rest.BoundedBodyMixin`): one over its limit is a 413 with a JSON
body, answered once it is in, which a proxy in front passes on intact.

=====================================  ======  =========================================
Route (under ``/services/<name>/``)    Method  What
=====================================  ======  =========================================
``api/jobs``                           GET     list (status, name, owner, sort_by,
                                               sort_order, max_items, next_token)
``api/jobs``                           POST    create (CreateJob fields + ``notebook``)
``api/jobs/{id}``                      GET     describe
``api/jobs/{id}``                      PATCH   ``{"status": "STOPPED"}``: stop
``api/jobs/{id}``                      DELETE  delete a finished job
``api/jobs/{id}/logs``                 GET     ``offset``/``limit``, ``tail``, ``follow=1``
``api/jobs/{id}/outputs/{ipynb|html}`` GET     download an output
``api/flavors``                        GET     the caller's flavors
``api/config``                         GET     mode and features
``api/health``                         GET     ``{"status": "ok"}``, anonymous
=====================================  ======  =========================================
"""

from __future__ import annotations

import json
import logging
from typing import Any

from jupyterhub.services.auth import HubAuthenticated, UserNotAllowed
from pydantic import BaseModel
from tornado import web
from tornado.iostream import StreamClosedError

from ..access import Caller
from ..jobs_api import JobsAPI
from ..rest import (
    CREATE_BODY_SLACK,
    OUTPUT_CONTENT_TYPES,
    ApiError,
    BoundedBodyMixin,
    as_api_error,
    content_disposition,
    error_response,
    job_update_bounds,
    log_error,
    query_arguments,
    too_large,
)

log = logging.getLogger("jupyter_to_job.service")

JOB_ID = r"(?P<job_id>[^/]+)"
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


class JobServiceHandler(JSONErrorsMixin, HubAuthenticated, web.RequestHandler):
    """Base of the authenticated handlers: ``self.caller`` is who the hub says is asking."""

    caller: Caller

    def initialize(self, api: JobsAPI, hub_auth: Any, access_scopes: set[str]) -> None:
        self.api = api
        self.hub_auth = hub_auth
        self._access_scopes = access_scopes

    @property
    def hub_scopes(self) -> set[str]:
        return self._access_scopes

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


class JobsHandler(JobBodyHandler):
    def body_bounds(self) -> tuple[int, ApiError] | None:
        if self.request.method != "POST":
            return None
        limit = self.api.max_notebook_bytes
        return limit + CREATE_BODY_SLACK, too_large("The notebook", limit)

    @web.authenticated
    async def get(self) -> None:
        self.write_model(await self.api.list_jobs(self.caller, self.params()))

    @web.authenticated
    async def post(self) -> None:
        result = await self.api.create_job(self.caller, self.request_body())
        self.write_model(result, 201 if result.created else 200)


class JobHandler(JobBodyHandler):
    def body_bounds(self) -> tuple[int, ApiError] | None:
        return job_update_bounds(self.request.method)

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


class FlavorsHandler(JobServiceHandler):
    @web.authenticated
    async def get(self) -> None:
        self.write_model(await self.api.flavors(self.caller))


class ConfigHandler(JobServiceHandler):
    @web.authenticated
    async def get(self) -> None:
        self.write_model(self.api.config(self.caller))


class HealthHandler(JSONErrorsMixin, web.RequestHandler):
    """The only anonymous endpoint: says the service runs, and nothing else."""

    def get(self) -> None:
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(json.dumps({"status": "ok"}))


class NotFoundHandler(JSONErrorsMixin, web.RequestHandler):
    """Any other address: a JSON 404 (anonymous, like tornado's default)."""

    def prepare(self) -> None:
        raise ApiError(404, "There is nothing at this address of the job service.", "not-found")


def service_handlers(prefix: str, **kwargs: Any) -> list[tuple[str, type, dict[str, Any]]]:
    """The routes under ``prefix`` (``/services/jupyter-to-job/``), each with ``kwargs``."""
    base = prefix.rstrip("/") + "/api"
    return [
        (f"{base}/jobs", JobsHandler, kwargs),
        (f"{base}/jobs/{JOB_ID}", JobHandler, kwargs),
        (f"{base}/jobs/{JOB_ID}/logs", JobLogHandler, kwargs),
        (f"{base}/jobs/{JOB_ID}/outputs/(?P<fmt>ipynb|html)", JobOutputHandler, kwargs),
        (f"{base}/flavors", FlavorsHandler, kwargs),
        (f"{base}/config", ConfigHandler, kwargs),
        (f"{base}/health", HealthHandler, {}),
    ]
