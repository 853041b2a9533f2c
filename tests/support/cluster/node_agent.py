"""The cluster's nodes: the one part of the test cluster that is ours (as kwok's, plus processes).

For each node the agent registers a Node with GPU capacity under the node's own identity
(``system:node:<name>``, so the Node authorizer and NodeRestriction apply to it as to a
kubelet), keeps its Lease fresh, runs the pods the real scheduler binds to it (the kubelet of
``tests/support/k8s_emulator``: processes or scripted containers), reports their status and
events, and serves the kubelet API the API server proxies ``pods/log`` and ``pods/exec`` to,
over TLS, verifying the API server's client certificate.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import ssl
from dataclasses import dataclass
from typing import Any

from tornado import web
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from ..k8s_emulator import errors
from ..k8s_emulator.client import ClientError, Informer, KubeClient
from ..k8s_emulator.kubelet import Kubelet, KubeletTimings, VolumeMountError
from ..k8s_emulator.logs import LogQuery, check_log_options, container_log, stream_log
from ..k8s_emulator.node_controls import NodeControls
from ..k8s_emulator.pod_exec import PROTOCOLS, ExecRequest, PodExecHandler
from ..k8s_emulator.timestamps import micro, rfc3339
from .control_plane import ControlPlane
from .dra import GPUKubeletPlugin
from .images import ImageRunner
from .pod_network import PodNetwork
from .pod_network import available as pod_network_available
from .services import ServiceProxy, service_links
from .volumes import FolderProvisioner, storage_class

log = logging.getLogger(__name__)

Object = dict[str, Any]

KUBELET_VERSION = "v1.34.4"
LEASE_SECONDS = 40
HEARTBEAT_SECONDS = 5.0
AGENT_USER = "campus-test:node-agent"
AGENT_ROLE: Object = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": AGENT_USER},
    "rules": [
        {
            "apiGroups": [""],
            "resources": ["pods", "nodes", "services", "persistentvolumeclaims"],
            "verbs": ["list", "watch"],
        }
    ],
}
AGENT_BINDING: Object = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRoleBinding",
    "metadata": {"name": AGENT_USER},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": AGENT_USER},
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": AGENT_USER}],
}


@dataclass
class NodeHost:
    """One registered node: its identity, its address and its kubelet endpoint."""

    name: str
    address: str
    client: KubeClient
    server: HTTPServer
    port: int


class NodeKubelet(Kubelet):
    """The emulator's kubelet acting for real nodes: each node's writes under its own identity."""

    def __init__(self, agent: NodeAgent, **kwargs: Any) -> None:
        super().__init__(agent.watcher, lambda: agent.nodes.cache, **kwargs)
        self.agent = agent
        self.strict_references = True
        self.probes = True

    def client_for(self, node: str | None) -> KubeClient:
        host = self.agent.hosts.get(node or "")
        return host.client if host is not None else self.client

    async def make_container(self, worker: Any, container: Object, script: Any) -> Any:
        # A real kubelet builds every container's environment, simulated or not: a missing
        # Secret or ConfigMap stops it here (CreateContainerConfigError).
        await self.resolve_env(worker, container)
        return await super().make_container(worker, container, script)

    async def resolve_env(self, worker: Any, container: Object) -> dict[str, str]:
        env = await super().resolve_env(worker, container)
        services = self.agent.services
        kubernetes = services.kubernetes()
        if kubernetes is not None:  # the API server as pods in a network of their own reach it
            env["KUBERNETES_SERVICE_HOST"] = kubernetes[0]
            env["KUBERNETES_SERVICE_PORT"] = str(kubernetes[1])
        if worker.pod["spec"].get("enableServiceLinks", True):
            # The Services of the pod's namespace, as the kubelet links them (own values win).
            links = service_links(services.in_namespace(worker.namespace), services.address)
            env = {**links, **env}
        # The DRA driver's CDI edits for the claims the container uses come last (dra.py).
        return {**env, **self.agent.dra.container_environment(worker.pod, container)}

    async def pod_address(self, worker: Any) -> str:
        """A pod run from its images gets a network namespace and address of its own."""
        network = self.agent.network
        runner = self.process_runner
        if (
            network is None
            or worker.pod["spec"].get("hostNetwork")
            or not isinstance(runner, ImageRunner)
            or not runner.matches(worker.pod)
        ):
            return await super().pod_address(worker)
        loop = asyncio.get_running_loop()
        _, address = await loop.run_in_executor(None, network.add_pod, worker.uid)
        return address

    async def volume_files(self, worker: Any) -> dict[str, dict[str, bytes]]:
        """ConfigMap and Secret volumes (the emulator's kubelet), and the projected and
        downwardAPI volumes a real kubelet fills: the service account token (a TokenRequest
        bound to the pod, as the node), ``kube-root-ca.crt``, the pod's own fields."""
        files = await super().volume_files(worker)
        # Then the pod's DRA claims are prepared, as the kubelet does before the sandbox.
        await self.agent.dra.prepare(worker.pod, worker.node, self.client_for(worker.node))
        for volume in worker.pod["spec"].get("volumes") or []:
            if "projected" in volume:
                made: dict[str, bytes] = {}
                for source in volume["projected"].get("sources") or []:
                    made.update(await self._projected(worker, source))
                files[volume["name"]] = made
            elif "downwardAPI" in volume:
                files[volume["name"]] = _downward_files(
                    worker.pod, volume["downwardAPI"].get("items") or []
                )
        return files

    async def _projected(self, worker: Any, source: Object) -> dict[str, bytes]:
        client = self.client_for(worker.node)
        if "serviceAccountToken" in source:
            request = source["serviceAccountToken"]
            account = worker.pod["spec"].get("serviceAccountName") or "default"
            answer = await client.create(
                f"/api/v1/namespaces/{worker.namespace}/serviceaccounts/{account}/token",
                {
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenRequest",
                    "spec": {
                        "audiences": [request["audience"]] if request.get("audience") else None,
                        "expirationSeconds": request.get("expirationSeconds", 3607),
                        "boundObjectRef": {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": worker.name,
                            "uid": worker.uid,
                        },
                    },
                },
            )
            return {request.get("path", "token"): answer["status"]["token"].encode()}
        for kind, key in (("configmaps", "configMap"), ("secrets", "secret")):
            if key in source:
                ref = source[key]
                try:
                    obj = await client.get(
                        f"/api/v1/namespaces/{worker.namespace}/{kind}/{ref['name']}"
                    )
                except ClientError:
                    if ref.get("optional"):
                        return {}
                    raise VolumeMountError(
                        f'MountVolume.SetUp failed: {kind[:-1]} "{ref["name"]}" not found'
                    ) from None
                data = obj.get("data") or {}
                decode = (
                    (lambda v: base64.b64decode(v)) if kind == "secrets" else (lambda v: v.encode())
                )
                items = ref.get("items") or [{"key": k, "path": k} for k in data]
                return {
                    item["path"]: decode(data[item["key"]]) for item in items if item["key"] in data
                }
        if "downwardAPI" in source:
            return _downward_files(worker.pod, source["downwardAPI"].get("items") or [])
        return {}

    def on_pod(self, kind: str, pod: Object, old: Object | None) -> None:
        # Only pods bound to a node this agent runs (another agent's nodes are not ours).
        if pod["spec"].get("nodeName") not in self.agent.hosts and kind != "DELETED":
            return
        super().on_pod(kind, pod, old)
        if kind == "DELETED":
            self.agent.dra.unprepare(pod["metadata"]["uid"])
            if self.agent.network is not None:
                self.agent.network.remove_pod(pod["metadata"]["uid"])


def _downward_files(pod: Object, items: list[Object]) -> dict[str, bytes]:
    """A downwardAPI volume's files: the pod's own fields (resource fields are left out)."""
    meta = pod["metadata"]
    fields = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "metadata.labels": "\n".join(
            f'{k}="{v}"' for k, v in sorted((meta.get("labels") or {}).items())
        ),
        "metadata.annotations": "\n".join(
            f'{k}="{v}"' for k, v in sorted((meta.get("annotations") or {}).items())
        ),
    }
    made = {}
    for item in items:
        field = (item.get("fieldRef") or {}).get("fieldPath")
        if field in fields:
            made[item["path"]] = fields[field].encode()
    return made


