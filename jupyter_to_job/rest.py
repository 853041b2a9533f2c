"""What the job service and the server extension share on the wire: errors and request bodies.

Design notes: docs/design/jobs.md, "jupyter_to_job.rest".
"""

from __future__ import annotations

import json
import logging
from typing import Any, TypeVar
from urllib.parse import quote

import nbformat
from pydantic import BaseModel, ValidationError
from tornado.http1connection import HTTP1Connection
from tornado.httputil import HTTPHeaders, HTTPServerRequest
from tornado.web import HTTPError

from gpuspawner.policy import Refusal

from .access import Access, Caller
from .errors import JobError
from .models import CreateJob, ErrorResponse, FieldProblem

MIB = 1024 * 1024
# Room for the other fields of a create request around the notebook.
CREATE_BODY_SLACK = 256 * 1024
# The body of a request that carries a few fields (stop a job, save an output).
SMALL_BODY_LIMIT = 64 * 1024
# The most of an oversized body that is read (and dropped) so that its 413 arrives intact.
DISCARD_CEILING = 1024 * MIB
# How deep the JSON of a request may nest. Notebooks nest about 10 levels (JSON outputs and
# widget state a few more); the bound keeps every parser and validator behind it (json,
# pydantic, nbformat, papermill) far from Python's recursion limit.
MAX_JSON_DEPTH = 128
# A notebook travels one level down, as the "notebook" field of a create request.
MAX_NOTEBOOK_DEPTH = MAX_JSON_DEPTH - 1

_GENERIC = {
    400: ("The request is not valid.", "invalid"),
    401: ("Sign in to JupyterHub first: this request carries no valid token.", "unauthenticated"),
    403: ("You are not allowed to do this.", "forbidden"),
    404: ("There is nothing here.", "not-found"),
    405: ("This address does not take that method.", "method-not-allowed"),
    413: ("The request is too large.", "too-large"),
    502: ("The hub gave an unexpected answer; try again in a minute.", "bad-gateway"),
    503: ("The service is not available right now; try again in a minute.", "unavailable"),
}
_UNEXPECTED = (
    "Something went wrong on our side. Try again; if it keeps happening, tell the hub "
    "admins (the details are in the job service's log)."
)


