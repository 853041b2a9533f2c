"""The whole campus GPU hub installed on a test cluster as hub_config/kubernetes/README.md
says, and running: the hub, the proxy, the job service, the usage database.

:func:`deploy` follows the README's steps on a cluster of its own (a fresh control plane,
so the chart's cluster-wide objects are the only ones of their names): the namespace
(Pod Security ``baseline`` enforced, ``restricted`` warned), the catalog, sharing and
secret objects of step 2, ``helm upgrade --install`` of this folder's chart and of Zero to
JupyterHub 4.4.0 with the values and an overlay, ``kubectl apply -f rbac.yaml``. The node
runs every pod from its image (images.py): the hub runs the chart's own
``jupyterhub_config.py`` with the rendered values, from the mounted Secret and ConfigMap.

:func:`people_catalog` is a catalog for using it (a course open now, a research group), and
:class:`PortForward` gives it an address a browser keeps (``127.0.0.1:PORT``), as
``kubectl port-forward`` would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from .. import course_catalogs
from .control_plane import REPO
from .session import USERS_NAMESPACE_LABELS, ControlPlaneCluster
from .volumes import STORAGE_CLASS

K8S = REPO / "hub_config" / "kubernetes"
Z2JH_CHART = REPO.parent / "shared" / "reference" / "z2jh" / "chart"
NAMESPACE = "campus"
REGISTRY = "registry.campus.test/campus-gpu-hub"
READY_GUARD = 300.0

# What a test cluster does not have: images to pull (z2jh's pre-pullers wait for nodes to
# pull the user image), a second scheduler worth running (the user scheduler packs nodes),
# placeholder pods; and a default storage class (the test one is named).
TEST_VALUES = {
    "prePuller": {"hook": {"enabled": False}, "continuous": {"enabled": False}},
    "scheduling": {"userScheduler": {"enabled": False}, "userPlaceholder": {"enabled": False}},
    "hub": {
        "image": {"name": f"{REGISTRY}/hub"},
        "db": {"pvc": {"storageClassName": STORAGE_CLASS}},
    },
    "singleuser": {
        "image": {"name": f"{REGISTRY}/user"},
        "storage": {"dynamic": {"storageClass": STORAGE_CLASS}},
    },
}


def gpu_node_options(backend: str, gpus: int) -> dict:
    """GPU nodes as that back end's device plugin and GPU Feature Discovery present them."""
    if backend == "time-slicing":
        # backends/time-slicing.yaml: 4 replicas, renamed to nvidia.com/gpu.shared.
        return {
            "gpu_count": gpus,
            "labels": {
                "nvidia.com/gpu.sharing-strategy": "time-slicing",
                "nvidia.com/gpu.replicas": "4",
            },
            "extended_resources": {"nvidia.com/gpu.shared": gpus * 4},
        }
    if backend == "whole":
        return {"gpu_count": gpus, "labels": {"nvidia.com/gpu.sharing-strategy": "none"}}
    raise ValueError(f"no test nodes are described for the {backend} back end")


@dataclass
class Deployment:
    cluster: ControlPlaneCluster
    namespace: str
    url: str
    """The hub as people reach it: the proxy-public Service's address and port."""

    def kubectl(self, *arguments: str, input: str | None = None) -> str:
        return kubectl(self.cluster, *arguments, namespace=self.namespace, input=input)

    def forward(self, port: int, host: str = "127.0.0.1") -> PortForward:
        """Relay ``host:port`` (0: any free port) to the hub's public Service."""
        public = urlsplit(self.url)
        assert public.hostname is not None and public.port is not None
        return PortForward((public.hostname, public.port), port, host)


def people_catalog() -> str:
    """A catalog for people using the deployment now: the course ml101 (Machine Learning
    101, a quarter of a GPU each) in class since ten minutes ago, with ana and ben enrolled;
    rhea's research group vision-lab; a CPU job flavor everyone may run."""
    start = course_catalogs.minute(course_catalogs.now()) - timedelta(minutes=10)
    course = course_catalogs.course(
        "ml101",
        start=start,
        end=start + timedelta(hours=2),
        students=["ana", "ben"],
        gpu="{fraction: 1/4}",
        title="Machine Learning 101",
    )
    return course_catalogs.catalog(
        course,
        research="""\
  - id: vision-lab
    title: Vision lab
    users: [rhea]
    expires: 2099-12-31
flavors:
  - id: cpu-job
    title: CPU job
    resources: {cpu: 1, memory: 1GiB}
    access: {everyone: true}
""",
    )