class KubeletHandler(web.RequestHandler):
    """``/containerLogs/{ns}/{pod}/{container}`` and ``/healthz`` of every node."""

    def initialize(self, agent: NodeAgent) -> None:
        self.agent = agent
        self._disconnected = asyncio.Event()

    def on_connection_close(self) -> None:
        self._disconnected.set()

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        error = kwargs.get("exc_info", (None, None))[1]
        self.finish(str(getattr(error, "message", "") or self._reason))

    async def get(self, namespace: str, name: str, container: str) -> None:
        try:
            worker = self.agent.kubelet.worker(namespace, name)
        except LookupError:
            self.set_status(404)
            self.finish(f'pod "{name}_{namespace}" does not exist')
            return
        args = {key: self.get_query_argument(key, None) for key in self.request.query_arguments}
        number = {k: int(v) for k, v in args.items() if v and k in INTEGER_OPTIONS}
        since_time = args.get("sinceTime")
        query = LogQuery(
            since_seconds=number.get("sinceSeconds"),
            since_time=_parse_time(since_time) if since_time else None,
            tail_lines=number.get("tailLines"),
            timestamps=_truthy(args.get("timestamps")),
            limit_bytes=number.get("limitBytes"),
            follow=_truthy(args.get("follow")),
        )
        try:
            check_log_options(
                name,
                query.since_seconds,
                query.since_time,
                query.tail_lines,
                query.limit_bytes,
            )
            book = container_log(
                self.agent.kubelet.logs,
                {**worker.pod, "status": _worker_status(worker)},
                container,
                _truthy(args.get("previous")),
            )
        except errors.ApiError as error:
            self.set_status(400 if error.code == 400 else 422)
            self.finish(error.message)
            return
        self.set_header("Content-Type", "text/plain")
        await stream_log(book, query, self.write, self.flush, self._disconnected)
        if not self._finished:
            with contextlib.suppress(Exception):
                self.finish()