class ApiError(Exception):
    """An answer other than success, with its status, sentence and reason code."""

    def __init__(
        self,
        status: int,
        message: str,
        reason: str,
        *,
        errors: list[FieldProblem] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason
        self.errors = errors


def field_name(location: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in location) or "body"


def validation_error(error: ValidationError, what: str = "request") -> ApiError:
    """A 400 naming every wrong field, from pydantic's errors (never a 500)."""
    problems = []
    for item in error.errors(include_url=False, include_input=False):
        message = str(item.get("msg", "is not valid"))
        message = message.removeprefix("Value error, ")
        if item.get("type") == "extra_forbidden":
            message = "is not a field of this request"
        problems.append(FieldProblem(field=field_name(tuple(item.get("loc", ()))), message=message))
    listed = "; ".join(f"{p.field}: {p.message}" for p in problems)
    return ApiError(400, f"The {what} has errors: {listed}.", "invalid", errors=problems)


Model = TypeVar("Model", bound=BaseModel)


def parse_model(model: type[Model], data: object, what: str = "request") -> Model:
    """A ``model`` from a request's JSON, or a 400 naming every wrong field."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise validation_error(error, what) from None


def own_name(caller: Caller, level: Access, things: str) -> str:
    """The caller's name, when they may read (or change) their own ``things`` (each user's
    own: 'Pipelines', 'Schedules'), else a 403 saying which token to use."""
    if not caller.holds(level) or not caller.is_user:
        raise ApiError(
            403,
            f"{things} are each user's own: use a token of the user whose {things.lower()} "
            "these are, with the scope on their own jobs.",
            "users-only",
        )
    return caller.name


def as_api_error(error: BaseException | None, status: int = 500) -> ApiError:
    """Map anything a handler raised to the answer to send."""
    if isinstance(error, ApiError):
        return error
    if isinstance(error, JobError):
        return ApiError(error.status, error.message, error.code)
    if isinstance(error, ValidationError):
        return validation_error(error)
    if isinstance(error, Refusal):
        return ApiError(error.status, error.message, error.code)
    if isinstance(error, HTTPError):
        status = error.status_code
        message, reason = _GENERIC.get(status, (error.reason or "The request failed.", "error"))
        # Our own HTTPErrors carry a sentence for people; tornado's own (and the hub's
        # auth mixin's) carry a log message that is not always meant for users.
        text = getattr(error, "user_message", None)
        return ApiError(status, text or message, reason)
    if status < 500:
        message, reason = _GENERIC.get(status, ("The request failed.", "error"))
        return ApiError(status, message, reason)
    return ApiError(500, _UNEXPECTED, "internal-error")


def error_response(error: ApiError) -> str:
    """The JSON body of an error answer."""
    body = ErrorResponse(message=error.message, reason=error.reason, errors=error.errors)
    return body.model_dump_json(exclude_none=True)


def log_error(log: logging.Logger, error: BaseException | None, api_error: ApiError) -> None:
    """Expected refusals are one line at info level; only the unexpected get a traceback."""
    if api_error.status >= 500 and api_error.reason == "internal-error":
        log.error("Unexpected error in the job API", exc_info=error)
    elif api_error.status >= 500:
        log.warning("Job API: %s %s", api_error.status, api_error.message)
    else:  # the access log has the status already
        log.debug("Job API: %s %s", api_error.status, api_error.reason)


# -- request bodies --------------------------------------------------------------------


def json_depth(value: object, limit: int) -> int:
    """How deep ``value`` nests (``{}`` is 1, ``{"a": []}`` 2), counted up to ``limit + 1``.

    Without recursion, so it cannot fail on the very nesting it measures.
    """
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            break
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


def too_deep(what: str, limit: int, what_to_do: str) -> ApiError:
    return ApiError(
        400,
        f"{what} nests its JSON more than {limit} levels deep, which no job needs. {what_to_do}",
        "too-deep",
    )


def _body_too_deep(what: str) -> ApiError:
    return too_deep(
        f"The {what}",
        MAX_JSON_DEPTH,
        "Flatten the deeply nested part (a parameter's value, or the notebook's metadata or "
        "outputs) and send it again.",
    )


def json_object(body: bytes, what: str = "request body") -> dict[str, Any]:
    """The body as a JSON object, or a 400 that says what is wrong with it."""
    if not body:
        raise ApiError(400, f"The {what} is empty; send a JSON object.", "invalid-json")
    try:
        data = json.loads(body)
    except RecursionError:  # thousands of levels: the parser gives up before we can count
        raise _body_too_deep(what) from None
    except (UnicodeDecodeError, ValueError) as error:
        raise ApiError(
            400, f"The {what} is not valid JSON ({str(error)[:120]}).", "invalid-json"
        ) from None
    if not isinstance(data, dict):
        raise ApiError(400, f"The {what} must be a JSON object.", "invalid-json")
    if json_depth(data, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise _body_too_deep(what)
    return data


def check_notebooks_size(body: bytes, rest: dict[str, Any], limit: int, what: str) -> None:
    """A 413 when the notebooks a body carries are larger than ``limit``: they are the body
    less ``rest``, its other fields (as the client serialised it)."""
    if len(body) - len(json.dumps(rest)) > limit:
        raise too_large(what, limit)


def too_large(what: str, limit: int) -> ApiError:
    advice = "Clear its outputs (Edit → Clear Outputs of All Cells), save it, and try again."
    return _over_limit(what, limit, "a job takes", advice)


def body_too_large(limit: int, what_to_send: str) -> ApiError:
    """The 413 of a request body (not a notebook) over ``limit``."""
    return _over_limit("The request body", limit, "this address takes", what_to_send)


def _over_limit(what: str, limit: int, taker: str, advice: str) -> ApiError:
    """The 413 of ``what``, larger than ``limit``, the most ``taker`` (takes)."""
    return ApiError(
        413, f"{what} is larger than {_size(limit)}, the most {taker}. {advice}", "too-large"
    )


# What a change to one job, schedule or pipeline looks like, by its address's id.
CHANGE_EXAMPLES = {
    "job_id": 'Send {"status": "STOPPED"}.',
    "schedule_id": 'Send {"status": "PAUSED"}.',
    "pipeline_id": 'Send {"status": "STOPPED"}.',
}


def change_bounds(method: str | None, item: str) -> tuple[int, ApiError] | None:
    """What the address of one job, schedule or pipeline takes as a body (``item``: the
    name of its id): only a PATCH, and a small one."""
    if method != "PATCH":
        return None
    return SMALL_BODY_LIMIT, body_too_large(SMALL_BODY_LIMIT, CHANGE_EXAMPLES[item])


def settings_bounds(method: str | None) -> tuple[int, ApiError] | None:
    """What the notification settings take as a body: only a PUT, and a small one."""
    if method != "PUT":
        return None
    return SMALL_BODY_LIMIT, body_too_large(
        SMALL_BODY_LIMIT, 'Send {"default": {"email": true, "webhook_url": null}}.'
    )


def _size(limit: int) -> str:
    return f"{limit / MIB:.0f} MiB" if limit >= MIB else f"{max(1, limit // 1024)} KiB"


def declared_length(headers: HTTPHeaders) -> int | None:
    """The request's Content-Length, or None when it has none (or a malformed one)."""
    value = headers.get("Content-Length")
    if not value:
        return None
    try:
        return int(value.split(",")[0])  # a proxy may repeat it: "1024, 1024"
    except ValueError:
        return None  # tornado refuses it on its own


