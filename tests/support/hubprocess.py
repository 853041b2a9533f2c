"""Run a real JupyterHub (hub, configurable-http-proxy, single-user servers) for a test.

``RunningHub.start(config_text, workdir)`` writes a ``jupyterhub_config.py`` made of harness
defaults followed by the test's own configuration, starts ``jupyterhub -f`` from this
virtualenv and waits until ``/hub/api/`` answers through the proxy. ``BrowserlessUser`` then
acts as a person would: logs in through the login form, opens and submits the spawn page, or
uses the REST API with their own token.

What the harness defaults mean for the test's configuration text:

- ``c.JupyterHub.services`` and ``c.JupyterHub.load_roles`` are already lists (they hold the
  ``test-admin`` service whose token is ``RunningHub.admin_token``). Extend them with
  ``c.JupyterHub.services.append(...)``; assigning a new list removes the admin service and
  the harness can no longer talk to the hub.
- ``c.JupyterHub.cleanup_servers = False``, so single-user servers outlive a hub restart, as
  they do in a deployment that restarts the hub for an upgrade.
- ``c.Spawner.args`` is ``["--allow-root"]`` when the tests run as root (otherwise empty);
  extend it with ``.append`` or ``.extend``.
- Ports, database, cookie secret, proxy pid file and ``SimpleLocalProcessSpawner`` homes all
  live in the work directory, so hubs never share state.

Process handling. JupyterHub starts the proxy and every single-user server in a session of
its own (``start_new_session=True``), so signalling the hub's process group reaches the hub
alone. That is what ``restart()`` relies on: it stops only the hub, the hub stops its proxy
(``cleanup_proxy`` keeps its default, True) and leaves servers running; the restarted hub
starts a new proxy on the same ports and re-adds the routes of the servers it finds alive.
For the final ``stop()`` the harness therefore keeps its own record of every process
descended from the hub (a watcher thread walks /proc), asks the hub to shut down with
servers and proxy, then terminates whatever of that record is still alive.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

REPO_ROOT = Path(__file__).resolve().parents[2]
# The virtualenv running the tests provides jupyterhub and jupyterhub-singleuser.
VENV_BIN = Path(sys.executable).parent
CHP_COMMAND = REPO_ROOT / "node_modules" / ".bin" / "configurable-http-proxy"

ADMIN_SERVICE = "test-admin"
ADMIN_SCOPES = [
    "admin-ui",
    "admin:users",
    "admin:servers",
    "admin:groups",
    "admin:auth_state",
    "tokens",
    "list:users",
    "read:users",
    "servers",
    "access:servers",
    "read:servers",
    "read:hub",
    "read:roles",
    "list:services",
    "read:services",
    "proxy",
    "shutdown",
]

HUB_READY_TIMEOUT = 60.0  # from launch until /hub/api/ answers through the proxy
POLL_INTERVAL = 0.1
SERVER_READY_TIMEOUT = 150.0  # above c.Spawner.start_timeout, so the hub gives up first
HUB_STOP_TIMEOUT = 20.0
PROCESS_TERM_TIMEOUT = 5.0


class HubError(AssertionError):
    """The hub or a server did not do what the test needed; the message has the log tail."""


def free_loopback_ports(count: int) -> list[int]:
    """Return ``count`` distinct TCP ports that were free on 127.0.0.1 a moment ago."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


# ---------------------------------------------------------------------------------------
# Process bookkeeping