class KubeletExecHandler(PodExecHandler):
    """``/exec/{ns}/{pod}/{container}?command=...&output=1``, as the API server relays it."""

    def initialize(self, agent: NodeAgent) -> None:  # type: ignore[override]
        super().initialize(api=None, kubelet=agent.kubelet)  # type: ignore[arg-type]
        self.agent = agent

    async def get(self, namespace: str, name: str, container: str) -> None:  # type: ignore[override]
        try:
            worker = self.agent.kubelet.worker(namespace, name)
        except LookupError:
            self.set_status(404)
            self.finish(f'pod "{name}_{namespace}" does not exist')
            return
        flag = lambda key: (self.get_query_argument(key, "") or "") in ("1", "true")  # noqa: E731
        self.exec_request = ExecRequest(
            pod=worker.pod,
            container=container,
            command=self.get_query_arguments("command"),
            stdin=flag("input"),
            stdout=flag("output"),
            stderr=flag("error"),
            tty=flag("tty"),
        )
        offered = [
            p.strip()
            for p in self.request.headers.get("Sec-WebSocket-Protocol", "").split(",")
            if p.strip()
        ]
        try:
            if not any(p in PROTOCOLS for p in offered):
                raise errors.bad_request(
                    f"unable to upgrade connection: none of the offered subprotocols {offered} "
                    f"is supported by this node ({', '.join(PROTOCOLS)})"
                )
            self.target = await self._target()
        except errors.ApiError as error:
            self.set_status(error.code)
            self.finish(error.message)
            return
        await websocket_get(self, namespace, name, container)

    def open(self, namespace: str, name: str, container: str = "") -> None:  # type: ignore[override]
        super().open(namespace, name)


async def websocket_get(handler: PodExecHandler, *args: str) -> None:
    """Upgrade the connection (tornado's WebSocketHandler.get, past our checks)."""
    await super(PodExecHandler, handler).get(*args)


INTEGER_OPTIONS = ("sinceSeconds", "tailLines", "limitBytes")


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


def _parse_time(value: str) -> Any:
    from ..k8s_emulator.logs import log_since_time

    return log_since_time(value)


def _worker_status(worker: Any) -> Object:
    return {
        "containerStatuses": list(worker.statuses.values()),
        "initContainerStatuses": list(worker.init_statuses.values()),
    }


