"""``JobServiceApp``: the hub-managed job service (``python -m jupyter_to_job.service``).

Design notes: docs/design/job-service.md, "jupyter_to_job.service.app".
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import secrets
import signal
import sys
from typing import Any
from urllib.parse import urlparse

from jupyter_core.paths import jupyter_data_dir
from jupyterhub.services.auth import HubAuth, HubOAuth
from tornado import web
from traitlets import Float, Instance, Integer, Type, Unicode, default
from traitlets.config import Application

from gpuspawner.core.accounts import NoSuchAccount, UserAccount
from gpuspawner.core.admission import GPUAdmission
from gpuspawner.core.service_process import PortInUse, die_with_parent, listen_when_free
from gpuspawner.policy import GPUDevice

from .. import __version__
from ..executors import JobExecutor, LocalExecutor
from ..executors.local import default_run_as
from ..jobs_api import JobsAPI, local_catalog, working_dir_beside
from ..manager import JobManager
from ..metrics import service_registry
from ..notifications import JobNotifier
from ..pipelines import Pipelines
from ..pipelines_api import PipelinesAPI
from ..rest import CREATE_BODY_SLACK
from ..schedules import Scheduler
from ..schedules_api import SchedulesAPI
from ..scopes import SERVICE_NAME, access_scope
from .directory import HubDirectory
from .flavor_admission import FlavorAdmission, IdentityBook
from .handlers import NotFoundHandler, service_handlers
from .jobs_page import jobs_page_handlers


def _service_url() -> Any:
    return urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL") or "http://127.0.0.1:8766")


ADMISSION_ENVIRONMENT = {
    "catalog_path": "JUPYTER_TO_JOB_CATALOG",
    "gpu_inventory": "JUPYTER_TO_JOB_GPU_INVENTORY",
    "simulated_gpus": "JUPYTER_TO_JOB_SIMULATED_GPUS",
    "allocation_ledger": "JUPYTER_TO_JOB_ALLOCATION_LEDGER",
    "usage_db_url": "JUPYTER_TO_JOB_USAGE_DB",
}
"""The admission's settings the hub hands the service through its environment."""


def _simulated_gpus(text: str) -> list[Any]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, list):
        raise ValueError(
            "JUPYTER_TO_JOB_SIMULATED_GPUS must be a JSON list such as "
            '[{"model": "RTX 4090", "memory": "24GiB", "count": 2}]'
        )
    return value