class BoundedBodyMixin:
    """A request body read as it arrives: kept up to a limit, only counted beyond it.

    For handlers decorated with ``tornado.web.stream_request_body``. Their ``prepare``
    calls :meth:`limit_body` once the caller is known; their verb reads
    :meth:`request_body`, which raises the 413 of a body over the limit.

    The oversized body is read to its end before that answer, because an answer sent while
    the client is still uploading is lost to the reset connection: configurable-http-proxy
    turns it into its own 503 page. Nothing of it is kept, so the server's
    ``max_body_size`` (which bounds what it buffers, before anyone is authenticated) is
    raised for this request only, to at least :data:`DISCARD_CEILING`. A Content-Length
    above that is refused at once, as JSON rather than tornado's bare 400.
    Handlers that never call :meth:`limit_body` drop any body they are sent.
    """

    request: HTTPServerRequest
    _body_limit = 0
    _body_size = 0
    _body_parts: list[bytes] | None = None
    _body_refusal: ApiError | None = None

    def body_bounds(self) -> tuple[int, ApiError] | None:
        """The most this request's body may hold and the 413 beyond it; None: no body."""
        return None

    def limit_body(self, limit: int, refusal: ApiError) -> None:
        """Keep at most ``limit`` bytes; a longer body is answered with ``refusal``."""
        self._body_limit = limit
        self._body_refusal = refusal
        self._body_parts = []
        connection = self.request.connection
        if not isinstance(connection, HTTP1Connection):
            return
        ceiling = max(connection.params.max_body_size or 0, DISCARD_CEILING, 2 * limit)
        declared = declared_length(self.request.headers)
        if declared is not None and declared > ceiling:
            raise refusal  # too much to read only to drop it: answer now, then close
        connection.set_max_body_size(ceiling)

    def body_beyond_server_ceiling(self) -> bool:
        """True when the declared body is more than the server reads without
        :meth:`limit_body`: tornado would answer it with a bare 400 before any handler."""
        connection = self.request.connection
        declared = declared_length(self.request.headers)
        return (
            isinstance(connection, HTTP1Connection)
            and connection.params.max_body_size is not None
            and declared is not None
            and declared > connection.params.max_body_size
        )

    def data_received(self, chunk: bytes) -> None:
        self._body_size += len(chunk)
        if self._body_size > self._body_limit:
            self._body_parts = None  # over the limit: count the rest, keep none of it
        if self._body_parts is not None:
            self._body_parts.append(chunk)

    def request_body(self) -> bytes:
        """The whole body, or the 413 given to :meth:`limit_body` when it was too large."""
        if self._body_parts is None:
            raise self._body_refusal or ApiError(413, *_GENERIC[413])
        return b"".join(self._body_parts)


