"""The emulated cluster: API server, scheduler, kubelets and Job controller together.

``KubernetesEmulator`` runs on the current event loop and offers async controls.
``EmulatorThread`` runs one on its own loop in a background thread, so that synchronous
tests, any pytest-asyncio loop, and other processes (a JupyterHub under test) can all
reach it; ``EmulatedCluster`` is the synchronous, thread-safe face tests hold.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any, TypeVar

from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from .apiserver import ApiServer
from .client import Informer, KubeClient
from .jobs import JobController
from .kubelet import Kubelet, KubeletTimings
from .node_controls import NodeControls, SyncNodeControls
from .podgc import PodGarbageCollector
from .resources import NAMESPACE, lookup, minor_of
from .scheduler import Scheduler
from .server import ServerSettings, make_app
from .store import Store

log = logging.getLogger(__name__)

T = TypeVar("T")
Object = dict[str, Any]

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def kubeconfig_for(url: str, namespace: str = "default") -> Object:
    """A kubeconfig for a plain-HTTP API server; the token is sent but never checked."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emulator", "cluster": {"server": url}}],
        "users": [{"name": "emulator", "user": {"token": "emulator-token"}}],
        "contexts": [
            {
                "name": "emulator",
                "context": {"cluster": "emulator", "user": "emulator", "namespace": namespace},
            }
        ],
        "current-context": "emulator",
    }


class KubernetesEmulator(NodeControls):
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        scheduler_names: Iterable[str] = ("default-scheduler",),
        timings: KubeletTimings | None = None,
        history_limit: int = 10_000,
        history_seconds: float | None = None,
        bookmark_interval: float = 60.0,
        job_backoff_delay: float = 0.0,
        namespaces: Iterable[str] = (),
        serve_ports: bool = False,
        kubernetes_version: str = "1.34",
    ) -> None:
        self.host = host
        self.port = port
        self.scheduler_names = set(scheduler_names)
        self.timings = timings or KubeletTimings()
        self.history_limit = history_limit
        self.history_seconds = history_seconds
        self.settings = ServerSettings(
            bookmark_interval=bookmark_interval, kubernetes_minor=minor_of(kubernetes_version)
        )
        self.job_backoff_delay = job_backoff_delay
        self.namespaces = tuple(namespaces)
        self.serve_ports = serve_ports
        self._tasks: list[asyncio.Task[None]] = []
        self._clients: list[KubeClient] = []
        self._server: HTTPServer | None = None
        self._nodes_added = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def kubeconfig(self, namespace: str = "default") -> Object:
        return kubeconfig_for(self.url, namespace)

    def write_kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        path.write_text(json.dumps(self.kubeconfig(namespace), indent=2))
        return path

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        self.store = Store(self.history_limit, self.history_seconds)
        self.api = ApiServer(self.store)
        self.api.start()
        for name in (*SYSTEM_NAMESPACES, *self.namespaces):
            if self.store.get(NAMESPACE, "", name) is None:
                self.api.create(NAMESPACE, None, {"metadata": {"name": name}})
        sockets = bind_sockets(self.port, self.host)
        self.port = sockets[0].getsockname()[1]
        client = KubeClient(self.url, "emulator-kubelet-and-scheduler")
        job_client = KubeClient(self.url, "emulator-job-controller")
        self._clients = [client, job_client]
        pods = Informer(client, "/api/v1/pods", lambda *event: self._on_pod(*event), kind="Pod")
        nodes = Informer(
            client, "/api/v1/nodes", lambda *event: self.scheduler.on_node(*event), kind="Node"
        )
        claims = Informer(
            client,
            "/api/v1/persistentvolumeclaims",
            lambda *event: self.scheduler.on_claim(*event),
            kind="PersistentVolumeClaim",
        )
        self.scheduler = Scheduler(client, pods, nodes, self.scheduler_names)
        self.kubelet = Kubelet(
            client, lambda: nodes.cache, timings=self.timings, api_port=self.port
        )
        self.kubelet.serve_ports = self.serve_ports
        self.jobs = JobController(job_client, backoff_delay=self.job_backoff_delay)
        self.podgc = PodGarbageCollector(client)
        self._server = HTTPServer(
            make_app(self.api, self.kubelet.logs, self.settings, self.kubelet)
        )
        self._server.add_sockets(sockets)
        for name, coroutine in (
            ("pods-informer", pods.run()),
            ("nodes-informer", nodes.run()),
            ("claims-informer", claims.run()),
            ("scheduler", self.scheduler.run()),
            ("jobs-informer", self.jobs.jobs.run()),
            ("job-pods-informer", self.jobs.pods.run()),
            ("job-controller", self.jobs.run()),
        ):
            self._tasks.append(asyncio.create_task(coroutine, name=f"emulator-{name}"))
        await asyncio.wait_for(
            asyncio.gather(
                pods.synced.wait(),
                nodes.synced.wait(),
                claims.synced.wait(),
                self.jobs.jobs.synced.wait(),
                self.jobs.pods.synced.wait(),
            ),
            10,
        )

    def _on_pod(self, kind: str, pod: Object, old: Object | None) -> None:
        self.scheduler.on_pod(kind, pod, old)
        self.kubelet.on_pod(kind, pod, old)
        self.podgc.on_pod(kind, pod, old)

    async def stop(self) -> None:
        """Stop everything started so far (also after a failed start)."""
        if kubelet := getattr(self, "kubelet", None):
            await kubelet.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if jobs := getattr(self, "jobs", None):
            await jobs.stop()
        if podgc := getattr(self, "podgc", None):
            await podgc.stop()
        if api := getattr(self, "api", None):
            await api.stop()
        if self._server is not None:
            self._server.stop()
            await self._server.close_all_connections()
        for client in self._clients:
            await client.close()

    # --- controls -----------------------------------------------------------------------

    async def add_node(self, node: Object) -> Object:
        """Register a node (see nodes.node / nodes.gpu_node) through the API; return once
        the scheduler sees it, so a pod created next is placed knowing every node."""
        self._nodes_added += 1
        created = await self._clients[0].create("/api/v1/nodes", node)
        key = ("", created["metadata"]["name"])
        for _ in range(1000):
            if key in self.scheduler.nodes.cache:
                break
            await asyncio.sleep(0.005)
        return created

    def get(
        self,
        plural: str,
        name: str,
        namespace: str | None = None,
        group: str = "",
        version: str = "v1",
    ) -> Object | None:
        """Read an object straight from the store (no HTTP), or None."""
        rt = lookup(group, version, plural)
        if rt is None:
            raise LookupError(f"the emulator serves no {group}/{version} {plural}")
        return self.store.get(rt, namespace or "" if rt.namespaced else "", name)

    def compact(self) -> None:
        """Forget the change history: watches from older resourceVersions get 410 Gone."""
        self.store.compact()

    def set_watch_window(
        self,
        *,
        history_limit: int | None = None,
        history_seconds: float | None = None,
        bookmark_interval: float | None = None,
    ) -> None:
        """Shorten (or widen) what a watch can resume from: the last ``history_limit``
        changes, those of the last ``history_seconds``; and how often watches that allow
        bookmarks get one. Arguments left None keep their value."""
        if history_limit is not None:
            self.history_limit = self.store.history_limit = history_limit
        if history_seconds is not None:
            self.history_seconds = self.store.history_seconds = history_seconds
        if bookmark_interval is not None:
            self.settings.bookmark_interval = bookmark_interval

    def end_watches(self) -> None:
        """End every open watch stream, as an API server restart or a load balancer does;
        clients resume from their last resourceVersion (or get 410 Gone beyond the window)."""
        self.store.close_watchers()


