"""How a hub registers the job service: its ``services`` entry, its roles, the server token.

Design notes: docs/design/jobs.md, "jupyter_to_job.hub".
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence

from gpuspawner.core.hub_instance import HUB_ID_VARIABLE

from .scopes import READ_JOBS_SCOPE, SERVICE_NAME, WRITE_JOBS_SCOPE, access_scope

DEFAULT_PORT = 8766

# JupyterHub 6.1's default server token (the `server` role, jupyterhub/roles.py): post
# activity, and let the hub's proxy reach this very server.
HUB_SERVER_TOKEN_DEFAULTS = ("users:activity!user", "access:servers!server")

# What the service itself asks the hub, and why (jupyterhub/apihandlers/...):
SERVICE_SCOPE_REASONS = {
    "read:users:groups": (
        "GET /users/{name} (UserAPIHandler.get) with the groups field: a job owner's groups, "
        "for tokens filtered by !group= and for courses that enrol groups."
    ),
    "read:groups": (
        "GET /groups/{name} (GroupAPIHandler.get) with its users: whose jobs a !group= "
        "filtered token or a course's instructor may list."
    ),
}


def job_service_url(
    port: int = DEFAULT_PORT, *, host: str = "127.0.0.1", name: str = SERVICE_NAME
) -> str:
    """The service's own address, for ``JUPYTER_TO_JOB_SERVICE_URL`` in user servers.

    The service answers under its hub prefix (``/services/<name>/``) on its own port too,
    so servers on the same machine skip the proxy.
    """
    return f"http://{host}:{port}/services/{name}/"


def job_service(
    *,
    port: int = DEFAULT_PORT,
    catalog_path: str | None = None,
    root_dir: str | None = None,
    db_url: str | None = None,
    gpu_inventory: str | None = None,
    simulated_gpus: Sequence[Mapping[str, object]] | None = None,
    allocation_ledger: str | None = None,
    usage_db_url: str | None = None,
    run_as: str | None = None,
    notebook_dir_template: str | None = None,
    hub_id: str | None = None,
    name: str = SERVICE_NAME,
    ip: str = "127.0.0.1",
    python: str = sys.executable,
    args: Sequence[str] = (),
    environment: Mapping[str, str] | None = None,
) -> dict:
    """The hub-managed service entry for ``c.JupyterHub.services``.

    The hub starts ``python -m jupyter_to_job.service`` with its own ``JUPYTERHUB_*``
    variables (the service's token, its URL and prefix) plus ``environment``; the catalog,
    job folder, database and GPU inventory travel there rather than on the command line
    (a database URL may hold a password). Give the spawner's ``gpu_inventory``,
    ``simulated_gpus`` and ``allocation_ledger``, so servers and jobs share the same GPUs,
    and its ``usage_db_url``, so jobs' GPU-hours go into the same usage record.
    ``run_as="owner"`` runs each job as its owner's system account (the service then runs as
    root; see ``LocalExecutor.run_as``); ``notebook_dir_template`` is where users' notebook
    paths start (``{username}``; default: their home), so jobs run beside their notebook.
    ``hub_id`` (the hub's ``c.CgroupLimits.hub_id``, see :mod:`gpuspawner.core.hub_instance`): the
    jobs' control groups go into the hub's own folder, so this service, like its hub, never
    touches another hub's groups or jobs on the same machine.
    ``args`` are extra settings such as ``"--JobManager.max_running_jobs=4"``.
    """
    env = dict(environment or {})
    settings = {
        "JUPYTER_TO_JOB_CATALOG": catalog_path,
        "JUPYTER_TO_JOB_ROOT": root_dir,
        "JUPYTER_TO_JOB_DB_URL": db_url,
        "JUPYTER_TO_JOB_GPU_INVENTORY": gpu_inventory,
        "JUPYTER_TO_JOB_ALLOCATION_LEDGER": allocation_ledger,
        "JUPYTER_TO_JOB_USAGE_DB": usage_db_url,
        "JUPYTER_TO_JOB_RUN_AS": run_as,
        "JUPYTER_TO_JOB_NOTEBOOK_DIR": notebook_dir_template,
        HUB_ID_VARIABLE: hub_id,
        "JUPYTER_TO_JOB_SIMULATED_GPUS": (
            json.dumps(list(simulated_gpus)) if simulated_gpus is not None else None
        ),
    }
    env.update({key: str(value) for key, value in settings.items() if value is not None})
    return {
        "name": name,
        "url": f"http://{ip}:{port}",
        "command": [python, "-m", "jupyter_to_job.service", *args],
        "environment": env,
        **jobs_page_registration(),
    }


def jobs_page_registration() -> dict:
    """What a service entry needs for the jobs page (``/services/<name>/``): listed in
    the hub's Services menu as "Jobs" (templates/page.html reads ``info.display_name``;
    JupyterHub alone would show the id), signed in through the hub's OAuth without a
    confirmation page, its tokens carrying the job scopes the person holds (their own
    jobs, their students', or all for admins), no more.

    :func:`job_service` includes it; the Kubernetes chart, whose entry z2jh builds from
    ``hub.services``, adds it in its extraConfig.
    """
    return {
        "display": True,
        "info": {"display_name": "Jobs"},
        "oauth_no_confirm": True,
        "oauth_client_allowed_scopes": [READ_JOBS_SCOPE, WRITE_JOBS_SCOPE],
    }


def job_service_roles(
    *,
    name: str = SERVICE_NAME,
    admins: Iterable[str] = (),
    admin_groups: Iterable[str] = (),
) -> list[dict]:
    """Roles for ``c.JupyterHub.load_roles``.

    - ``user`` (every user): ``self``, write (so read) on their own jobs, and access to the
      service. This replaces JupyterHub's default ``user`` role, which is ``self`` alone.
    - ``<name>-service``: the service's own, least-privilege token (see
      ``SERVICE_SCOPE_REASONS``).
    - ``<name>-admins``: read and write on every user's jobs, for ``admins`` and members of
      ``admin_groups``. Hub admins (``admin: true``) may read, stop and delete every job
      anyway; this role is for staff who are not hub admins.
    """
    roles = [
        {
            "name": "user",
            "description": "Standard user privileges, and Run as Job on one's own notebooks.",
            "scopes": ["self", f"{WRITE_JOBS_SCOPE}!user", access_scope(name)],
        },
        {
            "name": f"{name}-service",
            "description": "The job service: look up the groups of job owners.",
            "scopes": list(SERVICE_SCOPE_REASONS),
            "services": [name],
        },
    ]
    admins, admin_groups = list(admins), list(admin_groups)
    if admins or admin_groups:
        roles.append(
            {
                "name": f"{name}-admins",
                "description": "Read, stop and delete every user's Run as Job jobs.",
                "scopes": [READ_JOBS_SCOPE, WRITE_JOBS_SCOPE, access_scope(name)],
                "users": admins,
                "groups": admin_groups,
            }
        )
    return roles


def job_server_token_scopes(name: str = SERVICE_NAME) -> list[str]:
    """``c.Spawner.server_token_scopes``: the hub's defaults plus the job service, for the
    server's own user only.

    The hub gives a server's ``$JUPYTERHUB_API_TOKEN`` only the part of these its user
    holds, so the server extension can act on the user's jobs and nobody else's.
    """
    return [
        *HUB_SERVER_TOKEN_DEFAULTS,
        access_scope(name),
        f"{READ_JOBS_SCOPE}!user",
        f"{WRITE_JOBS_SCOPE}!user",
    ]
