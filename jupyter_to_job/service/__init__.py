"""The hub-managed job service: holds the job store and credentials, enforces who may do what.

Run by the hub as ``python -m jupyter_to_job.service`` (see :mod:`jupyter_to_job.hub`);
configured by :class:`~jupyter_to_job.service.app.JobServiceApp`.
"""

from .app import JobServiceApp, main

__all__ = ["JobServiceApp", "main"]
