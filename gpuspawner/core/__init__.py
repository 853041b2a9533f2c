"""The shared core of the hub side: what the spawners, the job service and its executors
share, importing no JupyterHub hub, no spawner, no Kubernetes client and no Jupyter Server
(an import-linter contract keeps it so).

- ``admission``, ``grant``, ``gpu_hours``: the one admission of a process, its Grants and
  the GPU hours they are charged;
- ``ledger``, ``allocation_record``, ``inventory``, ``telemetry``: who holds which slice of
  which GPU, and what the GPUs are and do;
- ``catalog_source``, ``databases``, ``accounts``, ``cgroups``, ``hub_instance``,
  ``service_process``: the catalog as loaded, databases, OS accounts, cgroup limits, this
  hub instance's identity, and the services' processes.
"""
