"""pytest fixtures for tests that talk to a Kubernetes API.

Every test that asks for ``k8s_cluster`` gets the session's real control plane
(tests/support/cluster: etcd, kube-apiserver, kube-controller-manager and kube-scheduler
built from their Go modules by ``make k8s-tools``, with RBAC and Pod Security admission),
with this project's node agent running the pods, cleaned back to the session's start
after each test. Components authenticate as they do in production: ``hub_kubeconfig`` (the
z2jh hub Role and ``hub_config/kubernetes/rbac.yaml``), ``job_service_kubeconfig`` (the
job service's Role); ``k8s_cluster.kubeconfig`` is the cluster admin's, for test set-up.

With ``KUBECONFIG`` set and ``-m k8s`` on the command line, ``k8s_cluster`` is that cluster
instead (``is_emulated`` False, no node controls: tests that need them skip).

``emulated_cluster`` is the older API emulator (tests/support/k8s_emulator), for the
emulator's own tests and the fast unit-level checks listed in its README.

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

from .cluster.control_plane import ControlPlaneUnavailable
from .cluster.kai import KAI
from .cluster.kueue import Kueue
from .cluster.session import USERS_NAMESPACE_LABELS, ControlPlaneCluster
from .k8s_emulator import EmulatedCluster

TestCluster = ControlPlaneCluster | EmulatedCluster


class RealCluster:
    """A cluster reached through $KUBECONFIG; it offers no node controls."""

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


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlaneCluster]:
    """The session's control plane and node agent (started on first use, ~10 s)."""
    try:
        cluster = ControlPlaneCluster.start(tmp_path_factory.mktemp("control-plane"))
    except ControlPlaneUnavailable as error:
        if os.environ.get("CI"):
            raise  # `make test` builds it first: in CI a missing control plane is a failure
        pytest.skip(str(error))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def k8s_cluster(request: pytest.FixtureRequest) -> Iterator[ControlPlaneCluster | RealCluster]:
    """A Kubernetes cluster for this test: ``.url``, ``.kubeconfig`` (the admin's) and
    ``.is_emulated`` (False). It starts with no nodes; add some with ``add_gpu_nodes``."""
    if real_cluster_selected(request.config):
        yield RealCluster(Path(os.environ["KUBECONFIG"]))
        return
    cluster: ControlPlaneCluster = request.getfixturevalue("control_plane")
    try:
        yield cluster
    finally:
        cluster.reset()


@pytest.fixture
def kueue(k8s_cluster: ControlPlaneCluster | RealCluster) -> Kueue | None:
    """Kueue v0.17.0 running in the test cluster (installed on first use, for the session):
    its CRDs, RBAC, webhooks and controller. On an external cluster: whatever it runs."""
    if isinstance(k8s_cluster, ControlPlaneCluster):
        try:
            return k8s_cluster.kueue()
        except ControlPlaneUnavailable as error:
            if os.environ.get("CI"):
                raise
            pytest.skip(str(error))
    return None


@pytest.fixture
def kai(k8s_cluster: ControlPlaneCluster | RealCluster) -> Iterator[KAI | None]:
    """KAI-scheduler v0.12.0 running in the test cluster (installed on first use, for the
    session): its CRDs, RBAC, queues, webhooks and components, GPU sharing on; for this test
    the node also runs KAI's reservation pods (with the GPU the device plugin would give
    them) and the images it knows. On an external cluster: whatever it runs."""
    if not isinstance(k8s_cluster, ControlPlaneCluster):
        yield None
        return
    try:
        installed = k8s_cluster.kai()
    except ControlPlaneUnavailable as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(error))
    k8s_cluster.run_processes(installed.reservation_runner())
    try:
        yield installed
    finally:
        k8s_cluster.call(installed.clear_reservations)


@pytest.fixture
def emulated_cluster(tmp_path: Path) -> Iterator[EmulatedCluster]:
    """A fresh API emulator (tests/support/k8s_emulator) for this test, with its controls."""
    cluster = EmulatedCluster.start(tmp_path / "emulator-kubeconfig")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def k8s_controls(k8s_cluster: ControlPlaneCluster | RealCluster) -> ControlPlaneCluster:
    """The test cluster with its node controls (nodes, container outcomes, processes)."""
    if not isinstance(k8s_cluster, ControlPlaneCluster):
        pytest.skip("needs the test cluster's node controls, which a real cluster does not have")
    return k8s_cluster