class JobServiceApp(Application):
    """The Run as Job service of a JupyterHub."""

    name = "jupyter-to-job-service"
    description = "The hub-managed service that runs notebooks as jobs for JupyterHub users."
    version = __version__
    classes = [
        GPUAdmission,
        JobManager,
        JobNotifier,
        Scheduler,
        Pipelines,
        LocalExecutor,
        HubAuth,
    ]

    config_file = Unicode(
        "",
        help="""A Python config file to load (``c.JobServiceApp.x = ...``, ``c.JobManager.y``).

        Example: ``python -m jupyter_to_job.service
        --JobServiceApp.config_file=/etc/jupyter-to-job/config.py``.
        """,
    ).tag(config=True)

    admission = Instance(
        GPUAdmission,
        help="""The service's admission (``c.GPUAdmission.*``): job flavors from the catalog,
        their GPU shares rendered for the executor. The environment variables
        ``JUPYTER_TO_JOB_CATALOG``, ``JUPYTER_TO_JOB_GPU_INVENTORY``,
        ``JUPYTER_TO_JOB_SIMULATED_GPUS`` (a JSON list) and
        ``JUPYTER_TO_JOB_ALLOCATION_LEDGER`` fill the settings the config leaves empty
        (``jupyter_to_job.hub.job_service`` passes the hub's this way). Without a catalog,
        every user gets one CPU flavor, "local".""",
    )

    @default("admission")
    def _default_admission(self) -> GPUAdmission:
        kubernetes = getattr(self.executor_class, "uses_cluster_gpu_pool", False)
        admission = GPUAdmission(parent=self, target="kubernetes" if kubernetes else "local")
        configured = self.config.get("GPUAdmission", {})
        for name, variable in ADMISSION_ENVIRONMENT.items():
            text = os.environ.get(variable)
            if text and name not in configured and not admission.trait_values().get(name):
                setattr(
                    admission, name, _simulated_gpus(text) if name == "simulated_gpus" else text
                )
        if not admission.catalog_path:
            admission.fallback_catalog = local_catalog()
        return admission

    root_dir = Unicode(
        help="""Folder for job data (notebook snapshots, outputs, logs, the SQLite store).
        Defaults to ``$JUPYTER_TO_JOB_ROOT``, else ``jupyter_to_job_service`` in the Jupyter
        data folder.

        Example: ``c.JobServiceApp.root_dir = "/srv/jupyter-to-job"``.
        """,
    ).tag(config=True)

    @default("root_dir")
    def _default_root_dir(self) -> str:
        return os.environ.get("JUPYTER_TO_JOB_ROOT") or os.path.join(
            jupyter_data_dir(), "jupyter_to_job_service"
        )

    db_url = Unicode(
        help="""SQLAlchemy URL of the job store (SQLite or PostgreSQL). Defaults to
        ``$JUPYTER_TO_JOB_DB_URL``, else ``sqlite:///<root_dir>/jobs.sqlite``.

        Example: ``c.JobServiceApp.db_url = "postgresql+psycopg://jobs@db/jobs"``.
        """,
    ).tag(config=True)

    @default("db_url")
    def _default_db_url(self) -> str:
        return os.environ.get("JUPYTER_TO_JOB_DB_URL") or (
            f"sqlite:///{os.path.join(self.root_dir, 'jobs.sqlite')}"
        )

    executor_class = Type(
        default_value=LocalExecutor,
        klass=JobExecutor,
        help="""Where jobs run: local processes (the default), or another executor such as
        one for Kubernetes batch Jobs.

        Example: ``c.JobServiceApp.executor_class = "jupyter_to_job.executors.LocalExecutor"``.
        """,
    ).tag(config=True)

    max_notebook_bytes = Integer(
        10 * 1024 * 1024,
        help="""The largest notebook a job takes; a larger one is refused with 413.

        Example: ``c.JobServiceApp.max_notebook_bytes = 20 * 1024 * 1024``.
        """,
    ).tag(config=True)

    notebook_dir_template = Unicode(
        "",
        help="""The folder each user's notebook paths are relative to (their server's root
        folder), ``{username}`` replaced; jobs start in the notebook's own folder under it,
        so the files a notebook writes beside itself land there. Empty: the owner's home
        (their system account's, with ``c.LocalExecutor.run_as = "owner"``), else the job's
        own folder. Defaults to ``$JUPYTER_TO_JOB_NOTEBOOK_DIR``.

        Example, with ``SimpleLocalProcessSpawner.home_dir_template``:
        ``c.JobServiceApp.notebook_dir_template = "/tmp/homes/{username}"``.
        """,
    ).tag(config=True)

    @default("notebook_dir_template")
    def _default_notebook_dir_template(self) -> str:
        return os.environ.get("JUPYTER_TO_JOB_NOTEBOOK_DIR", "")

    def notebook_dir(self, owner: str) -> str | None:
        """Where ``owner``'s notebook paths start, for running jobs beside their notebook."""
        if self.notebook_dir_template:
            return self.notebook_dir_template.format(username=owner)
        if self._runs_as_owner:
            try:
                return UserAccount.for_hub_user(owner).home
            except NoSuchAccount:
                return None  # the executor refuses the job with this sentence
        return None

    @functools.cached_property
    def _runs_as_owner(self) -> bool:
        """Whether jobs run as their owners: the executor's setting, read once."""
        if not issubclass(self.executor_class, LocalExecutor):
            return False
        configured = self.config.get("LocalExecutor", {}).get("run_as")
        return (configured or default_run_as()) == "owner"

    ip = Unicode(
        help="""The address to listen on; defaults to the host of ``$JUPYTERHUB_SERVICE_URL``.

        Example: ``c.JobServiceApp.ip = "0.0.0.0"``.
        """,
    ).tag(config=True)

    @default("ip")
    def _default_ip(self) -> str:
        return _service_url().hostname or "127.0.0.1"

    port = Integer(
        help="""The port to listen on; defaults to the port of ``$JUPYTERHUB_SERVICE_URL``.

        Example: ``c.JobServiceApp.port = 8766``.
        """,
    ).tag(config=True)

    @default("port")
    def _default_port(self) -> int:
        return _service_url().port or 8766

    base_url = Unicode(
        help="""The URL prefix the service answers under; defaults to
        ``$JUPYTERHUB_SERVICE_PREFIX`` (``/services/jupyter-to-job/``).

        Example: ``c.JobServiceApp.base_url = "/services/jobs/"``.
        """,
    ).tag(config=True)

    @default("base_url")
    def _default_base_url(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_PREFIX") or f"/services/{self.service_name}/"

    service_name = Unicode(
        help="""The service's name in the hub; defaults to ``$JUPYTERHUB_SERVICE_NAME``.
        Callers need ``access:services!service=<name>``.

        Example: ``c.JobServiceApp.service_name = "jupyter-to-job"``.
        """,
    ).tag(config=True)

    @default("service_name")
    def _default_service_name(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_NAME") or SERVICE_NAME

    group_cache_seconds = Float(
        30.0,
        help="""How long a group membership read from the hub is trusted.

        Example: ``c.JobServiceApp.group_cache_seconds = 60``.
        """,
    ).tag(config=True)

    @default("log_level")
    def _default_log_level(self) -> int:
        return logging.INFO

    @default("log_format")
    def _default_log_format(self) -> str:
        return "[%(levelname)1.1s %(asctime)s %(name)s] %(message)s"

    def initialize(self, argv: list[str] | None = None) -> None:
        super().initialize(argv)
        if self.config_file:
            self.load_config_file(self.config_file)
            self.update_config(self.cli_config)  # the command line wins over the file

    # -- building the parts ------------------------------------------------------------

    def make_api(self) -> tuple[JobsAPI, JobManager, HubAuth]:
        admission = self.admission
        kubernetes = getattr(self.executor_class, "uses_cluster_gpu_pool", False)
        admission.target = "kubernetes" if kubernetes else "local"
        if not admission.catalog_path:
            self.log.warning(
                "No catalog: every user gets the one CPU flavor 'local'. Set "
                "c.GPUAdmission.catalog_path (or JUPYTER_TO_JOB_CATALOG) for GPU flavors."
            )
        elif admission.catalog_in_force() is None:
            self.log.error("Jobs cannot be created until %s is valid.", admission.catalog_path)

        cluster = None
        if kubernetes:
            # One GPU pool with the hub's servers: read from node labels and pods at start.
            cluster = self.executor_class.cluster_pool_reader(self.config)  # type: ignore[attr-defined]
            devices: list[GPUDevice] = []
            self.log.info("GPU inventory: the cluster's nodes and pods (one pool with servers)")
        else:
            devices = admission.local_devices()
        identities = IdentityBook(os.path.join(self.root_dir, "identities.json"))
        capacity = FlavorAdmission(
            admission=admission,
            devices=devices,
            identities=identities,
            ledger_path=None if cluster else admission.allocation_ledger or None,
            cluster=cluster,
        )
        manager = JobManager(
            parent=self,
            root_dir=self.root_dir,
            db_url=self.db_url,
            executor_class=self.executor_class,
            max_notebook_bytes=self.max_notebook_bytes + CREATE_BODY_SLACK,
            capacity=capacity,
        )
        hub_auth = HubAuth(parent=self)
        api = JobsAPI(
            manager,
            mode="hub",
            catalog=admission.catalog_in_force,
            directory=HubDirectory(
                hub_auth.api_url, hub_auth.api_token, max_age=self.group_cache_seconds
            ),
            max_notebook_bytes=self.max_notebook_bytes,
            remember_identity=identities.remember,
            working_dir=working_dir_beside(self.notebook_dir),
            gpu_flavors=True,
            budget=admission.job_budget,
        )
        return api, manager, hub_auth

    def make_web_app(
        self,
        api: JobsAPI,
        hub_auth: HubAuth,
        schedules: SchedulesAPI | None = None,
        pipelines: PipelinesAPI | None = None,
    ) -> web.Application:
        handlers = service_handlers(
            self.base_url,
            schedules=schedules,
            pipelines=pipelines,
            api=api,
            hub_auth=hub_auth,
            access_scopes={access_scope(self.service_name)},
            metrics=service_registry(api.manager.store, api.manager.log_store),
        )
        # The jobs page, signed in through the hub's OAuth (the hub gives the service its
        # client id and callback URL); its cookie is signed with a key of this process
        # only, which means signing in again, invisibly through the hub, after a restart.
        page_auth = HubOAuth(parent=self)
        handlers += jobs_page_handlers(
            self.base_url,
            api=api,
            page_auth=page_auth,
            access_scopes={access_scope(self.service_name)},
            schedules=schedules,
            pipelines=pipelines,
        )
        return web.Application(
            handlers,  # type: ignore[arg-type]
            default_handler_class=NotFoundHandler,
            log_function=self._log_request,
            cookie_secret=secrets.token_bytes(32),
        )

    def _log_request(self, handler: web.RequestHandler) -> None:
        status = handler.get_status()
        level = self.log.info if status < 400 else self.log.warning
        if status < 400 and handler.request.method == "GET":
            level = self.log.debug
        # The path only: query strings may carry tokens when a hub allows them in URLs.
        level(
            "%d %s %s %.1fms",
            status,
            handler.request.method,
            handler.request.path,
            1000 * handler.request.request_time(),
        )

    # -- running -----------------------------------------------------------------------

    def secure_files(self) -> None:
        """Keep the service's data to itself: files it makes are private, and so are the
        store, the logs and the identities. A job reaches only its own folder, by name."""
        os.umask(0o077)
        root = self.root_dir
        os.makedirs(root, exist_ok=True)
        os.chmod(root, 0o711 if self._runs_as_owner else 0o700)
        for name in ("logs", "identities.json", "jobs.sqlite"):
            path = os.path.join(root, name)
            if os.path.exists(path):
                os.chmod(path, 0o700 if os.path.isdir(path) else 0o600)
        if os.geteuid() == 0 and not self._runs_as_owner:
            self.log.warning(
                "Jobs run as root, the job service's own account: a job can read every "
                "user's files and the hub's secrets. On a machine shared by several people "
                "set c.LocalExecutor.run_as = 'owner' (hub_config/workstation does)."
            )

    async def serve(self, stop: asyncio.Event | None = None) -> None:
        """Start the manager (reconciling first) and the web server; run until ``stop``."""
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        self.secure_files()
        api, manager, hub_auth = self.make_api()
        capacity = manager.capacity
        follow_cluster = None
        if isinstance(capacity, FlavorAdmission) and capacity.cluster is not None:
            await capacity.refresh_from_cluster()
            follow_cluster = asyncio.ensure_future(capacity.follow_cluster(stop))
        report = await manager.start()
        self.log.info(
            "Job store ready: %d job(s) adopted, %d ended while the service was down, %d queued",
            len(report.adopted),
            len(report.ended),
            report.queued,
        )
        # Schedules start with the manager and stop before it (slots due meanwhile run at
        # the next start: see jupyter_to_job.schedules).
        # Pipelines too: unfinished ones go on from where the database says they are.
        pipelines = Pipelines(parent=self, manager=manager)
        pipelines.start()
        scheduler = Scheduler(parent=self, manager=manager, pipelines=pipelines)
        scheduler.start()
        web_app = self.make_web_app(
            api, hub_auth, SchedulesAPI(api, scheduler), PipelinesAPI(api, pipelines)
        )
        try:
            # The previous instance may still be letting go of the port (its hub died).
            server = await listen_when_free(
                lambda: web_app.listen(
                    self.port,
                    address=self.ip,
                    max_body_size=2 * (self.max_notebook_bytes + CREATE_BODY_SLACK),
                ),
                address=f"{self.ip}:{self.port}",
            )
        except BaseException:
            if follow_cluster is not None:
                follow_cluster.cancel()
            await scheduler.stop()
            await pipelines.close()
            await manager.shutdown(stop_jobs=False)
            raise
        self.log.info(
            "Jupyter to Job service listening on http://%s:%d%s", self.ip, self.port, self.base_url
        )
        try:
            await stop.wait()
        finally:
            server.stop()
            if follow_cluster is not None:
                follow_cluster.cancel()
            await scheduler.stop()
            await pipelines.close()
            # Jobs keep running: the next start adopts them.
            await manager.shutdown(stop_jobs=False)
            self.log.info("Jupyter to Job service stopped; running jobs continue")

    def start(self) -> None:
        # Stop (gracefully: jobs run on) when the hub dies, so that a restarted hub's
        # instance gets the port.
        die_with_parent()
        if not os.environ.get("JUPYTERHUB_API_TOKEN") or not os.environ.get("JUPYTERHUB_API_URL"):
            self.log.critical(
                "JUPYTERHUB_API_TOKEN and JUPYTERHUB_API_URL are not set. Run this as a "
                "hub-managed service (c.JupyterHub.services, see jupyter_to_job.hub)."
            )
            self.exit(2)
        # The parts log through their module loggers (jupyter_to_job.*, jupyterhub's HubAuth).
        logging.basicConfig(
            level=self.log_level, format="[%(levelname)1.1s %(asctime)s %(name)s] %(message)s"
        )
        try:
            asyncio.run(self.serve())
        except PortInUse as error:
            self.log.critical("%s", error)
            self.exit(1)


def main(argv: list[str] | None = None) -> int:
    app = JobServiceApp.instance()
    app.initialize(argv if argv is not None else sys.argv[1:])
    app.start()
    return 0
