"""The Kubernetes spawner's public import path, kept stable for hub configurations:
``c.JupyterHub.spawner_class = "gpuspawner.kubernetes.GPUSpawner"``. The code lives in
:mod:`gpuspawner.spawners.kubernetes`."""

from .spawners.kubernetes import GPUSpawner

__all__ = ["GPUSpawner"]
