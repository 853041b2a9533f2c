"""Run as Job: run a saved notebook as a batch job, apart from the notebook server.

- :mod:`.models`: the wire models of the job API;
- :mod:`.runner`: the in-job notebook runner (``python -m jupyter_to_job.runner``);
- :mod:`.manager`: the job lifecycle (queue, stop, delete, reconcile), over
  :mod:`.store` (SQLAlchemy) and :mod:`.logs` (durable logs);
- :mod:`.executors`: where jobs run (local processes; Kubernetes later);
- :mod:`.service`: the hub-managed job service; :mod:`.extension`: the server extension
  in each user's server (TensorBoard: :mod:`.extension.tensorboard`); :mod:`.hub` and
  :mod:`.scopes`: registering them in a hub.

This module imports nothing heavy: the runner starts from it in every job, so the server
extension is imported only when a Jupyter server asks for it.
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
