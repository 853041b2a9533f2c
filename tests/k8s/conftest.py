"""The hub's Kubernetes scenarios: each one that talks to a cluster is marked ``k8s``, so
``KUBECONFIG=... pytest -m k8s tests/k8s`` runs them against that cluster (those that need
the test cluster's node controls skip there). The emulator's own tests (``emulator/``) are
not marked: they never talk to a real cluster.

The cluster fixtures themselves are registered suite-wide from tests/conftest.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # pytest hands this hook every item of the run: mark only this folder's.
    for item in items:
        path = Path(item.path)
        if not path.is_relative_to(HERE) or path.is_relative_to(HERE / "emulator"):
            continue
        if "k8s_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.k8s)
