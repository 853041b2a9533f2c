"""``JobsExtensionApp``: Run as Job inside each user's Jupyter server.

In a JupyterHub it relays to the hub's job service with the server's own token; without a
hub (Binder, a laptop) it runs the job service's handlers itself, over an embedded manager
and the local executor, and relays to them the same way. The lab extension calls the same
endpoints either way. Settings are ``c.JobsExtensionApp.*`` in the server's configuration.
"""

from __future__ import annotations

import getpass
import os
from typing import Any

from jupyter_core.paths import jupyter_data_dir
from jupyter_server.extension.application import ExtensionApp
from traitlets import Enum, Float, Integer, Unicode, default

from gpuspawner.core.admission import GPUAdmission

from ..jobs_api import JobsAPI, local_catalog, working_dir_beside
from ..manager import JobManager
from ..pipelines import Pipelines
from ..pipelines_api import PipelinesAPI
from ..rest import CREATE_BODY_SLACK
from ..schedules import Scheduler
from ..schedules_api import SchedulesAPI
from .embedded import EmbeddedService
from .handlers import extension_handlers
from .relay import ServiceRelay


class JobsExtensionApp(ExtensionApp):
    """The ``jupyter_to_job`` server extension."""

    name = "jupyter_to_job"
    load_other_extensions = True

    mode = Enum(
        ["auto", "hub", "standalone"],
        "auto",
        help="""Where jobs run:

        - ``hub``: the hub's job service runs them (the server relays with its hub token);
        - ``standalone``: this server runs them itself (no hub, e.g. Binder or a laptop);
        - ``auto``: ``hub`` when the server runs under JupyterHub (``JUPYTERHUB_API_TOKEN``
          is set), else ``standalone``.

        Example: ``c.JobsExtensionApp.mode = "standalone"``.
        """,
    ).tag(config=True)

    service_url = Unicode(
        help="""The job service's URL (hub mode). Defaults to ``$JUPYTER_TO_JOB_SERVICE_URL``,
        which the hub config sets for every server. The service's own address or its public
        one through the hub's proxy both work.

        Example: ``c.JobsExtensionApp.service_url =
        "http://127.0.0.1:8766/services/jupyter-to-job/"``.
        """,
    ).tag(config=True)

    @default("service_url")
    def _default_service_url(self) -> str:
        return os.environ.get("JUPYTER_TO_JOB_SERVICE_URL", "")

    sessions_service_url = Unicode(
        help="""The hub's course-sessions service (hub mode), which warns before it reclaims
        this server and lets its user keep it once. Defaults to
        ``$COURSE_SESSIONS_SERVICE_URL``, which the hub config sets for every server (not a
        ``GPUSPAWNER_`` name: the spawner keeps those for the GPU share); unset, the lab
        never shows a reclaim warning.

        Example: ``c.JobsExtensionApp.sessions_service_url =
        "http://127.0.0.1:8767/services/course-sessions/"``.
        """,
    ).tag(config=True)

    @default("sessions_service_url")
    def _default_sessions_service_url(self) -> str:
        return os.environ.get("COURSE_SESSIONS_SERVICE_URL", "")

    request_timeout = Float(
        60.0,
        help="""Seconds to wait for the job service's answer (the hub's, or the one this
        server runs in standalone mode).

        Example: ``c.JobsExtensionApp.request_timeout = 120``.
        """,
    ).tag(config=True)

    max_notebook_bytes = Integer(
        10 * 1024 * 1024,
        help="""The largest notebook this server sends as a job; a larger one is refused with
        413 before it is sent (the service has its own limit too).

        Example: ``c.JobsExtensionApp.max_notebook_bytes = 20 * 1024 * 1024``.
        """,
    ).tag(config=True)

    root_dir = Unicode(
        help="""Standalone mode: the folder for job data (snapshots, outputs, logs, SQLite).
        Defaults to ``jupyter_to_job`` in the Jupyter data folder.

        Example: ``c.JobsExtensionApp.root_dir = "~/.local/share/jupyter/jobs"``.
        """,
    ).tag(config=True)

    @default("root_dir")
    def _default_root_dir(self) -> str:
        return os.path.join(jupyter_data_dir(), "jupyter_to_job")

    # Standalone mode reads the flavors of ``c.GPUAdmission.catalog_path`` (GPU shares are
    # not enforced there: jobs share this server's GPUs) and runs
    # ``c.JobManager.max_running_jobs`` jobs at once.

    relay: ServiceRelay
    embedded: EmbeddedService | None = None

    @property
    def resolved_mode(self) -> str:
        if self.mode != "auto":
            return self.mode
        return "hub" if os.environ.get("JUPYTERHUB_API_TOKEN") else "standalone"

    def initialize_settings(self) -> None:
        if self.resolved_mode == "hub":
            relay = ServiceRelay(
                self.service_url,
                os.environ.get("JUPYTERHUB_API_TOKEN", ""),
                request_timeout=self.request_timeout,
            )
            if relay.configured:
                self.log.info("Run as Job relays to the hub's job service at %s", relay.service_url)
            else:
                self.log.warning(
                    "Run as Job is off: JUPYTER_TO_JOB_SERVICE_URL is not set (see "
                    "jupyter_to_job.hub.job_service_url)."
                )
            self.relay = relay
        else:
            self.embedded = self._embedded()
            self.relay = self.embedded.relay
            self.log.info("Run as Job runs jobs in this server (data in %s)", self.root_dir)

    def _embedded(self) -> EmbeddedService:
        root_dir = os.path.expanduser(self.root_dir)
        admission = GPUAdmission(parent=self, fallback_catalog=local_catalog())

        manager = JobManager(
            parent=self,
            root_dir=root_dir,
            max_notebook_bytes=self.max_notebook_bytes + CREATE_BODY_SLACK,
        )
        server_root = os.path.expanduser(self.serverapp.root_dir) if self.serverapp else "."
        api = JobsAPI(
            manager,
            mode="standalone",
            catalog=admission.catalog_in_force,
            max_notebook_bytes=self.max_notebook_bytes,
            working_dir=working_dir_beside(server_root),
            save_outputs=True,
        )
        pipelines = Pipelines(parent=self, manager=manager)
        scheduler = Scheduler(parent=self, manager=manager, pipelines=pipelines)
        return EmbeddedService(
            api,
            getpass.getuser(),
            SchedulesAPI(api, scheduler),
            PipelinesAPI(api, pipelines),
            request_timeout=self.request_timeout,
        )

    def initialize_handlers(self) -> None:
        self.handlers.extend(extension_handlers())

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        if self.embedded is not None:
            await self.embedded.start()

    async def stop_extension(self) -> None:
        if self.embedded is not None:
            await self.embedded.close()
