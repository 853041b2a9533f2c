"""Simulated containers that listen on their declared ports at the pod IP.

A real container's server answers on ``<podIP>:<containerPort>``; a simulated one has no
server, so a client (a hub's health check, upstream KubeSpawner's ``check_up`` run through
``pods/exec``) would be refused. With ``Kubelet.serve_ports`` on, each declared TCP port of
a running simulated container answers HTTP at the pod IP (pod IPs are 127.x.y.z, so they
are reachable on this machine):

- a Jupyter single-user server (the container's environment has
  ``JUPYTERHUB_SERVICE_URL`` or ``JUPYTERHUB_SERVICE_PREFIX``, as every spawner sets)
  answers as jupyterhub-singleuser does to a client with no login: 302 to its prefix for
  paths outside it, and 302 to the hub's OAuth authorize URL under it;
- any other container answers 200 with a line saying it is simulated.

A port another process already holds on that address is skipped (logged): two emulators
on one machine hand out the same pod IPs.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode, urlparse

from tornado import web
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from .containers import ContainerScript, SimulatedContainer
from .logs import ContainerLog

log = logging.getLogger(__name__)

Object = dict[str, Any]


class SimulatedServerHandler(web.RequestHandler):
    SUPPORTED_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

    def initialize(self, container: str, env: dict[str, str]) -> None:
        self.container = container
        self.env = env

    def compute_etag(self) -> None:
        return None

    def _answer(self) -> None:
        prefix = self.env.get("JUPYTERHUB_SERVICE_PREFIX")
        if prefix is None and "JUPYTERHUB_SERVICE_URL" in self.env:
            prefix = urlparse(self.env["JUPYTERHUB_SERVICE_URL"]).path or "/"
        if prefix is None:
            self.set_header("Content-Type", "text/plain")
            self.finish(f"simulated container {self.container}\n")
        elif not self.request.path.startswith(prefix.rstrip("/")):
            self.redirect(prefix)
        else:
            hub_prefix = self.env.get("JUPYTERHUB_BASE_URL", "/").rstrip("/") + "/hub/"
            query = urlencode(
                {
                    "client_id": self.env.get("JUPYTERHUB_CLIENT_ID", ""),
                    "redirect_uri": self.env.get("JUPYTERHUB_OAUTH_CALLBACK_URL", ""),
                    "response_type": "code",
                    "state": "simulated",
                }
            )
            self.redirect(f"{hub_prefix}api/oauth2/authorize?{query}")

    def get(self, *_: str) -> None:
        self._answer()

    head = post = put = patch = delete = options = get


class ServedPorts:
    """One container's declared TCP ports, open at ``address`` while it runs."""

    def __init__(self, address: str, container: Object, env: dict[str, str]) -> None:
        self.address = address
        self.ports = sorted(
            {
                int(port["containerPort"])
                for port in container.get("ports") or []
                if port.get("protocol", "TCP") == "TCP" and port.get("containerPort")
            }
        )
        self.app = web.Application(
            [(r"/(.*)", SimulatedServerHandler, {"container": container["name"], "env": env})],
            log_function=lambda handler: None,
        )
        self.servers: list[HTTPServer] = []

    def open(self) -> None:
        for port in self.ports:
            try:
                sockets = bind_sockets(port, self.address)
            except OSError as error:
                log.warning(
                    "simulated container port %s:%s not served: %s", self.address, port, error
                )
                continue
            server = HTTPServer(self.app)
            server.add_sockets(sockets)
            self.servers.append(server)

    def close(self) -> None:
        for server in self.servers:
            server.stop()
        self.servers.clear()


class ServingContainer(SimulatedContainer):
    """A simulated container whose declared ports answer while it runs."""

    def __init__(
        self, script: ContainerScript | None, log: ContainerLog, ports: ServedPorts
    ) -> None:
        super().__init__(script, log)
        self.served = ports

    async def start(self) -> None:
        self.served.open()
        await super().start()

    def end(self, code: int, reason: str) -> None:
        self.served.close()
        super().end(code, reason)
