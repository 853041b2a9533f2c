"""What the job service and the server extension share on the wire: errors and request bodies.

Every error answer is ``{"message": sentence, "reason": code}`` (plus ``errors`` for a body
with wrong fields), built in one place, :func:`error_response`, which each side's
``write_error`` calls. Handlers just raise: :class:`ApiError`, a
:class:`~jupyter_to_job.errors.JobError`, a pydantic ``ValidationError``, a policy
``Refusal`` or tornado's ``HTTPError``.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import quote

import nbformat
from pydantic import ValidationError
from tornado.web import HTTPError

from gpuspawner.policy import Refusal

from .errors import (
    InvalidJobRequest,
    JobError,
    JobNotDeletable,
    JobNotFound,
    JobNotStoppable,
    JobRefused,
    OutputNotFound,
)
from .models import CreateJob, ErrorResponse, FieldProblem

MIB = 1024 * 1024
# Room for the other fields of a create request around the notebook.
CREATE_BODY_SLACK = 256 * 1024

_JOB_ERROR_REASONS: dict[type[JobError], str] = {
    JobNotFound: "not-found",
    JobNotStoppable: "already-finished",
    JobNotDeletable: "not-finished",
    OutputNotFound: "no-output",
    InvalidJobRequest: "invalid",
}

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


def as_api_error(error: BaseException | None, status: int = 500) -> ApiError:
    """Map anything a handler raised to the answer to send."""
    if isinstance(error, ApiError):
        return error
    if isinstance(error, JobRefused):
        return ApiError(error.status, error.message, error.code)
    if isinstance(error, JobError):
        reason = next(
            (code for kind, code in _JOB_ERROR_REASONS.items() if isinstance(error, kind)),
            "invalid",
        )
        return ApiError(error.status, error.message, reason)
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


def json_object(body: bytes, what: str = "request body") -> dict[str, Any]:
    """The body as a JSON object, or a 400 that says what is wrong with it."""
    if not body:
        raise ApiError(400, f"The {what} is empty; send a JSON object.", "invalid-json")
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError) as error:
        raise ApiError(
            400, f"The {what} is not valid JSON ({str(error)[:120]}).", "invalid-json"
        ) from None
    if not isinstance(data, dict):
        raise ApiError(400, f"The {what} must be a JSON object.", "invalid-json")
    return data


def too_large(what: str, limit: int) -> ApiError:
    size = f"{limit / MIB:.0f} MiB" if limit >= MIB else f"{max(1, limit // 1024)} KiB"
    return ApiError(
        413,
        f"{what} is larger than {size}, the most a job takes. Clear its outputs "
        "(Edit → Clear Outputs of All Cells), save it, and try again.",
        "too-large",
    )


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


def parse_create_body(body: bytes, max_notebook_bytes: int) -> tuple[CreateJob, dict[str, Any]]:
    """A create request to the service: the ``CreateJob`` fields and the notebook's content."""
    if len(body) > max_notebook_bytes + CREATE_BODY_SLACK:
        raise too_large("The notebook", max_notebook_bytes)
    data = json_object(body)
    notebook = data.pop("notebook", None)
    # The notebook is the body less the other fields (as the client serialised it).
    if len(body) - len(json.dumps(data)) > max_notebook_bytes:
        raise too_large("The notebook", max_notebook_bytes)
    try:
        request = CreateJob.model_validate(data)
    except ValidationError as error:
        raise validation_error(error) from None
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
