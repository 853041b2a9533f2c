"""pytest fixtures for tests that talk to a Kubernetes API.

By default every test gets a fresh emulated cluster (tests/support/k8s_emulator) on a free
127.0.0.1 port, run by a background thread with its own event loop: it works the same for
plain and async tests (any pytest-asyncio loop) and for processes the test starts, such as
a real JupyterHub (give it ``KUBECONFIG=<cluster.kubeconfig>``).

With ``KUBECONFIG`` set and ``-m k8s`` on the command line, ``k8s_emulator`` yields the
real cluster instead (same ``url``/``kubeconfig``, ``is_emulated`` False); it has no
controls, so tests that need them (``k8s_controls``) skip.

tests/conftest.py loads this module as a pytest plugin, so every test folder has them.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client, config

from .k8s_emulator import EmulatedCluster


class RealCluster:
    """A cluster reached through $KUBECONFIG; it offers no emulator controls."""

    is_emulated = False

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        document = yaml.safe_load(kubeconfig.read_text())
        context_name = document.get("current-context")
        context = next(c["context"] for c in document["contexts"] if c["name"] == context_name)
        cluster = next(
            c["cluster"] for c in document["clusters"] if c["name"] == context["cluster"]
        )
        self.url: str = cluster["server"]


def real_cluster_selected(pytest_config: pytest.Config) -> bool:
    """True when the run asked for the real cluster: KUBECONFIG set and ``-m`` selecting k8s."""
    expression = pytest_config.getoption("markexpr", "") or ""
    return (
        bool(os.environ.get("KUBECONFIG")) and "k8s" in expression and "not k8s" not in expression
    )


@pytest.fixture
def k8s_emulator(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[EmulatedCluster | RealCluster]:
    """A Kubernetes API for this test: ``.url``, ``.kubeconfig`` (a file) and ``.is_emulated``.

    Emulated (the default), it is a fresh cluster with the namespaces default, kube-system,
    kube-public and kube-node-lease and no nodes; add nodes with ``add_gpu_nodes``.
    """
    if real_cluster_selected(request.config):
        yield RealCluster(Path(os.environ["KUBECONFIG"]))
        return
    cluster = EmulatedCluster.start(tmp_path / "kubeconfig")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def k8s_controls(k8s_emulator: EmulatedCluster | RealCluster) -> EmulatedCluster:
    """The emulated cluster with its controls (nodes, container outcomes, processes)."""
    if not isinstance(k8s_emulator, EmulatedCluster):
        pytest.skip("needs the Kubernetes emulator's controls, which a real cluster does not have")
    return k8s_emulator


@pytest.fixture
async def k8s_api(k8s_emulator: EmulatedCluster | RealCluster) -> AsyncIterator[client.ApiClient]:
    """A kubernetes_asyncio ApiClient for the cluster (its own Configuration, not the global one)."""
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(k8s_emulator.kubeconfig), client_configuration=configuration
    )
    async with client.ApiClient(configuration) as api:
        yield api


@pytest.fixture
async def k8s_namespace(k8s_api: client.ApiClient) -> AsyncIterator[str]:
    """A fresh namespace, deleted afterwards (so the same test can run on a real cluster)."""
    core = client.CoreV1Api(k8s_api)
    name = f"test-{secrets.token_hex(4)}"
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    try:
        await core.delete_namespace(name)
    except client.ApiException as error:
        if error.status != 404:
            raise


@pytest.fixture
async def kubespawner_env(
    k8s_emulator: EmulatedCluster | RealCluster, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[None]:
    """Make KubeSpawner (or a subclass) created in this test process use ``k8s_emulator``.

    KubeSpawner loads the default kubeconfig once (``kubespawner.clients.load_config`` is
    cached) from a location kubernetes_asyncio computed at import time, and keeps reflectors
    in a class-level dict; this points both at the test's cluster and stops the reflectors
    on the test's own event loop afterwards.
    """
    from kubernetes_asyncio.config import kube_config
    from kubespawner import KubeSpawner, clients

    monkeypatch.setenv("KUBECONFIG", str(k8s_emulator.kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(k8s_emulator.kubeconfig))
    clients.load_config.cache_clear()
    yield
    await KubeSpawner._stop_all_reflectors()  # the test helper KubeSpawner's own suite uses
    loop = asyncio.get_running_loop()
    for key in [k for k in clients._client_cache if k[0] is loop]:
        await clients._client_cache.pop(key).api_client.close()
    clients.load_config.cache_clear()


async def wait_for(
    condition: Callable[[], Any | Awaitable[Any]],
    timeout: float = 5.0,
    interval: float = 0.02,
    what: str = "condition",
) -> Any:
    """Poll ``condition`` (sync or async) until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached in {timeout} s")
        await asyncio.sleep(interval)


def status_body(error: client.ApiException) -> dict[str, Any]:
    """The Status object of an API error (reason, message, code, details)."""
    return json.loads(error.body)
