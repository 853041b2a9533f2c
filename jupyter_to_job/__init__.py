"""Run as Job: run a saved notebook as a batch job, apart from the notebook server.

- :mod:`.models`: the wire models of the job API;
- :mod:`.runner`: the in-job notebook runner (``python -m jupyter_to_job.runner``);
- :mod:`.manager`: the job lifecycle (queue, stop, delete, reconcile), over
  :mod:`.store` (SQLAlchemy) and :mod:`.logs` (durable logs);
- :mod:`.executors`: where jobs run (local processes; Kubernetes later).

This module imports nothing heavy: the runner starts from it in every job.
"""

__version__ = "0.1.0"


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the prebuilt JupyterLab extension lies (for `jupyter labextension develop`)."""
    return [{"src": "labextension", "dest": "@campus-gpu-hub/jupyter-to-job"}]
