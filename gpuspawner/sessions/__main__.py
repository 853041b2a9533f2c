"""``python -m gpuspawner.sessions``: run the course-sessions service until SIGTERM.

Design notes: docs/design/sessions.md, "gpuspawner.sessions.__main__".
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import secrets
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from urllib.parse import urlsplit

from sqlalchemy.exc import SQLAlchemyError
from tornado.httpserver import HTTPServer
from tornado.web import Application

from gpuspawner.accounting.store import UsageStore
from gpuspawner.core.service_process import PortInUse, die_with_parent, listen_when_free
from gpuspawner.policy.schedule import UTC
from gpuspawner.zone_wipe_helper import HelperZoneFolders

from .audit import AuditLog
from .course_api import CourseAPI, course_api_handlers
from .course_changes import CourseChanges
from .course_page import course_page_handlers
from .gpu_map_page import GPUMap, gpu_map_handlers
from .gpu_pools import GPUPoolSource, pool_source
from .hub_client import HubClient
from .reclaim_api import reclaim_page_handlers, reclaim_token_handlers
from .service import SessionsService, courses_with_prewarm
from .student_jobs import StudentJobs
from .watched_catalog import WatchedCatalog
from .zone_wipe import ExperimentalZoneWiper

ENV_PREFIX = "GPUSPAWNER_SESSIONS_"
TRUE_WORDS = {"1", "true", "yes", "on"}

log = logging.getLogger("gpuspawner.sessions")

TEXT_FLAGS = (
    (
        "audit-log",
        "append one JSON line per action to this file",
    ),
    (
        "allocation-ledger",
        "the hub's GPU allocation ledger (c.GPUAdmission.allocation_ledger): which "
        "server holds which GPU, for reclaiming idle servers on one machine",
    ),
    (
        "gpu-readings",
        "read GPU utilisation from this simulated readings file (JSON) instead of NVML",
    ),
    (
        "simulated-gpus",
        "the hub's simulated GPUs as JSON (c.GPUAdmission.simulated_gpus), for the GPU "
        "map on a machine without NVML",
    ),
    (
        "kubernetes-namespace",
        "on Kubernetes: the namespace of the hub's server and job pods; the GPU map "
        "then reads the GPU nodes and these pods' allocation records (not the ledger)",
    ),
    (
        "prometheus-url",
        "on Kubernetes: the Prometheus that scrapes the hub, the DCGM exporter and HAMi's "
        "monitor; each server's GPU use is read from it, for idle reclaim and the GPU map",
    ),
    (
        "usage-db",
        "the GPU-hour usage record's SQLAlchemy URL (the hub's c.GPUAdmission."
        "usage_db_url), for the course API's usage reports; where GPU use is read (a "
        "ledger, or Prometheus), each round's use per server and job is added to it",
    ),
    (
        "job-service-url",
        "the hub's job service (Run as Job), for the course page's list of students' "
        "jobs; the service's role needs its read scope",
    ),
    (
        "experimental-root",
        "the experimental zone's folder, holding a folder per user (one machine: the "
        "hub's c.GPUAdmission.experimental_root; Kubernetes: where the zone's volume is "
        "mounted in the service): warned about and wiped daily as the catalog's "
        "settings.experimental_zone says",
    ),
    (
        "experimental-wipe-helper",
        "the socket of the root-owned helper that warns about and empties each "
        "person's zone folder as that person (python -m gpuspawner.zone_wipe_helper), "
        "where this service's account may not read the folders (the workstation); "
        "instead of --experimental-root",
    ),
)
"""The flags that take one text (a file, a URL, a name) and default to none, in the
order ``--help`` lists them, each with its help."""


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return value


def build_parser(environ: Mapping[str, str]) -> argparse.ArgumentParser:
    def env(flag: str) -> str | None:
        return environ.get(ENV_PREFIX + flag.upper().replace("-", "_")) or None

    parser = argparse.ArgumentParser(
        prog="python -m gpuspawner.sessions",
        description="Pre-warm course servers before class; warn about and reclaim them after.",
        epilog=f"Each flag may also be set as an environment variable {ENV_PREFIX}<FLAG>, "
        f"such as {ENV_PREFIX}CATALOG.",
    )
    parser.add_argument(
        "--catalog",
        default=env("catalog"),
        required=env("catalog") is None,
        help="the course catalog file or folder (reloaded when it changes)",
    )
    parser.add_argument(
        # A string default goes through ``type`` too, so a bad environment value is reported.
        "--interval",
        type=_positive_seconds,
        default=env("interval") or "30",
        help="seconds between rounds (default 30)",
    )
    for flag, text in TEXT_FLAGS:
        parser.add_argument(f"--{flag}", default=env(flag), help=text)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        default=(env("dry-run") or "").lower() in TRUE_WORDS,
        help="decide and record, but neither start nor stop any server",
    )
    return parser


def gpu_inputs(args: argparse.Namespace) -> dict:
    """GPU readings and who holds each device, for idle reclaim (none without a ledger).

    One machine: the allocation ledger, and NVML or a simulated readings file. Kubernetes:
    the exporters' per-pod series from Prometheus, which name each pod's slice themselves
    (the hub's ``gpuspawner_allocation_info``), so no allocations are read besides.
    """
    if args.prometheus_url and args.kubernetes_namespace:
        from gpuspawner.prometheus_telemetry import PrometheusTelemetry

        return {"telemetry": PrometheusTelemetry(args.prometheus_url), "allocations": tuple}
    if args.prometheus_url:
        log.warning(
            "--prometheus-url is set but --kubernetes-namespace is not: GPU use is read from "
            "Prometheus only on Kubernetes; on one machine it comes from NVML or "
            "--gpu-readings."
        )
    if not args.allocation_ledger:
        if args.gpu_readings:
            log.warning(
                "--gpu-readings is set but --allocation-ledger is not: without the ledger "
                "the service cannot tell which server holds which GPU, so no server is "
                "reclaimed for idleness."
            )
        return {}
    from gpuspawner.core.telemetry import telemetry_from_config
    from gpuspawner.process_owners import ledger_telemetry

    from .reclaim import ledger_allocations

    path = args.allocation_ledger
    # Each GPU process is attributed to the server or job whose cgroup or process tree it
    # runs in, so a shared GPU's idle holders are told from its busy one.
    telemetry = ledger_telemetry(
        telemetry_from_config(args.gpu_readings), path, simulated=bool(args.gpu_readings)
    )
    return {"telemetry": telemetry, "allocations": lambda: ledger_allocations(path)}


def usage_record(url: str | None) -> UsageStore | None:
    """The GPU-hour usage record for the course API's reports; None without one, or when
    it cannot be opened (logged: the service runs on without reports)."""
    if not url:
        return None
    try:
        return UsageStore(url)
    except SQLAlchemyError as error:
        log.error("The GPU-hour usage record cannot be opened, so no usage reports: %s", error)
        return None


def course_api_server(
    service: SessionsService,
    environ: Mapping[str, str],
    api_url: str,
    token: str,
    usage_db: str | None = None,
    gpu_pools: GPUPoolSource | None = None,
    job_service_url: str | None = None,
) -> tuple[HTTPServer, str, int] | None:
    """The instructors' course API for the service's own URL, if the hub gave it one.

    Not yet listening: :func:`serve` binds it, waiting while a previous instance of the
    service lets go of the port.
    """
    url = environ.get("JUPYTERHUB_SERVICE_URL")
    if not url:
        return None
    from jupyterhub.services.auth import HubOAuth

    name = environ.get("JUPYTERHUB_SERVICE_NAME", "course-sessions")
    # OAuth too, for the page the hub's home page embeds (reclaim warnings); the
    # JUPYTERHUB_CLIENT_ID and callback URL come from the hub's environment.
    hub_auth = HubOAuth.instance(api_url=api_url, api_token=token, cache_max_age=60)
    api = CourseAPI(
        service=service,
        authenticate=lambda value: hub_auth.user_for_token(value, sync=False),
        access_scope=f"access:services!service={name}",
        check_scopes=hub_auth.check_scopes,
        usage=service.usage or usage_record(usage_db),
        hub_auth=hub_auth,
    )
    prefix = environ.get("JUPYTERHUB_SERVICE_PREFIX", f"/services/{name}/")
    app = Application(
        course_api_handlers(prefix, api)
        + reclaim_token_handlers(prefix, api)
        + reclaim_page_handlers(prefix, api, hub_auth)
        + gpu_map_handlers(prefix, GPUMap(api, gpu_pools), hub_auth)
        + course_page_handlers(
            prefix,
            api,
            hub_auth,
            CourseChanges(service.audit),
            StudentJobs(job_service_url, token) if job_service_url else None,
        ),
        # Signs the OAuth cookie of the embedded page; a new one per process only means
        # signing in again (invisibly, through the hub) after a restart.
        cookie_secret=secrets.token_bytes(32),
    )
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    return HTTPServer(app, xheaders=True), host, port


async def serve(
    service: SessionsService, api: Callable[[], tuple[HTTPServer, str, int] | None] | None = None
) -> None:
    """Run ``service`` (and the course API ``api`` starts) until SIGTERM or SIGINT, then
    return (the process exits 0)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    started = api() if api is not None else None
    if started is not None:
        server, host, port = started
        await listen_when_free(lambda: server.listen(port, host), address=f"{host}:{port}")
        log.info("Course API for instructors at http://%s:%d", host, port)
    log.info(
        "Course sessions service running, a round every %gs%s",
        service.interval,
        " (dry run)" if service.dry_run else "",
    )
    try:
        await service.run(stop)
    finally:
        if started is not None:
            started[0].stop()
    log.info("Course sessions service stopped")


def zone_wiper(args: argparse.Namespace, audit: AuditLog) -> ExperimentalZoneWiper | None:
    """The experimental zone's wiper: through the workstation's helper, or in the folder."""
    if args.experimental_wipe_helper:
        return ExperimentalZoneWiper(HelperZoneFolders(args.experimental_wipe_helper), audit)
    return ExperimentalZoneWiper(args.experimental_root, audit) if args.experimental_root else None


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    # Stop when the hub dies, so that a restarted hub's instance gets the port.
    die_with_parent()
    environ = os.environ if environ is None else environ
    args = build_parser(environ).parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="[%(levelname)1.1s %(asctime)s %(name)s] %(message)s"
    )
    api_url = environ.get("JUPYTERHUB_API_URL")
    token = environ.get("JUPYTERHUB_API_TOKEN")
    if not api_url or not token:
        log.error(
            "JUPYTERHUB_API_URL and JUPYTERHUB_API_TOKEN are not set. Run this as a "
            "hub-managed service (c.JupyterHub.services), or set both for a hub you manage."
        )
        return 2
    secret = environ.get("GPUSPAWNER_PREWARM_SECRET") or None
    audit = AuditLog(args.audit_log)
    catalog = WatchedCatalog(args.catalog, audit)
    loaded = catalog.current(datetime.now(UTC))
    if loaded is not None and secret is None and any(courses_with_prewarm(loaded)):
        log.warning(
            "Some courses ask for pre-warming but GPUSPAWNER_PREWARM_SECRET is not set; "
            "servers will not be pre-warmed. Give the service and the spawner the same secret."
        )
    gpu = gpu_inputs(args)
    service = SessionsService(
        HubClient(api_url, token),
        catalog,
        audit,
        interval=args.interval,
        secret=secret,
        dry_run=args.dry_run,
        zone_wiper=zone_wiper(args, audit),
        # Each round's GPU use per holder goes into the usage record (the usage reports).
        usage=usage_record(args.usage_db) if gpu else None,
        **gpu,
    )
    try:
        asyncio.run(
            serve(
                service,
                lambda: course_api_server(
                    service,
                    environ,
                    api_url,
                    token,
                    args.usage_db,
                    pool_source(
                        allocation_ledger=args.allocation_ledger,
                        simulated=args.simulated_gpus,
                        namespace=args.kubernetes_namespace,
                        gpu_readings=args.gpu_readings,
                        prometheus_url=args.prometheus_url,
                    ),
                    args.job_service_url,
                ),
            )
        )
    except PortInUse as error:
        log.error("%s", error)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
