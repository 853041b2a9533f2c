"""How a hub registers the course-sessions service: its ``services`` entry and its role.

Design notes: docs/design/sessions.md, "gpuspawner.sessions.registration".
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

SERVICE_NAME = "course-sessions"

# Each scope, and the JupyterHub 6 code that needs it (jupyterhub/apihandlers/...).
SCOPE_REASONS = {
    "list:users": (
        "GET /users (UserListAPIHandler.get needs list:users). It implies read:users:name, "
        "which puts each user's name and admin flag in the model (user_model's access map); "
        "admins' servers are never reclaimed."
    ),
    "read:servers": (
        "puts the servers dict in each user model (user_model), whose server models carry "
        "started, pending and user_options (server_model has no separate scope for "
        "user_options): which course a server runs and since when."
    ),
    "start:servers": "POST /users/{name}/server to pre-warm a student's server.",
    "delete:servers": "DELETE /users/{name}/server(s/{server}) to reclaim after class.",
    "read:users:groups": (
        "puts the groups list in each user model (user_model's access map): an instructor "
        "through a group (the catalog's settings.course_groups, filled by single sign-on) "
        "is recognised, and their servers are never reclaimed or pre-warmed."
    ),
    "read:groups": (
        "GET /groups/{name} with its users list (group_model: read:groups:name alone gives "
        "only the name), to resolve groups enrolled in a pre-warmed course."
    ),
    "list:services": (
        "GET /services (ServiceListAPIHandler needs list:services): the Services menu of the "
        "course page and the GPU map, as the hub's own pages have it."
    ),
    "read:services": (
        "puts url, prefix, display and info in each service model (service_model's access "
        "map; read:services:name alone gives only the name): where each menu entry leads "
        "and its display name."
    ),
}


JOB_SCOPE_REASONS = {
    "custom:jupyter-to-job:read:jobs": (
        "GET /services/<job service>/api/jobs: the course page lists the Run as Job jobs of "
        "the students of the courses its viewer teaches (read only; the job service's "
        "custom scope, defined where the job service runs)."
    ),
    "access:services": "calling the job service at all (filtered to that service).",
}


def sessions_service_role(name: str = SERVICE_NAME, *, job_service: str | None = None) -> dict:
    """The least-privilege role of the service, for ``c.JupyterHub.load_roles``.

    Scopes, and why each is needed (evidence from JupyterHub 6.1's REST handlers):

    - ``list:users``: list users (``GET /users``); implies ``read:users:name``, which gives
      the ``name`` and ``admin`` fields of each user model.
    - ``read:servers``: the ``servers`` of each user model, with ``started``, ``pending`` and
      ``user_options`` (the course a server runs).
    - ``start:servers``: pre-warm a student's server (``POST /users/{name}/server``).
    - ``delete:servers``: reclaim a server after class (``DELETE``).
    - ``read:users:groups``: the ``groups`` of each user model, to recognise instructors
      who teach through a group.
    - ``read:groups``: the members of a group enrolled in a course (``GET /groups/{name}``).

    ``read:servers``, ``start:servers`` and ``delete:servers`` are exactly what ``servers``
    expands to; they are listed separately so each can be justified. Not needed:
    ``list:groups`` (groups are read by name), ``read:users`` (roles and activity are unused), ``admin:server_state`` (spawner state is never read), ``access:servers``
    (the service never talks to a user's server), ``admin:users`` (it never creates users).

    ``job_service``: the job service's name (``"jupyter-to-job"``), on a hub that runs one
    and passes ``job_service_url`` to :func:`course_sessions_service`: the course page then
    lists students' jobs, which needs ``JOB_SCOPE_REASONS``.
    """
    scopes = list(SCOPE_REASONS)
    if job_service is not None:
        scopes += ["custom:jupyter-to-job:read:jobs", f"access:services!service={job_service}"]
    return {
        "name": f"{name}-service",
        "description": "Pre-warm course servers before class; warn and reclaim them after.",
        "scopes": scopes,
        "services": [name],
    }


def course_sessions_service(
    catalog: str | Path,
    *,
    prewarm_secret: str | None = None,
    interval: float | None = None,
    audit_log: str | Path | None = None,
    dry_run: bool = False,
    name: str = SERVICE_NAME,
    port: int | None = None,
    ip: str = "127.0.0.1",
    allocation_ledger: str | Path | None = None,
    gpu_readings: str | Path | None = None,
    usage_db_url: str | None = None,
    simulated_gpus: list[dict] | None = None,
    kubernetes_namespace: str | None = None,
    job_service_url: str | None = None,
    experimental_root: str | Path | None = None,
    prometheus_url: str | None = None,
) -> dict:
    """The hub-managed service entry for ``c.JupyterHub.services``.

    Without ``port`` it is a background loop only. With ``port`` it also serves the
    instructors' course API (:mod:`gpuspawner.sessions.course_api`) at
    ``/services/<name>/api/courses``; give the instructors' roles its access scope
    (``course_roles(catalog, sessions_service=name)``), and the reclaim warnings to every
    user and their servers (:func:`reclaim_access_scopes`, for the ``user`` role and
    ``c.Spawner.server_token_scopes``). ``allocation_ledger`` (one machine) and
    ``gpu_readings`` (a simulated readings file instead of NVML) turn on idle reclaim.
    ``usage_db_url`` (the hub's ``c.GPUAdmission.usage_db_url``) serves GPU-hour reports
    at ``/services/<name>/api/usage`` to admins and, for their courses, instructors.
    The GPU map page (``/services/<name>/gpus``, and its JSON at ``api/gpus``) shows who
    holds which slice, from ``allocation_ledger`` over this machine's GPUs (NVML's, else
    ``simulated_gpus``: the hub's ``c.GPUAdmission.simulated_gpus``), or on Kubernetes from
    the GPU nodes and the pods of ``kubernetes_namespace``; with either, the service is
    listed in the hub's Services menu. ``job_service_url`` (the job service's own address,
    ``jupyter_to_job.hub.job_service_url(port)``): the course page lists students' jobs
    (give the role ``sessions_service_role(job_service=...)``). ``experimental_root`` (the
    hub's ``c.GPUAdmission.experimental_root``, or where the zone's volume is mounted on
    Kubernetes): the service warns about and wipes the experimental zone daily.
    ``prometheus_url`` (Kubernetes, with ``kubernetes_namespace``): the Prometheus that
    scrapes the hub, the DCGM exporter and HAMi's monitor; each server's own GPU use is
    read there, for idle reclaim and the GPU map (hub_config/monitoring/README.md).

    The hub passes only ``environment`` (and its own ``JUPYTERHUB_*`` variables) to a managed
    service, so the pre-warm secret travels there rather than on the command line, where
    other local users could read it from the process list.
    """
    command = [sys.executable, "-m", "gpuspawner.sessions", "--catalog", str(catalog)]
    if interval is not None:
        command += ["--interval", str(interval)]
    if audit_log is not None:
        command += ["--audit-log", str(audit_log)]
    if allocation_ledger is not None:
        command += ["--allocation-ledger", str(allocation_ledger)]
    if gpu_readings is not None:
        command += ["--gpu-readings", str(gpu_readings)]
    if simulated_gpus is not None:
        command += ["--simulated-gpus", json.dumps(list(simulated_gpus))]
    if kubernetes_namespace is not None:
        command += ["--kubernetes-namespace", kubernetes_namespace]
    if job_service_url is not None:
        command += ["--job-service-url", job_service_url]
    if prometheus_url is not None:
        command += ["--prometheus-url", prometheus_url]
    if experimental_root is not None:
        command += ["--experimental-root", str(experimental_root)]
    if dry_run:
        command.append("--dry-run")
    service: dict = {"name": name, "command": command}
    if port is not None:
        service["url"] = f"http://{ip}:{port}"
        # In the Services menu when it shows the GPU map (its address leads there), by
        # that name rather than its id (templates/page.html reads info's display_name).
        service["display"] = allocation_ledger is not None or kubernetes_namespace is not None
        service["info"] = {"display_name": "GPU map"}
        # The hub's home page embeds the service's reclaim warnings: signing in to it
        # must not ask the user to confirm anything.
        service["oauth_no_confirm"] = True
        # Its pages' Services menu lists what the viewer may open, as the hub's pages do
        # (BaseHandler.get_accessible_services): the hub grants a viewer's token the
        # access:services scopes they hold (the intersection with their own), which say
        # which services that is. They open nothing the job service would act on: its
        # actions need its custom scopes, which the token does not get.
        service["oauth_client_allowed_scopes"] = ["access:services"]
    environment = {}
    if prewarm_secret:
        environment["GPUSPAWNER_PREWARM_SECRET"] = prewarm_secret
    if usage_db_url:
        # For the course API's usage reports; a database URL may hold a password.
        environment["GPUSPAWNER_SESSIONS_USAGE_DB"] = usage_db_url
    if kubernetes_namespace is not None:
        # The hub passes a managed service none of its own environment: the in-cluster
        # API address travels explicitly (the pod's service account token is a file).
        for variable in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
            if os.environ.get(variable):
                environment[variable] = os.environ[variable]
    if environment:
        service["environment"] = environment
    return service


def reclaim_access_scopes(name: str = SERVICE_NAME) -> list[str]:
    """What users, and their servers' tokens, need to read their own reclaim warnings and
    keep their servers: access to the service (it decides which servers are theirs).

    Add them to the ``user`` role's scopes and to ``c.Spawner.server_token_scopes``.
    """
    return [f"access:services!service={name}"]


def with_reclaim_access(roles: list[dict], name: str = SERVICE_NAME) -> list[dict]:
    """``roles`` (for ``load_roles``) with :func:`reclaim_access_scopes` added to the
    ``user`` role, which every user holds; the other roles are returned as they are."""
    return [
        {**role, "scopes": [*role["scopes"], *reclaim_access_scopes(name)]}
        if role.get("name") == "user"
        else role
        for role in roles
    ]