def check_notebook(notebook: object, input_path: str) -> dict[str, Any]:
    """``notebook`` when it is a valid nbformat 4 notebook, else a 400 that says so."""
    invalid = ApiError(
        400,
        f"The notebook {input_path!r} cannot run as a job: it is not nbformat 4 JSON. "
        "Open it in JupyterLab, save it again, and retry.",
        "not-a-notebook",
    )
    if (
        not isinstance(notebook, dict)
        or notebook.get("nbformat") != 4
        or not isinstance(notebook.get("cells"), list)
    ):
        raise invalid
    if json_depth(notebook, MAX_NOTEBOOK_DEPTH) > MAX_NOTEBOOK_DEPTH:
        raise notebook_too_deep(input_path)
    try:
        nbformat.validate(nbformat.from_dict(notebook), version=4)
    except nbformat.ValidationError as error:
        message = str(getattr(error, "message", error)).splitlines()[0][:200]
        raise ApiError(
            400,
            f"The notebook {input_path!r} is not valid ({message}). Open it in JupyterLab, "
            "save it again, and retry.",
            "not-a-notebook",
        ) from None
    return notebook


def notebook_too_deep(input_path: str) -> ApiError:
    return too_deep(
        f"The notebook {input_path!r}",
        MAX_NOTEBOOK_DEPTH,
        "Clear its outputs (Edit → Clear Outputs of All Cells), remove the deeply nested "
        "metadata, save it, and try again.",
    )


def parse_create_body(
    body: bytes, max_notebook_bytes: int
) -> tuple[CreateJob, dict[str, Any] | None]:
    """A create request to the service: the ``CreateJob`` fields and the notebook's content
    (None for a rerun sent without one: it runs the earlier job's snapshot)."""
    if len(body) > max_notebook_bytes + CREATE_BODY_SLACK:
        raise too_large("The notebook", max_notebook_bytes)
    data = json_object(body)
    notebook = data.pop("notebook", None)
    check_notebooks_size(body, data, max_notebook_bytes, "The notebook")
    request = parse_model(CreateJob, data)
    if notebook is None and request.rerun_of is not None:
        return request, None
    if notebook is None:
        raise ApiError(
            400,
            "The request carries no notebook: send its content as 'notebook'.",
            "invalid",
        )
    return request, check_notebook(notebook, request.input_path)


def query_arguments(arguments: dict[str, list[bytes]]) -> dict[str, str]:
    """Tornado's query arguments as single strings (the last value wins).

    A bare number as a key is JupyterLab's cache buster (``?1795242130032``, added to GET
    requests by its default ServerConnection settings); it is not an argument, so it is
    dropped rather than refused as an unknown field.
    """
    return {
        name: values[-1].decode("utf-8", "replace")
        for name, values in arguments.items()
        if values and not name.isdigit()
    }


def content_disposition(filename: str) -> str:
    """``attachment; filename=...`` safe for any name (RFC 6266 with an ASCII fallback)."""
    fallback = "".join(
        c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in filename
    )
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


OUTPUT_CONTENT_TYPES = {
    "ipynb": "application/x-ipynb+json",
    "html": "text/html; charset=utf-8",
}
