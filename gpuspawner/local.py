"""The one-machine spawners' public import path, kept stable for hub configurations:
``c.JupyterHub.spawner_class = "gpuspawner.local.LocalGPUSpawner"``. The code lives in
:mod:`gpuspawner.spawners.local`."""

from .spawners.local import LocalGPUSpawner, SimpleLocalGPUSpawner

__all__ = ["LocalGPUSpawner", "SimpleLocalGPUSpawner"]