def _read_stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            content = stat.read()
    except OSError:
        return None
    # The command name may contain spaces and parentheses: split after the last ')'.
    fields = content[content.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # a zombie has exited already
        return None
    return int(fields[1]), int(fields[19])


def _process_table() -> dict[int, tuple[int, int]]:
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _read_stat(int(entry))
            if stat is not None:
                table[int(entry)] = stat
    return table


class ProcessRecord:
    """Every process descended from the hubs of one ``RunningHub``, also after re-parenting.

    A process is identified by (pid, start time) so a recycled pid is never signalled.
    """

    def __init__(self) -> None:
        self._known: dict[int, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add_root(self, pid: int) -> None:
        """Record ``pid`` (a hub just launched); its descendants are found from now on."""
        stat = _read_stat(pid)
        if stat is not None:
            with self._lock:
                self._known[pid] = stat[1]
        self.refresh()

    def refresh(self) -> None:
        """Record the current descendants of every live process already known."""
        table = _process_table()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _start) in table.items():
            children.setdefault(ppid, []).append(pid)
        with self._lock:
            stack = [
                pid for pid, start in self._known.items() if table.get(pid, (0, -1))[1] == start
            ]
            while stack:
                pid = stack.pop()
                if pid not in self._known:
                    self._known[pid] = table[pid][1]
                stack.extend(child for child in children.get(pid, []) if child not in self._known)

    def alive(self) -> list[int]:
        with self._lock:
            known = dict(self._known)
        alive = []
        for pid, start in known.items():
            stat = _read_stat(pid)
            if stat is not None and stat[1] == start:
                alive.append(pid)
        return alive

    def watch(self, interval: float = 0.5) -> None:
        """Refresh in a background thread, so processes are known before the hub exits."""
        if self._thread is not None:
            return

        def loop() -> None:
            while not self._stop.wait(interval):
                self.refresh()

        self._thread = threading.Thread(target=loop, name="hub-process-record", daemon=True)
        self._thread.start()

    def unwatch(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def terminate_all(self, timeout: float = PROCESS_TERM_TIMEOUT) -> None:
        """SIGTERM every known live process (its whole group when it leads one), then SIGKILL."""
        self.refresh()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = self.alive()
            if not pids:
                return
            for pid in pids:
                _signal_process_or_group(pid, sig)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.alive():
                time.sleep(POLL_INTERVAL)


def _signal_process_or_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            # A session leader we recorded (proxy, single-user server, kernel): its group
            # holds only processes it started.
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


# ---------------------------------------------------------------------------------------
# The hub


class RunningHub:
    """A real JupyterHub started by the harness; see the module docstring for its defaults."""

    def __init__(self, workdir: Path, config_text: str, extra_env: Mapping[str, str] | None):
        self.workdir = workdir
        self.port, self.hub_port, self.proxy_api_port = free_loopback_ports(3)
        self.admin_token = secrets.token_hex(32)
        self.config_path = workdir / "jupyterhub_config.py"
        self.log_path = workdir / "jupyterhub.log"
        self.config_path.write_text(
            self._prelude() + "\n# --- test configuration ---\n" + config_text
        )
        self._env = self._environment(extra_env or {})
        self._process: subprocess.Popen[bytes] | None = None
        self._record = ProcessRecord()

    @classmethod
    def start(
        cls, config_text: str, workdir: Path, extra_env: Mapping[str, str] | None = None
    ) -> RunningHub:
        """Write the configuration into ``workdir`` (created if needed), launch, wait ready."""
        hub = cls.prepare(config_text, workdir, extra_env)
        hub.launch()
        return hub

    @classmethod
    def prepare(
        cls, config_text: str, workdir: Path, extra_env: Mapping[str, str] | None = None
    ) -> RunningHub:
        """Pick the ports and write the configuration, without launching: for a test that
        must tell another process the hub's address first (an identity provider's
        redirect URI). ``launch()`` then."""
        workdir.mkdir(parents=True, exist_ok=True)
        return cls(workdir, config_text, extra_env)

    def launch(self) -> None:
        """Start the hub prepared by ``prepare`` and wait until it is ready."""
        try:
            self._launch()
        except BaseException:
            self.stop()
            raise

    # -- addresses -------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The public URL, served by configurable-http-proxy."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.url}/hub/api"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    # -- REST API as the test-admin service -------------------------------------------

    def api(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        """Call ``/hub/api<path>`` with the admin token, e.g. ``hub.api("GET", "/users")``."""
        headers = {"Authorization": f"token {self.admin_token}", **kwargs.pop("headers", {})}
        kwargs.setdefault("timeout", 30)
        return requests.request(method, self.api_url + path, headers=headers, **kwargs)

    # -- lifecycle ---------------------------------------------------------------------

    def restart(self) -> None:
        """Stop the hub process only (servers keep running), then start it again and wait.

        The same configuration, database, cookie secret and ports are used, so cookies and
        tokens issued before the restart stay valid.
        """
        self._stop_hub_process(signal.SIGTERM)
        self._launch()

    def kill_hard(self) -> None:
        """Kill the hub process alone with SIGKILL, as a crash or the OOM killer would: no
        cleanup runs. Its servers, proxy and services are left to themselves (``stop()``
        still ends every one of them); ``launch()`` starts the hub again."""
        process = self._process
        if process is None or process.poll() is not None:
            raise HubError("kill_hard() needs a running hub; launch() it first.")
        self._record.refresh()
        process.kill()
        process.wait()
        self._close_process()

    def stop(self) -> None:
        """Shut down the hub and everything it started: servers, proxy, managed services."""
        process = self._process
        if process is not None and process.poll() is None:
            self._record.refresh()
            try:
                self.api("POST", "/shutdown", json={"servers": True, "proxy": True}, timeout=10)
            except requests.RequestException:
                pass
            try:
                process.wait(HUB_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._stop_hub_process(signal.SIGTERM, group=True)
        self._record.unwatch()
        self._record.terminate_all()
        self._close_process()

    def __enter__(self) -> RunningHub:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- internals ---------------------------------------------------------------------

    def _prelude(self) -> str:
        work = self.workdir
        lines = [
            "# Written by tests/integration/hubprocess.py: harness defaults, then the test's.",
            "c = get_config()  # noqa: F821",
            "c.JupyterHub.ip = '127.0.0.1'",
            f"c.JupyterHub.port = {self.port}",
            "c.JupyterHub.hub_ip = '127.0.0.1'",
            f"c.JupyterHub.hub_port = {self.hub_port}",
            f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{self.proxy_api_port}'",
            f"c.ConfigurableHTTPProxy.command = [{str(CHP_COMMAND)!r}]",
            f"c.ConfigurableHTTPProxy.pid_file = {str(work / 'jupyterhub-proxy.pid')!r}",
            f"c.JupyterHub.db_url = {'sqlite:///' + str(work / 'jupyterhub.sqlite')!r}",
            f"c.JupyterHub.cookie_secret_file = {str(work / 'jupyterhub_cookie_secret')!r}",
            "c.JupyterHub.cleanup_servers = False",
            f"c.JupyterHub.services = [{{'name': {ADMIN_SERVICE!r}, "
            f"'api_token': {self.admin_token!r}}}]",
            f"c.JupyterHub.load_roles = [{{'name': {ADMIN_SERVICE!r}, "
            f"'scopes': {ADMIN_SCOPES!r}, 'services': [{ADMIN_SERVICE!r}]}}]",
            f"c.Spawner.args = {['--allow-root'] if os.geteuid() == 0 else []!r}",
            "c.Spawner.http_timeout = 60",
            "c.Spawner.start_timeout = 120",
            "c.LocalProcessSpawner.interrupt_timeout = 1",
            "c.LocalProcessSpawner.term_timeout = 1",
            "c.LocalProcessSpawner.kill_timeout = 2",
            "c.SimpleLocalProcessSpawner.home_dir_template = "
            f"{str(work / 'home' / '{username}')!r}",
        ]
        return "\n".join(lines) + "\n"

    @staticmethod
    def _environment(extra_env: Mapping[str, str]) -> dict[str, str]:
        # A test run inside a single-user server must not hand its own hub's settings on.
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("JUPYTERHUB_") and key != "CONFIGPROXY_AUTH_TOKEN"
        }
        # Servers are found as `jupyterhub-singleuser` on PATH, which the spawner passes on.
        env["PATH"] = os.pathsep.join([str(VENV_BIN), str(CHP_COMMAND.parent), env.get("PATH", "")])
        env.update(extra_env)
        return env

    def _launch(self) -> None:
        if not CHP_COMMAND.exists():
            raise HubError(f"{CHP_COMMAND} is missing: run `make setup` (npm ci) first.")
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                [str(VENV_BIN / "jupyterhub"), "-f", str(self.config_path)],
                cwd=self.workdir,
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._record.add_root(self._process.pid)
        self._record.watch()
        self._wait_ready()

    def _wait_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + HUB_READY_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise HubError(
                    f"JupyterHub exited with code {self._process.returncode} before it was "
                    f"ready. Log tail ({self.log_path}):\n{self.log_tail()}"
                )
            try:
                if requests.get(self.api_url + "/", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(POLL_INTERVAL)
        raise HubError(
            f"JupyterHub did not answer {self.api_url}/ within "
            f"{HUB_READY_TIMEOUT:.0f} s. Log tail ({self.log_path}):\n{self.log_tail()}"
        )

    def _stop_hub_process(self, sig: signal.Signals, group: bool = False) -> None:
        """Signal the hub (or its own process group), wait, then SIGKILL it if needed."""
        process = self._process
        if process is None or process.poll() is not None:
            self._close_process()
            return
        self._record.refresh()
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(process.pid, sig)
            else:
                process.send_signal(sig)
        try:
            process.wait(HUB_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        self._close_process()

    def _close_process(self) -> None:
        if self._process is not None and self._process.poll() is not None:
            self._process = None


# ---------------------------------------------------------------------------------------
# A person in front of a browser, without the browser


_XSRF_INPUT = re.compile(r'name="_xsrf"\s+value="([^"]+)"')


class BrowserlessUser:
    """One person using the hub: the login form and spawn page by cookie, the API by token."""

    def __init__(self, hub: RunningHub, name: str, password: str = "any-password"):
        self.hub = hub
        self.name = name
        self.password = password
        self.session = requests.Session()
        self._token: str | None = None

    # -- the pages -----------------------------------------------------------------------

    def login(self, next_url: str = "/hub/home") -> requests.Response:
        """Submit the real login form and follow the hub's redirects to ``next_url``.

        The default lands on the home page: without ``next`` the hub would send a user with
        no running server on to /hub/spawn, which starts a server when there is no form.
        """
        login_url = f"{self.hub.url}/hub/login?next={quote(next_url)}"
        page = self.session.get(login_url, timeout=30)
        page.raise_for_status()
        response = self.session.post(
            login_url,
            data={"username": self.name, "password": self.password, "_xsrf": self.xsrf(page)},
            timeout=60,
        )
        logged_in = any(c.name == "jupyterhub-hub-login" for c in self.session.cookies)
        if response.status_code >= 400 or not logged_in:
            raise HubError(
                f"Login as {self.name!r} failed ({response.status_code} at {response.url}). "
                f"Log tail:\n{self.hub.log_tail()}"
            )
        return response

    def xsrf(self, page: requests.Response | None = None) -> str:
        """The ``_xsrf`` value for a form: from the page if given, else the hub's cookie."""
        if page is not None:
            match = _XSRF_INPUT.search(page.text)
            if match:
                return match.group(1)
        for cookie in self.session.cookies:
            if cookie.name == "_xsrf" and (cookie.path or "/").startswith("/hub"):
                return cookie.value or ""
        raise HubError("No _xsrf cookie from the hub: open a hub page (login) first.")

    def spawn_url(self, server_name: str = "") -> str:
        suffix = f"/{server_name}" if server_name else ""
        return f"{self.hub.url}/hub/spawn/{self.name}{suffix}"

    def get_spawn_page(self, server_name: str = "") -> requests.Response:
        """GET the spawn page (HTML with the options form, or a redirect when there is none)."""
        return self.session.get(self.spawn_url(server_name), timeout=60)

    def post_spawn_form(
        self, fields: Mapping[str, str | list[str]], server_name: str = ""
    ) -> requests.Response:
        """Submit the spawn form with ``fields`` and follow redirects (to spawn-pending)."""
        data = {"_xsrf": self.xsrf(), **fields}
        return self.session.post(self.spawn_url(server_name), data=data, timeout=60)

    # -- the REST API with the user's own token -------------------------------------------

    @property
    def token(self) -> str:
        """A token owned by this user (the user is created in the hub if needed)."""
        if self._token is None:
            if self.hub.api("GET", f"/users/{self.name}").status_code == 404:
                self.hub.api("POST", f"/users/{self.name}").raise_for_status()
            response = self.hub.api(
                "POST", f"/users/{self.name}/tokens", json={"note": "integration test"}
            )
            response.raise_for_status()
            self._token = response.json()["token"]
        return self._token

    def api(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        """Call ``/hub/api<path>`` as this user."""
        headers = {"Authorization": f"token {self.token}", **kwargs.pop("headers", {})}
        kwargs.setdefault("timeout", 30)
        return requests.request(method, self.hub.api_url + path, headers=headers, **kwargs)

    def server_api_path(self, server_name: str = "") -> str:
        suffix = f"servers/{server_name}" if server_name else "server"
        return f"/users/{self.name}/{suffix}"

    def server_url(self, server_name: str = "") -> str:
        """The public URL of the user's server, e.g. ``http://127.0.0.1:P/user/alice/``."""
        suffix = f"{server_name}/" if server_name else ""
        return f"{self.hub.url}/user/{self.name}/{suffix}"

    def get_from_server(self, path: str, server_name: str = "", **kwargs: Any) -> requests.Response:
        """GET ``path`` (e.g. ``api/status``) from the user's server through the proxy."""
        headers = {"Authorization": f"token {self.token}", **kwargs.pop("headers", {})}
        kwargs.setdefault("timeout", 30)
        return requests.get(self.server_url(server_name) + path, headers=headers, **kwargs)

    def spawn_via_api(
        self, options: Mapping[str, Any] | None = None, server_name: str = ""
    ) -> requests.Response:
        """POST user options to start a server; 201 started, 202 pending, 4xx refused."""
        return self.api("POST", self.server_api_path(server_name), json=dict(options or {}))

    def model(self) -> dict[str, Any]:
        response = self.api("GET", f"/users/{self.name}")
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def wait_ready(self, server_name: str = "", timeout: float = SERVER_READY_TIMEOUT) -> dict:
        """Wait until the hub reports the server ready; return its server model.

        Fails early, with the hub log, when the spawn failed (the server left the user
        model without becoming ready).
        """
        deadline = time.monotonic() + timeout
        server: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            server = self.model().get("servers", {}).get(server_name)
            if server is None:
                raise HubError(
                    f"{self.name}'s server {server_name!r} is not running or pending: the "
                    f"spawn failed or never started. Log tail:\n{self.hub.log_tail()}"
                )
            if server.get("ready"):
                return server
            time.sleep(0.25)
        raise HubError(
            f"{self.name}'s server {server_name!r} was not ready after {timeout:.0f} s "
            f"(last model: {server}). Log tail:\n{self.hub.log_tail()}"
        )

    def stop_server(self, server_name: str = "", timeout: float = 60) -> None:
        """Stop the server and wait until the hub no longer lists it."""
        response = self.api("DELETE", self.server_api_path(server_name))
        if response.status_code not in (202, 204):
            raise HubError(
                f"Stopping {self.name}'s server {server_name!r} answered "
                f"{response.status_code}: {response.text}"
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if server_name not in self.model().get("servers", {}):
                return
            time.sleep(0.25)
        raise HubError(
            f"{self.name}'s server {server_name!r} was still listed {timeout:.0f} s after "
            f"stopping. Log tail:\n{self.hub.log_tail()}"
        )


def copy_log(hub: RunningHub, destination: Path) -> Path:
    """Keep a hub's log (e.g. under test-artifacts/) after its work directory is gone."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(hub.log_path, destination)
    return destination


# ---------------------------------------------------------------------------------------
# A demo as a person starts it: `make demo` or `make demo-workstation`


DEMO_PORT_VARIABLES = (
    "GPUSPAWNER_DEMO_PORT",
    "GPUSPAWNER_DEMO_HUB_PORT",
    "GPUSPAWNER_DEMO_PROXY_API_PORT",
    "GPUSPAWNER_DEMO_SESSIONS_PORT",
    "GPUSPAWNER_DEMO_JOBS_PORT",
)


class DemoHub:
    """One demo hub started as its README says, ``make <target>`` from the checkout, with a
    runtime folder and ports of its own in the environment (``GPUSPAWNER_DEMO_RUNTIME``,
    ``GPUSPAWNER_DEMO_PORT``, ...), in a process group of its own like a terminal's.

    ``make_options`` are added to the command line (``-o setup``: use the checkout's set-up
    as it is). It talks to the hub as a person would: ``admin`` (an admin of every demo)
    logs in through the login form and makes the token ``api()`` uses, so
    :class:`BrowserlessUser` works with it as with a :class:`RunningHub`.
    """

    def __init__(
        self,
        target: str,
        runtime: Path,
        *,
        make_options: tuple[str, ...] = (),
        extra_env: Mapping[str, str] | None = None,
    ):
        self.target = target
        self.runtime = runtime
        self.make_options = make_options
        self.ports = dict(zip(DEMO_PORT_VARIABLES, free_loopback_ports(5), strict=True))
        self.port = self.ports["GPUSPAWNER_DEMO_PORT"]
        self.log_path = runtime.parent / f"{runtime.name}.log"
        self._env = RunningHub._environment(
            {
                "GPUSPAWNER_DEMO_RUNTIME": str(runtime),
                **{name: str(port) for name, port in self.ports.items()},
                **(extra_env or {}),
            }
        )
        self._process: subprocess.Popen[bytes] | None = None
        self._record = ProcessRecord()
        self.admin_token = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.url}/hub/api"

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def api(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        """Call ``/hub/api<path>`` as the demo's ``admin``."""
        headers = {"Authorization": f"token {self.admin_token}", **kwargs.pop("headers", {})}
        kwargs.setdefault("timeout", 30)
        return requests.request(method, self.api_url + path, headers=headers, **kwargs)

    # -- lifecycle ---------------------------------------------------------------------

    def launch(self) -> None:
        """``make <target>``, without waiting (``wait_ready()`` then)."""
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                ["make", "--no-print-directory", *self.make_options, self.target],
                cwd=REPO_ROOT,
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._record.add_root(self._process.pid)
        self._record.watch()

    def wait_ready(self, timeout: float = HUB_READY_TIMEOUT) -> None:
        """Wait until the hub answers through its proxy, then sign ``admin`` in."""
        process = self._process
        assert process is not None, "launch() first"
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise HubError(
                    f"make {self.target} exited with code {process.returncode} before the hub "
                    f"was ready. Log tail ({self.log_path}):\n{self.log_tail()}"
                )
            with contextlib.suppress(requests.RequestException):
                if requests.get(self.api_url + "/", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise HubError(
                    f"make {self.target} did not answer {self.api_url}/ within {timeout:.0f} s. "
                    f"Log tail ({self.log_path}):\n{self.log_tail()}"
                )
            time.sleep(POLL_INTERVAL)
        admin = BrowserlessUser(self, "admin")  # type: ignore[arg-type]
        admin.login()
        made = admin.session.post(
            f"{self.api_url}/users/admin/tokens",
            json={"note": "side-by-side test"},
            headers={"X-XSRFToken": admin.xsrf()},
            timeout=30,
        )
        made.raise_for_status()
        self.admin_token = made.json()["token"]

    def stop(self) -> None:
        """Stop the demo as Ctrl-C in its terminal would (SIGTERM to its process group: make
        and the hub, which stops its servers, proxy and services), and wait for it."""
        process = self._process
        if process is None:
            return
        self._record.refresh()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(HUB_STOP_TIMEOUT * 3)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        self._process = None

    def restart(self) -> None:
        """Stop the demo and start it again, with the same runtime folder and ports."""
        self.stop()
        self.launch()
        self.wait_ready()

    def close(self) -> None:
        """Stop the demo, then end whatever it started that still runs (jobs run on after
        their service ends, by design)."""
        self.stop()
        self._record.unwatch()
        self._record.terminate_all()