class PortForward:
    """Connections to ``host:port`` on this machine relayed to ``target``, on a thread of
    their own. A ClusterIP is an address of this machine only while its cluster runs, and a
    fresh one each session; a browser test wants one it can be told before."""

    def __init__(self, target: tuple[str, int], port: int, host: str = "127.0.0.1") -> None:
        self.target = target
        self._loop = asyncio.new_event_loop()
        self._relays: set[asyncio.Task[None]] = set()
        # Bound here, so that a port in use fails the caller, not the thread.
        self._server = self._loop.run_until_complete(asyncio.start_server(self._relay, host, port))
        self.host, self.port = self._server.sockets[0].getsockname()[:2]
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"forward-{self.port}", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def _relay(self, client: asyncio.StreamReader, answer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._relays.add(task)
        try:
            try:
                reader, writer = await asyncio.open_connection(*self.target)
            except OSError:
                answer.close()  # the Service refused: so does the forward
                return
            await asyncio.gather(_pump(client, writer), _pump(reader, answer))
        finally:
            self._relays.discard(task)

    async def _close(self) -> None:
        self._server.close()
        for task in list(self._relays):
            task.cancel()
        await asyncio.gather(*self._relays, return_exceptions=True)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            sink.close()


def kubectl(
    cluster: ControlPlaneCluster, *arguments: str, namespace: str, input: str | None = None
) -> str:
    result = subprocess.run(
        [
            str(cluster.plane.bin / "kubectl"),
            f"--kubeconfig={cluster.kubeconfig}",
            f"--namespace={namespace}",
            *arguments,
        ],
        input=input,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def helm(cluster: ControlPlaneCluster, *arguments: str) -> str:
    result = subprocess.run(
        [str(cluster.plane.bin / "helm"), f"--kubeconfig={cluster.kubeconfig}", *arguments],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"helm {' '.join(arguments[:2])} failed:\n{result.stderr}")
    return result.stdout


def deploy(
    cluster: ControlPlaneCluster,
    folder: Path,
    catalog: Path,
    *,
    backend: str = "time-slicing",
    gpu_nodes: int = 2,
    gpus_per_node: int = 4,
) -> Deployment:
    """Install and start the hub on ``cluster`` (a cluster of its own) with ``catalog``."""
    folder.mkdir(parents=True, exist_ok=True)
    cluster.add_gpu_nodes(gpu_nodes, **gpu_node_options(backend, gpus_per_node))
    cluster.run_images()
    # A cluster's default storage class provisions the claims that name none (the job
    # service's and the usage database's).
    kubectl(
        cluster,
        "annotate",
        "storageclass",
        STORAGE_CLASS,
        "storageclass.kubernetes.io/is-default-class=true",
        namespace="default",
    )
    # Step 2 of the README: the namespace and what the admin makes in it.
    kubectl(cluster, "create", "namespace", NAMESPACE, namespace="default")
    kubectl(
        cluster,
        "label",
        "namespace",
        NAMESPACE,
        *(f"{key}={value}" for key, value in USERS_NAMESPACE_LABELS.items()),
        namespace="default",
    )
    kubectl(
        cluster,
        "create",
        "configmap",
        "course-catalog",
        f"--from-file={catalog}",
        namespace=NAMESPACE,
    )
    kubectl(
        cluster,
        "create",
        "configmap",
        "gpu-sharing",
        f"--from-file=values.yaml={K8S / 'backends' / f'{backend}.yaml'}",
        namespace=NAMESPACE,
    )
    kubectl(
        cluster,
        "create",
        "secret",
        "generic",
        "campus-gpu-hub",
        "--from-literal=prewarm-secret=test-prewarm-secret-0123456789abcdef",
        "--from-literal=usage-db-password=test-usage-db-password",
        namespace=NAMESPACE,
    )
    # Step 3: both charts, then rbac.yaml.
    test_values = folder / "test-values.yaml"
    test_values.write_text(yaml.safe_dump(TEST_VALUES))
    values = [
        f"--values={K8S / 'values.yaml'}",
        f"--values={K8S / 'backends' / f'{backend}.yaml'}",
        f"--values={test_values}",
    ]
    helm(
        cluster,
        "upgrade",
        "--install",
        "campus-gpu-hub",
        str(K8S),
        f"--namespace={NAMESPACE}",
        *values,
    )
    helm(
        cluster,
        "upgrade",
        "--install",
        "campus",
        str(Z2JH_CHART),
        f"--namespace={NAMESPACE}",
        *values,
    )
    kubectl(cluster, "apply", f"--filename={K8S / 'rbac.yaml'}", namespace=NAMESPACE)
    wait_until_running(cluster, NAMESPACE)
    service = json.loads(
        kubectl(cluster, "get", "service", "proxy-public", "-o", "json", namespace=NAMESPACE)
    )
    address = cluster.agent.services.address(service["spec"]["clusterIP"])
    return Deployment(cluster, NAMESPACE, f"http://{address}:{service['spec']['ports'][0]['port']}")


def wait_until_running(cluster: ControlPlaneCluster, namespace: str) -> None:
    """Until every Deployment and StatefulSet of ``namespace`` has its pods ready."""
    deadline = time.monotonic() + READY_GUARD
    while True:
        workloads = json.loads(
            kubectl(cluster, "get", "deployments,statefulsets", "-o", "json", namespace=namespace)
        )["items"]
        waiting = [
            w["metadata"]["name"]
            for w in workloads
            if (w.get("status") or {}).get("readyReplicas", 0) < (w["spec"].get("replicas") or 1)
        ]
        if workloads and not waiting:
            return
        if time.monotonic() > deadline:
            pods = kubectl(cluster, "get", "pods", "-o", "wide", namespace=namespace)
            raise TimeoutError(f"not ready in {READY_GUARD:.0f} s: {', '.join(waiting)}\n{pods}")
        time.sleep(1)
