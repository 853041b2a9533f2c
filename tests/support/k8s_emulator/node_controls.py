"""What a test can make a cluster's nodes do, whoever runs them (the emulator or the node agent).

``NodeControls`` (async, on the nodes' event loop) needs ``self.kubelet``, ``self.timings``
and an ``add_node``; ``SyncNodeControls`` is the synchronous, thread-safe face tests hold,
which runs each control on that loop through ``self.call``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .containers import ContainerScript, PodMatch, ProcessRunner
from .kubelet import Kubelet, KubeletTimings
from .nodes import gpu_node

Object = dict[str, Any]


class NodeControls:
    """Node-level controls: add nodes, script containers, end them, run processes."""

    kubelet: Kubelet
    timings: KubeletTimings
    _nodes_added: int = 0

    async def add_node(self, node: Object) -> Object:  # pragma: no cover - each host defines it
        raise NotImplementedError

    async def add_gpu_nodes(
        self, count: int = 1, *, prefix: str = "gpu-node", **options: Any
    ) -> list[str]:
        """Register ``count`` GPU nodes named ``<prefix>-0``, ``<prefix>-1``, ...;
        ``options`` go to nodes.gpu_node (product, gpu_count, extended_resources, ...)."""
        names = []
        for i in range(count):
            number = self._nodes_added + 1
            node = gpu_node(
                f"{prefix}-{i}", address=f"10.0.{number // 250}.{number % 250 + 1}", **options
            )
            names.append((await self.add_node(node))["metadata"]["name"])
        return names

    def script(self, script: ContainerScript) -> None:
        """Make matching simulated containers exit, OOM, log or fail to pull (newest wins)."""
        self.kubelet.scripts.append(script)

    def fail_image_pull(self, image: str, message: str | None = None) -> None:
        """Pulling ``image`` fails from now on (ErrImagePull, then ImagePullBackOff)."""
        self.kubelet.unpullable_images[image] = message or (
            f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": not found'
        )

    async def oom_kill(self, namespace: str, name: str, container: str | None = None) -> None:
        """The container is killed for exceeding its memory limit (exit 137, OOMKilled)."""
        await self.kubelet.end_container(namespace, name, container, 137, "OOMKilled")

    async def complete_container(
        self, namespace: str, name: str, container: str | None = None, exit_code: int = 0
    ) -> None:
        """The container's process exits with ``exit_code`` (Completed if 0, else Error)."""
        await self.kubelet.end_container(
            namespace, name, container, exit_code, "Completed" if exit_code == 0 else "Error"
        )

    def run_processes(self, runner: ProcessRunner | None) -> None:
        """Run matching pods' containers as local processes (None: simulate all again)."""
        self.kubelet.process_runner = runner

    def set_serve_ports(self, enabled: bool = True) -> None:
        """Simulated containers started from now on answer HTTP on their declared ports at
        the pod IP (a Jupyter server redirects as jupyterhub-singleuser does; see
        container_ports.py)."""
        self.kubelet.serve_ports = enabled

    def write_log(self, namespace: str, name: str, text: str, container: str | None = None) -> None:
        """Append ``text`` to a running simulated container's log."""
        worker = self.kubelet.worker(namespace, name)
        container = container or next(iter(worker.statuses))
        self.kubelet.logs.current(worker.uid, container).write(text)


class SyncNodeControls:
    """The synchronous face of :class:`NodeControls` (``self.nodes``), for tests."""

    nodes: NodeControls
    call: Callable[..., Any]

    def add_node(self, node: Object) -> Object:
        return self.call(self.nodes.add_node, node)

    def add_gpu_nodes(self, count: int = 1, **options: Any) -> list[str]:
        return self.call(self.nodes.add_gpu_nodes, count, **options)  # type: ignore[no-any-return]

    def script(self, match: PodMatch | None = None, **behaviour: Any) -> None:
        self.call(self.nodes.script, ContainerScript(match=match or PodMatch(), **behaviour))

    def fail_image_pull(self, image: str, message: str | None = None) -> None:
        self.call(self.nodes.fail_image_pull, image, message)

    def oom_kill(self, namespace: str, name: str, container: str | None = None) -> None:
        self.call(self.nodes.oom_kill, namespace, name, container)

    def complete_container(
        self, namespace: str, name: str, container: str | None = None, exit_code: int = 0
    ) -> None:
        self.call(self.nodes.complete_container, namespace, name, container, exit_code)

    def run_processes(self, runner: ProcessRunner | None) -> None:
        self.call(self.nodes.run_processes, runner)

    def serve_ports(self, enabled: bool = True) -> None:
        self.call(self.nodes.set_serve_ports, enabled)

    def write_log(self, namespace: str, name: str, text: str, container: str | None = None) -> None:
        self.call(self.nodes.write_log, namespace, name, text, container)

    def set_timings(self, **seconds: float) -> None:
        """Slow the kubelet down, such as ``set_timings(pull=0.5, ready=0.2)``."""

        def update() -> None:
            for step, value in seconds.items():
                if not hasattr(self.nodes.timings, step):
                    raise AttributeError(f"the kubelet has no step called {step!r}")
                setattr(self.nodes.timings, step, value)

        self.call(update)
