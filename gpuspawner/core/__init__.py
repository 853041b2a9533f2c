"""The shared core of the hub side: what the spawners, the job service and its executors
share, importing no JupyterHub hub, no spawner, no Kubernetes client and no Jupyter Server
(an import-linter contract keeps it so).

Design notes: docs/design/core.md, "gpuspawner.core.__init__".
"""
