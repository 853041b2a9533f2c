"""Campus GPU hub: course-time GPU profiles and GPU shares for JupyterHub.

The spawners live in submodules so that importing the policy never imports
JupyterHub or Kubernetes:

- ``gpuspawner.policy``: pure decisions (shares, schedules, catalog, entitlements, capacity)
- ``gpuspawner.spawners``: ``GPUSpawner`` on Kubernetes, ``LocalGPUSpawner`` for one
  multi-GPU workstation
"""

__version__ = "0.1.0"