class EmulatorThread:
    """Runs a KubernetesEmulator on its own event loop in a daemon thread."""

    def __init__(self, emulator: KubernetesEmulator) -> None:
        self.emulator = emulator
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 30) -> None:
        ready = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            try:
                loop.run_until_complete(self.emulator.start())
            except BaseException as error:  # report any start failure to the starting thread
                failure.append(error)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self.emulator.stop())
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=main, name="k8s-emulator", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise TimeoutError(f"the Kubernetes emulator did not start in {timeout} s")
        if failure:
            raise failure[0]

    def call(
        self,
        function: Callable[..., Coroutine[Any, Any, T] | T],
        *args: Any,
        timeout: float = 30,
        **kwargs: Any,
    ) -> T:
        """Run ``function(*args, **kwargs)`` on the emulator's loop and return its result."""
        assert self._loop is not None

        async def invoke() -> T:
            result = function(*args, **kwargs)
            if asyncio.iscoroutine(result):
                return await result  # type: ignore[no-any-return]
            return result  # type: ignore[return-value]

        return asyncio.run_coroutine_threadsafe(invoke(), self._loop).result(timeout)

    def stop(self, timeout: float = 30) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)


class EmulatedCluster(SyncNodeControls):
    """A running emulator as tests see it: ``url``, ``kubeconfig`` (a file), and controls.

    Every control is synchronous and thread-safe (it runs on the emulator's own loop), so
    it can be called from plain tests and from async tests alike.
    """

    is_emulated = True

    def __init__(self, runner: EmulatorThread, kubeconfig: Path) -> None:
        self._runner = runner
        self.emulator = self.nodes = runner.emulator
        self.kubeconfig = kubeconfig
        self.url = runner.emulator.url

    @classmethod
    def start(cls, kubeconfig: Path, **options: Any) -> EmulatedCluster:
        runner = EmulatorThread(KubernetesEmulator(**options))
        runner.start()
        runner.emulator.write_kubeconfig(kubeconfig)
        return cls(runner, kubeconfig)

    def stop(self) -> None:
        self._runner.stop()

    def call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run any emulator method or function on the emulator's loop."""
        return self._runner.call(function, *args, **kwargs)

    def get(
        self,
        plural: str,
        name: str,
        namespace: str | None = None,
        group: str = "",
        version: str = "v1",
    ) -> Object | None:
        return self.call(self.emulator.get, plural, name, namespace, group, version)

    def compact(self) -> None:
        self.call(self.emulator.compact)

    def set_watch_window(self, **window: Any) -> None:
        """``set_watch_window(history_seconds=0.5, history_limit=50, bookmark_interval=0.2)``."""
        self.call(self.emulator.set_watch_window, **window)

    def end_watches(self) -> None:
        self.call(self.emulator.end_watches)

    def set_scheduler_names(self, names: Iterable[str]) -> None:
        """Which schedulerName values the simulated scheduler serves (default-scheduler only by default)."""
        self.call(self.emulator.scheduler.serve, set(names))
