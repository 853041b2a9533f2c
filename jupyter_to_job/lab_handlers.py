"""The base of the handlers a user's Jupyter server answers the lab with.

They live under ``{base_url}jupyter-to-job/api/``, are authorized on the resource
``jupyter_to_job``, answer JSON and map every error to ``{"message", "reason"}`` in one
place. The jobs extension (:mod:`jupyter_to_job.extension`) and the course-session relay
(:mod:`jupyter_to_job.session_relay`) both build on it.
"""

from __future__ import annotations

import json
from typing import Any

from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from pydantic import BaseModel

from .rest import as_api_error, error_response, log_error, query_arguments

AUTH_RESOURCE = "jupyter_to_job"
URL_PREFIX = "jupyter-to-job/api"


class LabAPIHandler(ExtensionHandlerMixin, APIHandler):
    """JSON answers and JSON errors for the lab, authorized on ``jupyter_to_job``."""

    auth_resource = AUTH_RESOURCE

    def params(self) -> dict[str, str]:
        return query_arguments(self.request.query_arguments)

    def write_json(self, data: dict[str, Any] | BaseModel, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        text = data.model_dump_json() if isinstance(data, BaseModel) else json.dumps(data)
        self.finish(text)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        error = as_api_error(kwargs.get("exc_info", (None, None, None))[1], status_code)
        self.set_status(error.status)
        self.clear_header("Content-Disposition")
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(error_response(error))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        log_error(self.log, value, as_api_error(value))
