"""The ``jupyter_to_job`` Jupyter server extension: Run as Job's API in each user's server.

See :class:`~jupyter_to_job.extension.app.JobsExtensionApp`.
"""

from .app import JobsExtensionApp

__all__ = ["JobsExtensionApp"]