@pytest.fixture
def hub_kubeconfig(k8s_cluster: ControlPlaneCluster | RealCluster) -> Path:
    """The hub's credentials: service account ``hub`` with the z2jh chart's Role and
    ``hub_config/kubernetes/rbac.yaml`` (on a real cluster: $KUBECONFIG as given)."""
    if isinstance(k8s_cluster, ControlPlaneCluster):
        return k8s_cluster.identities["hub"].kubeconfig
    return k8s_cluster.kubeconfig


@pytest.fixture
def job_service_kubeconfig(k8s_cluster: ControlPlaneCluster | RealCluster) -> Path:
    """The job service's credentials: service account ``jupyter-to-job`` with the Role of
    ``hub_config/kubernetes/job-service.yaml`` (on a real cluster: $KUBECONFIG as given)."""
    if isinstance(k8s_cluster, ControlPlaneCluster):
        return k8s_cluster.identities["job-service"].kubeconfig
    return k8s_cluster.kubeconfig


@pytest.fixture
async def k8s_api(
    k8s_cluster: ControlPlaneCluster | RealCluster,
) -> AsyncIterator[client.ApiClient]:
    """A kubernetes_asyncio ApiClient for the cluster as its admin (its own Configuration)."""
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(k8s_cluster.kubeconfig), client_configuration=configuration
    )
    async with client.ApiClient(configuration) as api:
        yield api


@pytest.fixture
async def k8s_namespace(k8s_api: client.ApiClient) -> AsyncIterator[str]:
    """A fresh namespace, deleted afterwards (so the same test can run on a real cluster)."""
    core = client.CoreV1Api(k8s_api)
    name = f"test-{secrets.token_hex(4)}"
    await core.create_namespace(
        client.V1Namespace(
            metadata=client.V1ObjectMeta(name=name, labels=dict(USERS_NAMESPACE_LABELS))
        )
    )
    yield name
    try:
        await core.delete_namespace(name)
    except client.ApiException as error:
        if error.status != 404:
            raise


@pytest.fixture
async def kubespawner_env(
    hub_kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[None]:
    """Make KubeSpawner (or a subclass) created in this test process use the test cluster,
    as the hub does: with the hub's service account (``hub_kubeconfig``).

    KubeSpawner loads the default kubeconfig once (``kubespawner.clients.load_config`` is
    cached) from a location kubernetes_asyncio computed at import time, and keeps reflectors
    in a class-level dict; this points both at the test's cluster and stops the reflectors
    on the test's own event loop afterwards.
    """
    from kubernetes_asyncio.config import kube_config
    from kubespawner import KubeSpawner, clients

    monkeypatch.setenv("KUBECONFIG", str(hub_kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(hub_kubeconfig))
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


async def create_priority_class(k8s_api: Any, name: str, value: int) -> None:
    """Create a PriorityClass and wait until admission knows it: the API server's Priority
    plugin reads classes from its informer, so a pod naming a class made a moment ago can
    be refused ("no PriorityClass with name ... was found") until the cache has it. A pod
    created with ``dryRun`` passes admission without being made."""
    await client.SchedulingV1Api(k8s_api).create_priority_class(
        {"metadata": {"name": name}, "value": value}
    )
    probe = {
        "metadata": {"name": f"priority-probe-{name}"},
        "spec": {
            "priorityClassName": name,
            "containers": [{"name": "probe", "image": "quay.io/jupyter/base-notebook"}],
        },
    }

    async def admitted() -> bool:
        try:
            await client.CoreV1Api(k8s_api).create_namespaced_pod("default", probe, dry_run="All")
        except client.ApiException as error:
            if error.status == 403 and "no PriorityClass" in str(error.body):
                return False
            raise
        return True

    await wait_for(admitted, timeout=30, interval=0.1, what=f"PriorityClass {name} in admission")


def status_body(error: client.ApiException) -> dict[str, Any]:
    """The Status object of an API error (reason, message, code, details)."""
    return json.loads(error.body)
