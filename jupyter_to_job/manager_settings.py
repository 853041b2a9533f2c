"""The settings of the JobManager (``c.JobManager.*``), one trait each.

Kept apart from the manager's work so that each file has one job; the manager subclasses
this, so ``c.JobManager.<name>`` configures them as before.
"""

from __future__ import annotations

import os
from typing import Any

from jupyter_core.paths import jupyter_data_dir
from traitlets import Float, Instance, Integer, Type, Unicode, default, validate
from traitlets.config import LoggingConfigurable

from .executors import JobExecutor, LocalExecutor
from .job_admission import JobAdmission
from .logs import LogStore
from .store import JobStore


class JobManagerSettings(LoggingConfigurable):
    """What ``c.JobManager`` configures: where data lives, the queue's limits, the runner's."""

    root_dir = Unicode(
        help="""Folder for job data: ``jobs/<id>/`` (notebook snapshot, outputs, status),
        ``logs/<id>.log`` and, by default, the SQLite database.

        Example: ``c.JobManager.root_dir = "/srv/jupyter-to-job"``.
        """,
    ).tag(config=True)

    @default("root_dir")
    def _default_root_dir(self) -> str:
        return os.path.join(jupyter_data_dir(), "jupyter_to_job")

    db_url = Unicode(
        help="""SQLAlchemy URL of the job store; SQLite and PostgreSQL are supported.

        Example: ``c.JobManager.db_url = "postgresql+psycopg://jobs@db/jobs"``.
        Defaults to ``sqlite:///<root_dir>/jobs.sqlite``.
        """,
    ).tag(config=True)

    @default("db_url")
    def _default_db_url(self) -> str:
        return f"sqlite:///{os.path.join(self.root_dir, 'jobs.sqlite')}"

    executor_class = Type(
        default_value=LocalExecutor,
        klass=JobExecutor,
        help="""Where jobs run: ``c.JobManager.executor_class =
        "jupyter_to_job.executors.LocalExecutor"`` (local processes, the default).""",
    ).tag(config=True)

    store_class = Type(
        default_value=JobStore,
        klass=JobStore,
        help="The job store: ``c.JobManager.store_class = 'jupyter_to_job.store.JobStore'``.",
    ).tag(config=True)

    log_store_class = Type(
        default_value=LogStore,
        klass=LogStore,
        help="The log store: ``c.JobManager.log_store_class = 'jupyter_to_job.logs.LogStore'``.",
    ).tag(config=True)

    max_running_jobs = Integer(
        4,
        help="""Jobs that may run at once (over all users, in the job service; in one
        server, standalone); later ones queue, the next free slot going to the person with
        the fewest running jobs (first in, first out among one's own).

        Example: ``c.JobManager.max_running_jobs = 8``. GPU capacity can hold jobs back
        further (see ``capacity``).
        """,
    ).tag(config=True)

    @validate("max_running_jobs")
    def _at_least_one(self, proposal: Any) -> int:
        if proposal["value"] < 1:
            raise ValueError("max_running_jobs must be at least 1")
        return int(proposal["value"])

    max_queued_jobs_per_user = Integer(
        10,
        help="""Queued jobs one person may have at a time; a job past it is refused with
        HTTP 429 and a sentence (running jobs do not count).

        Example: ``c.JobManager.max_queued_jobs_per_user = 20``. It keeps one person from
        filling the queue; fairness among people does the rest.
        """,
    ).tag(config=True)

    @validate("max_queued_jobs_per_user")
    def _queue_at_least_one(self, proposal: Any) -> int:
        if proposal["value"] < 1:
            raise ValueError("max_queued_jobs_per_user must be at least 1")
        return int(proposal["value"])

    queue_poll_interval = Float(
        5.0,
        help="""Seconds between retries of a queue waiting for GPU capacity (servers that
        stop free capacity without telling the manager): ``c.JobManager.queue_poll_interval
        = 10``.""",
    ).tag(config=True)

    max_notebook_bytes = Integer(
        64 * 1024 * 1024,
        help="The largest notebook a job takes: ``c.JobManager.max_notebook_bytes = 67108864``.",
    ).tag(config=True)

    kernel_startup_timeout = Integer(
        60,
        help="Seconds a job's kernel may take to start (large images are slow): ``= 300``.",
    ).tag(config=True)

    autosave_seconds = Float(
        30.0,
        help="Save a job's output notebook this often during a long cell (0: between cells only).",
    ).tag(config=True)

    max_log_bytes = Integer(
        256 * 1024 * 1024,
        help="Cell output kept in a job's log; the output notebook keeps everything.",
    ).tag(config=True)

    max_job_retries = Integer(
        3,
        help="""The most retries a job may ask for with its checkpoint (``CreateJob.checkpoint``):
        a job killed from outside (its runner killed, the machine or job service restarted)
        is started again from its checkpoint folder up to that many times; more is refused
        with a sentence. 0 turns automatic resume off.

        Example: ``c.JobManager.max_job_retries = 5``.
        """,
    ).tag(config=True)

    @validate("max_job_retries")
    def _retries_not_negative(self, proposal: Any) -> int:
        if proposal["value"] < 0:
            raise ValueError("max_job_retries cannot be negative")
        return int(proposal["value"])

    capacity = Instance(
        JobAdmission,
        help="""The capacity hook: may a job start now, and with which GPU environment.

        The job service sets a ``FlavorAdmission``, asking the same admission as the hub's
        spawners; the default lets every job start at once, as its host is.
        """,
    )

    @default("capacity")
    def _default_capacity(self) -> JobAdmission:
        return JobAdmission()
