"""Pod networking for the pods the node runs from images: a network namespace each, on a bridge.

What the CNI bridge plugin does on a real node, for one test session (root only):

- a bridge ``cgh<pid>`` holds the session's pod range's gateway (the node's address as pods
  see it); each pod gets a network namespace ``cgh-<pid>-<uid>`` with ``eth0`` (one end of
  a veth pair whose other end is on the bridge), its own address from the pod range, its
  own loopback, and a default route through the gateway: pods bind any port without
  meeting another pod's or this machine's, and reach each other over the bridge; the
  bridge's hardware address is fixed, so the gateway a
  pod learnt stays where it is when other pods' links come and go;
- each Service's ClusterIP is an address of this machine (on ``lo``) where services.py
  serves it, so pods reach Services through the gateway as through kube-proxy.

The ranges are from 198.18.0.0/15 (RFC 2544, set aside for network tests), one /24 per
cluster picked from the process id and the cluster's number in it, so two sessions on a
machine do not meet. What a session leaves behind when it is killed (its bridge,
namespaces and addresses) is removed by the next session's start.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import subprocess
from pathlib import Path

PREFIX = "cgh"


def session_ranges(pid: int, index: int = 0) -> tuple[ipaddress.IPv4Network, ipaddress.IPv4Network]:
    """The pod range and the Service range of cluster ``index`` of process ``pid``."""
    third = (pid * 4 + index) % 256
    return (
        ipaddress.IPv4Network(f"198.18.{third}.0/24"),
        ipaddress.IPv4Network(f"198.19.{third}.0/24"),
    )


def _ip(*arguments: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *arguments], capture_output=True, text=True, check=check)


def available() -> bool:
    """Whether this process may make network namespaces (root, with iproute2)."""
    return os.geteuid() == 0 and bool(
        subprocess.run(["which", "ip"], capture_output=True).returncode == 0
    )


def remove_leftovers() -> None:
    """Bridges, namespaces and Service addresses of sessions whose process has ended."""
    links = _ip("-o", "link", "show", "type", "bridge", check=False).stdout.splitlines()
    for line in links:
        name = line.split(":")[1].strip().split("@")[0]
        pid, _, index = name[len(PREFIX) :].partition("i")
        if name.startswith(PREFIX) and pid.isdigit() and index.isdigit():
            if not Path(f"/proc/{pid}").exists():
                _ip("link", "del", name, check=False)
                _, services = session_ranges(int(pid), int(index))
                _remove_addresses(services)
    for netns in _ip("netns", "list", check=False).stdout.splitlines():
        name = netns.split()[0] if netns.strip() else ""
        parts = name.split("-")
        if len(parts) == 3 and parts[0] == PREFIX:
            pid = parts[1].partition("i")[0]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                _ip("netns", "del", name, check=False)


def _remove_addresses(network: ipaddress.IPv4Network) -> None:
    for line in _ip("-o", "-4", "addr", "show", "dev", "lo", check=False).stdout.splitlines():
        address = line.split()[3].split("/")[0]
        if ipaddress.ip_address(address) in network:
            _ip("addr", "del", f"{address}/32", "dev", "lo", check=False)


class PodNetwork:
    """One session's bridge, pod namespaces and Service addresses."""

    def __init__(self, index: int = 0, pid: int | None = None) -> None:
        self.pid = pid if pid is not None else os.getpid()
        self.index = index
        self.pods, self.services = session_ranges(self.pid, index)
        self.bridge = f"{PREFIX}{self.pid}i{index}"
        hosts = list(self.pods.hosts())
        self.gateway = str(hosts[0])
        self.gateway_mac = "02:00:" + ":".join(f"{octet:02x}" for octet in hosts[0].packed)
        """The bridge's own hardware address, locally administered, from the gateway's."""
        self._free = [str(address) for address in hosts[1:]]
        self._namespaces: dict[str, str] = {}

    def start(self) -> None:
        remove_leftovers()
        _ip("link", "add", self.bridge, "type", "bridge")
        # A fixed address: a bridge otherwise takes the lowest of its ports' addresses, so
        # it changes as pods come and go, and the pods that knew the gateway at the old one
        # send into the void until their ARP entry expires (tens of seconds of lost
        # connections to Services and unanswered requests from this machine).
        _ip("link", "set", self.bridge, "address", self.gateway_mac)
        _ip("addr", "add", f"{self.gateway}/{self.pods.prefixlen}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")

    def namespace(self, uid: str) -> str:
        return f"{PREFIX}-{self.pid}i{self.index}-{uid.replace('-', '')[:8]}"

    def add_pod(self, uid: str) -> tuple[str, str]:
        """A network namespace and an address for pod ``uid``: (namespace, address)."""
        name = self.namespace(uid)
        if uid in self._namespaces:
            return name, self._namespaces[uid]
        address = self._free.pop(0)
        host_end = f"v{uid.replace('-', '')[:12]}"
        _ip("netns", "add", name)
        try:
            _ip("link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", name)
            _ip("link", "set", host_end, "master", self.bridge)
            _ip("link", "set", host_end, "up")
            _ip("-n", name, "addr", "add", f"{address}/{self.pods.prefixlen}", "dev", "eth0")
            _ip("-n", name, "link", "set", "lo", "up")
            _ip("-n", name, "link", "set", "eth0", "up")
            _ip("-n", name, "route", "add", "default", "via", self.gateway)
        except subprocess.CalledProcessError:
            _ip("netns", "del", name, check=False)
            self._free.insert(0, address)
            raise
        self._namespaces[uid] = address
        return name, address

    def has_pod(self, uid: str) -> bool:
        return uid in self._namespaces

    def remove_pod(self, uid: str) -> None:
        address = self._namespaces.pop(uid, None)
        if address is None:
            return
        _ip("netns", "del", self.namespace(uid), check=False)  # its veth pair goes with it
        self._free.append(address)

    def add_service(self, cluster_ip: str) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("addr", "add", f"{cluster_ip}/32", "dev", "lo")

    def remove_service(self, cluster_ip: str) -> None:
        _ip("addr", "del", f"{cluster_ip}/32", "dev", "lo", check=False)

    def stop(self) -> None:
        for uid in list(self._namespaces):
            self.remove_pod(uid)
        _ip("link", "del", self.bridge, check=False)
        _remove_addresses(self.services)
