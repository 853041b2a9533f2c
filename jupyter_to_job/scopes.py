"""The JupyterHub scopes of the job service, named ``custom:jupyter-to-job:<action>:<resource>``.

Design notes: docs/design/jobs.md, "jupyter_to_job.scopes".
"""

from __future__ import annotations

SERVICE_NAME = "jupyter-to-job"
"""The hub service's name, so its URL is ``/services/jupyter-to-job/``."""

SCOPE_PREFIX = "custom:jupyter-to-job"
READ_JOBS_SCOPE = f"{SCOPE_PREFIX}:read:jobs"
WRITE_JOBS_SCOPE = f"{SCOPE_PREFIX}:write:jobs"
JOB_SCOPES = (READ_JOBS_SCOPE, WRITE_JOBS_SCOPE)


def access_scope(service_name: str = SERVICE_NAME) -> str:
    """The hub scope that lets a token reach the service at all."""
    return f"access:services!service={service_name}"


def hub_custom_scopes() -> dict[str, dict[str, object]]:
    """The definitions for ``c.JupyterHub.custom_scopes`` (write implies read)."""
    return {
        READ_JOBS_SCOPE: {
            "description": "List Run as Job jobs and read their state, logs and outputs.",
        },
        WRITE_JOBS_SCOPE: {
            "description": "Create, stop and delete Run as Job jobs (and read them).",
            "subscopes": [READ_JOBS_SCOPE],
        },
    }
