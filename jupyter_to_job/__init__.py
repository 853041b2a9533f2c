"""Run as Job: run a saved notebook as a batch job, apart from the notebook server.

Design notes: docs/design/jobs.md, "jupyter_to_job.__init__".
"""

__version__ = "0.1.0"


def _jupyter_server_extension_points() -> list[dict[str, object]]:
    """The server extension, for ``jupyter server`` and ``jupyterhub-singleuser``."""
    from .extension import JobsExtensionApp
    from .extension.tensorboard import TensorBoardApp

    return [
        {"module": "jupyter_to_job.extension", "app": JobsExtensionApp},
        {"module": "jupyter_to_job.extension.tensorboard", "app": TensorBoardApp},
    ]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the prebuilt JupyterLab extension lies (for `jupyter labextension develop`)."""
    return [{"src": "labextension", "dest": "@campus-gpu-hub/jupyter-to-job"}]