class NodeAgent(NodeControls):
    """Registers nodes, keeps them alive, runs their pods and serves their kubelet API."""

    def __init__(
        self,
        plane: ControlPlane,
        *,
        timings: KubeletTimings | None = None,
        address_block: int = 10,
    ) -> None:
        self.plane = plane
        self.node_root = plane.folder / "node"
        """The node's own files: pods' volumes, and claims' folders (volumes.py)."""
        self.timings = timings or KubeletTimings()
        self.hosts: dict[str, NodeHost] = {}
        self._address_block = address_block
        self._next_address = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._clients: list[KubeClient] = []
        self.dra = GPUKubeletPlugin(plane.folder / "nodes")

    def _on_pod(self, kind: str, pod: Object, old: Object | None) -> None:
        self.kubelet.on_pod(kind, pod, old)
        self.services.on_pod(pod)

    def _client(self, identity: Any = None, agent: str = "campus-test-node-agent") -> KubeClient:
        client = KubeClient(self.plane.url, agent, ssl_context=self.plane.ssl_context(identity))
        self._clients.append(client)
        return client

    async def start(self) -> None:
        self.admin = self._client()
        for path, body in (
            ("/apis/rbac.authorization.k8s.io/v1/clusterroles", AGENT_ROLE),
            ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", AGENT_BINDING),
        ):
            with contextlib.suppress(ClientError):
                await self.admin.create(path, body)
        self.watcher = self._client(self.plane.client_identity("node-agent", AGENT_USER))
        self.nodes = Informer(self.watcher, "/api/v1/nodes", lambda *event: None, kind="Node")
        self.kubelet = NodeKubelet(self, timings=self.timings, api_port=self.plane.api_port)
        self.pods = Informer(self.watcher, "/api/v1/pods", self._on_pod, kind="Pod")
        self.network = PodNetwork(self.plane.index) if pod_network_available() else None
        if self.network is not None:
            self.network.start()
        self.services = ServiceProxy(
            lambda: self.pods.cache,
            self.plane.folder / "hosts",
            api_server=("127.0.0.1", self.plane.api_port),
            network=self.network,
        )
        self.service_informer = Informer(
            self.watcher,
            "/api/v1/services",
            lambda *event: self.services.on_service(*event),
            kind="Service",
        )
        with contextlib.suppress(ClientError):
            await self.admin.create("/apis/storage.k8s.io/v1/storageclasses", storage_class())
        self.provisioner = FolderProvisioner(self.admin, self.node_root)
        claims = Informer(
            self.watcher,
            "/api/v1/persistentvolumeclaims",
            lambda *event: self.provisioner.on_claim(*event),
            kind="PersistentVolumeClaim",
        )
        for name, coroutine in (
            ("nodes", self.nodes.run()),
            ("pods", self.pods.run()),
            ("services", self.service_informer.run()),
            ("claims", claims.run()),
            ("heartbeats", self._heartbeats()),
        ):
            self._tasks.append(asyncio.create_task(coroutine, name=f"node-agent-{name}"))
        await asyncio.wait_for(
            asyncio.gather(
                self.nodes.synced.wait(),
                self.pods.synced.wait(),
                self.service_informer.synced.wait(),
            ),
            30,
        )

    async def stop(self) -> None:
        if kubelet := getattr(self, "kubelet", None):
            await kubelet.stop()
        if services := getattr(self, "services", None):
            await services.stop()
        if network := getattr(self, "network", None):
            network.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for host in list(self.hosts.values()):
            host.server.stop()
        self.hosts.clear()
        for client in self._clients:
            await client.close()

    # -- nodes ---------------------------------------------------------------------------

    def _address(self) -> str:
        self._next_address += 1
        n = self._next_address
        return f"127.{self._address_block}.{n // 250}.{n % 250 + 1}"

    async def add_node(self, node: Object) -> Object:
        """Register ``node`` (see k8s_emulator.nodes) as its kubelet would, and wait until the
        cluster schedules to it (Ready, without the not-ready taint admission adds)."""
        name = node["metadata"]["name"]
        self._nodes_added += 1
        address = self._address()
        serving = self.plane.pki.issue(
            f"kubelet-serving-{name}-{address}",
            common_name=f"system:node:{name}",
            hosts=(address,),
            server=True,
        )
        context = ssl.create_default_context(
            ssl.Purpose.CLIENT_AUTH, cafile=str(self.plane.pki.cert_path)
        )
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_cert_chain(str(serving.cert), str(serving.key))
        app = web.Application(
            [
                (r"/healthz", HealthHandler),
                (r"/containerLogs/([^/]+)/([^/]+)/([^/]+)", KubeletHandler, {"agent": self}),
                (r"/exec/([^/]+)/([^/]+)/([^/]+)", KubeletExecHandler, {"agent": self}),
            ],
            log_function=lambda handler: None,
        )
        sockets = bind_sockets(0, address)
        port = sockets[0].getsockname()[1]
        server = HTTPServer(app, ssl_options=context)
        server.add_sockets(sockets)
        client = self._client(self.plane.node_identity(name), f"kubelet/{KUBELET_VERSION}")
        self.hosts[name] = NodeHost(name, address, client, server, port)
        status = node.pop("status", {})
        try:
            created = await client.create("/api/v1/nodes", node)
            status["addresses"] = [
                {"type": "InternalIP", "address": address},
                {"type": "Hostname", "address": name},
            ]
            status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": port}}
            status.setdefault("nodeInfo", {}).update(
                {"kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": KUBELET_VERSION}
            )
            await client.merge_patch(f"/api/v1/nodes/{name}/status", {"status": status})
            await self._renew_lease(self.hosts[name])
        except BaseException:
            await self.remove_node(name)
            raise
        for _ in range(600):
            seen = self.nodes.cache.get(("", name))
            if seen and not any(
                t.get("key") == "node.kubernetes.io/not-ready"
                for t in seen["spec"].get("taints") or []
            ):
                return seen
            await asyncio.sleep(0.05)
        return created

    async def add_gpu_nodes(
        self, count: int = 1, *, dra: bool = False, **options: Any
    ) -> list[str]:
        """As NodeControls'; with ``dra=True`` the nodes' GPUs are DRA devices that NVIDIA's
        driver publishes (dra.py), and no device plugin advertises ``nvidia.com/gpu``."""
        if dra:
            options.setdefault("extended_resources", {})
        names = await super().add_gpu_nodes(count, **options)
        for name in names if dra else []:
            node = self.nodes.cache.get(("", name)) or await self.admin.get(f"/api/v1/nodes/{name}")
            await self.dra.publish(self.hosts[name].client, self.admin, node)
        return names

    async def remove_node(self, name: str) -> None:
        """Delete the Node (its pods are deleted by the cluster) and stop serving it."""
        host = self.hosts.get(name)
        with contextlib.suppress(ClientError):
            await self.admin.delete(f"/api/v1/nodes/{name}")
        with contextlib.suppress(ClientError):
            await self.admin.delete(
                f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
            )
        if host is not None:
            for worker in [w for w in self.kubelet.workers.values() if w.node == name]:
                if worker.task and not worker.task.done():
                    worker.task.cancel()
            host.server.stop()
            self.hosts.pop(name, None)

    async def _renew_lease(self, host: NodeHost) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{host.name}"
        spec = {
            "holderIdentity": host.name,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": micro(),
        }
        try:
            await host.client.merge_patch(path, {"spec": spec})
        except ClientError as error:
            if error.status != 404:
                raise
            try:
                await host.client.create(
                    "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                    {
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease",
                        "metadata": {"name": host.name, "namespace": "kube-node-lease"},
                        "spec": spec,
                    },
                )
            except ClientError as conflict:
                # The heartbeat made it meanwhile (a node added just before a beat): renew it.
                if conflict.status != 409:
                    raise
                await host.client.merge_patch(path, {"spec": spec})

    async def _heartbeats(self) -> None:
        beats = 0
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            beats += 1
            for host in list(self.hosts.values()):
                try:
                    await self._renew_lease(host)
                    if beats % 6 == 0:
                        await self._post_ready(host)
                except (ClientError, OSError) as error:
                    log.debug("node %s heartbeat: %s", host.name, error)

    async def _post_ready(self, host: NodeHost) -> None:
        moment = rfc3339()
        node = self.nodes.cache.get(("", host.name))
        if node is None:
            return
        conditions = [
            {**c, "lastHeartbeatTime": moment} if c.get("type") == "Ready" else c
            for c in node.get("status", {}).get("conditions") or []
        ]
        await host.client.json_patch(
            f"/api/v1/nodes/{host.name}/status",
            [{"op": "replace", "path": "/status/conditions", "value": conditions}],
        )


class HealthHandler(web.RequestHandler):
    def get(self) -> None:
        self.finish("ok")
