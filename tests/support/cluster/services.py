"""Services on the node's loopback: what kube-proxy and the cluster's DNS give a pod.

There is no kube-proxy and no cluster DNS in the test cluster. The node agent stands in for
both, for the pods it runs with their images' commands (images.py):

- each Service with a selector is served at its ClusterIP, made an address of this machine
  (pod_network.py; without root, at ``127.B.C.D`` for ``A.B.C.D``: all of 127/8 is this
  machine's loopback) on its ports, each connection forwarded to a ready pod the selector
  picks, at the target port (a number or a container port's name); the ``kubernetes``
  Service leads to the API server;
- a hosts file per namespace names each Service as cluster DNS would (``name``,
  ``name.ns``, ``name.ns.svc``, ``name.ns.svc.cluster.local``), and, as CoreDNS does for a
  headless Service, each pod it selects whose ``subdomain`` is the Service, by its
  hostname (``host.name``, ``host.name.ns``...: an Indexed Job's pods), from the moment
  the pod has an address when the Service publishes not-ready addresses, else once it is
  ready; rewritten in place as Services and pods come and go; containers see it as their
  ``/etc/hosts``;
- :func:`service_links` are the ``{NAME}_SERVICE_HOST``/``_PORT`` variables the kubelet
  gives a pod for the Services that exist when it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import itertools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..k8s_emulator.selectors import label_selector_from_dict, labels_match
from .pod_network import PodNetwork

log = logging.getLogger(__name__)

Object = dict[str, Any]
CLUSTER_DOMAIN = "cluster.local"


def loopback_address(cluster_ip: str) -> str | None:
    """Where a node without root serves a ClusterIP: ``198.19.3.7`` -> ``127.19.3.7``."""
    try:
        address = ipaddress.ip_address(cluster_ip)
    except ValueError:
        return None
    if address.version != 4:
        return None
    _, second, third, fourth = str(address).split(".")
    return f"127.{second}.{third}.{fourth}"


def _link_name(service: str) -> str:
    return service.upper().replace("-", "_")


def service_links(
    services: list[Object], address_of: Callable[[str], str | None]
) -> dict[str, str]:
    """The Docker-link style variables the kubelet sets for ``services`` (one namespace)."""
    env: dict[str, str] = {}
    for service in services:
        address = address_of((service.get("spec") or {}).get("clusterIP") or "")
        ports = (service.get("spec") or {}).get("ports") or []
        if address is None or not ports:
            continue
        name = _link_name(service["metadata"]["name"])
        first = ports[0]
        env[f"{name}_SERVICE_HOST"] = address
        env[f"{name}_SERVICE_PORT"] = str(first["port"])
        env[f"{name}_PORT"] = f"{first.get('protocol', 'TCP').lower()}://{address}:{first['port']}"
        for port in ports:
            protocol = port.get("protocol", "TCP")
            if port.get("name"):
                env[f"{name}_SERVICE_PORT_{_link_name(port['name'])}"] = str(port["port"])
            prefix = f"{name}_PORT_{port['port']}_{protocol}"
            env[prefix] = f"{protocol.lower()}://{address}:{port['port']}"
            env[f"{prefix}_PROTO"] = protocol.lower()
            env[f"{prefix}_PORT"] = str(port["port"])
            env[f"{prefix}_ADDR"] = address
    return env


def _dns_names(name: str, namespace: str) -> list[str]:
    return [
        name,
        f"{name}.{namespace}",
        f"{name}.{namespace}.svc",
        f"{name}.{namespace}.svc.{CLUSTER_DOMAIN}",
    ]


def hosts_text(
    namespace: str,
    services: list[Object],
    address_of: Callable[[str], str | None],
    pods: list[Object] = (),  # type: ignore[assignment]
) -> str:
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    for service in sorted(services, key=lambda s: s["metadata"]["name"]):
        spec = service.get("spec") or {}
        name = service["metadata"]["name"]
        if spec.get("clusterIP") == "None":
            lines += _headless_records(name, namespace, spec, pods)
            continue
        address = address_of(spec.get("clusterIP") or "")
        if address is None:
            continue
        lines.append(f"{address}\t{' '.join(_dns_names(name, namespace))}")
    return "\n".join(lines) + "\n"


def _headless_records(name: str, namespace: str, spec: Object, pods: list[Object]) -> list[str]:
    """CoreDNS's records of a headless Service's pods named by ``hostname`` + ``subdomain``."""
    selector = label_selector_from_dict({"matchLabels": spec.get("selector") or {}})
    records = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        meta, pod_spec = pod.get("metadata") or {}, pod.get("spec") or {}
        address = (pod.get("status") or {}).get("podIP")
        if not spec.get("selector") or pod_spec.get("subdomain") != name or not address:
            continue
        if not pod_spec.get("hostname") or meta.get("deletionTimestamp"):
            continue
        if not labels_match(selector, meta.get("labels")):
            continue
        if not (spec.get("publishNotReadyAddresses") or _ready(pod)):
            continue
        records.append(
            f"{address}\t{' '.join(_dns_names(pod_spec['hostname'] + '.' + name, namespace))}"
        )
    return records


def _target_port(pod: Object, port: Object) -> int | None:
    target = port.get("targetPort", port["port"])
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for declared in container.get("ports") or []:
            if declared.get("name") == target:
                return int(declared["containerPort"])
    return None


def _ready(pod: Object) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or not status.get("podIP"):
        return False
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


class ServiceProxy:
    """Serves every Service of the cluster on loopback, and keeps the hosts files."""

    def __init__(
        self,
        pods: Callable[[], dict[tuple[str, str], Object]],
        folder: Path,
        *,
        api_server: tuple[str, int],
        network: PodNetwork | None = None,
    ) -> None:
        self._pods = pods
        self.folder = folder
        self.api_server = api_server
        self.network = network
        folder.mkdir(parents=True, exist_ok=True)
        self.services: dict[tuple[str, str], Object] = {}
        self._servers: dict[tuple[str, str], list[asyncio.Server]] = {}
        self._turn = itertools.count()
        self._addresses: dict[tuple[str, str], str] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def address(self, cluster_ip: str) -> str | None:
        """Where this machine serves ``cluster_ip``: itself with the pod network, else on
        loopback."""
        if self.network is not None:
            try:
                ipaddress.ip_address(cluster_ip)
            except ValueError:
                return None
            return cluster_ip
        return loopback_address(cluster_ip)

    def kubernetes(self) -> tuple[str, int] | None:
        """Where pods reach the API server: the ``kubernetes`` Service's address and port."""
        service = self.services.get(("default", "kubernetes"))
        if service is None or self.network is None:
            return None
        return service["spec"]["clusterIP"], int(service["spec"]["ports"][0]["port"])

    def hosts_file(self, namespace: str) -> Path:
        """The namespace's hosts file (made if missing): a pod's ``/etc/hosts``."""
        path = self.folder / f"{namespace}.hosts"
        if not path.exists():
            self._write_hosts(namespace)
        return path

    def in_namespace(self, namespace: str) -> list[Object]:
        return [s for (ns, _), s in self.services.items() if ns == namespace]

    def on_service(self, kind: str, service: Object, old: Object | None) -> None:
        key = (service["metadata"].get("namespace", ""), service["metadata"]["name"])
        if kind == "DELETED":
            self.services.pop(key, None)
        else:
            self.services[key] = service
        task = asyncio.ensure_future(self._serve(key))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._write_hosts(key[0])

    def on_pod(self, pod: Object) -> None:
        """A pod changed: its namespace's names change with it when a Service names it."""
        if (pod.get("spec") or {}).get("subdomain"):
            self._write_hosts(pod["metadata"].get("namespace", ""))

    def _write_hosts(self, namespace: str) -> None:
        path = self.folder / f"{namespace}.hosts"
        pods = [pod for (ns, _), pod in self._pods().items() if ns == namespace]
        text = hosts_text(namespace, self.in_namespace(namespace), self.address, pods)
        # Rewritten in place: a container's bind mount of the file sees the new names.
        with open(path, "a+") as hosts:
            hosts.seek(0)
            hosts.truncate()
            hosts.write(text)

    async def _serve(self, key: tuple[str, str]) -> None:
        for server in self._servers.pop(key, []):
            server.close()
            with contextlib.suppress(Exception):
                await server.wait_closed()
        service = self.services.get(key)
        old_ip = self._addresses.pop(key, None)
        if old_ip and self.network is not None:
            self.network.remove_service(old_ip)
        if service is None:
            return
        spec = service.get("spec") or {}
        address = self.address(spec.get("clusterIP") or "")
        if address is None or not (spec.get("selector") or key == ("default", "kubernetes")):
            return
        if self.network is not None:
            self.network.add_service(address)
            self._addresses[key] = address
        servers = []
        for port in spec.get("ports") or []:
            if port.get("protocol", "TCP") != "TCP":
                continue
            try:
                server = await asyncio.start_server(
                    lambda reader, writer, p=port: self._forward(key, p, reader, writer),
                    address,
                    port["port"],
                )
            except OSError as error:
                log.warning("service %s/%s port %s: %s", *key, port["port"], error)
                continue
            servers.append(server)
        self._servers[key] = servers

    def _endpoint(self, key: tuple[str, str], port: Object) -> tuple[str, int] | None:
        service = self.services.get(key)
        if service is None:
            return None
        if key == ("default", "kubernetes"):
            return self.api_server
        selector = service["spec"].get("selector") or {}
        candidates = []
        for pod in self._pods().values():
            meta = pod.get("metadata") or {}
            if meta.get("namespace") != key[0] or not _ready(pod):
                continue
            if not labels_match(
                label_selector_from_dict({"matchLabels": selector}), meta.get("labels")
            ):
                continue
            target = _target_port(pod, port)
            if target is not None:
                candidates.append((pod["status"]["podIP"], target))
        if not candidates:
            return None
        candidates.sort()
        return candidates[next(self._turn) % len(candidates)]

    async def _forward(
        self,
        key: tuple[str, str],
        port: Object,
        client_reader: asyncio.StreamReader,
        client_writer: asyncio.StreamWriter,
    ) -> None:
        endpoint = self._endpoint(key, port)
        if endpoint is None:
            client_writer.close()  # no ready endpoint: refused, as kube-proxy's REJECT
            return
        try:
            reader, writer = await asyncio.open_connection(*endpoint)
        except OSError:
            client_writer.close()
            return

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                with contextlib.suppress(Exception):
                    sink.close()

        await asyncio.gather(pump(client_reader, writer), pump(reader, client_writer))

    async def stop(self) -> None:
        for servers in self._servers.values():
            for server in servers:
                server.close()
        self._servers.clear()
        if self.network is not None:
            for address in self._addresses.values():
                self.network.remove_service(address)
        self._addresses.clear()
        for task in list(self._tasks):
            task.cancel()
