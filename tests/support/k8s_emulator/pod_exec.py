"""``pods/{name}/exec``: a command run "inside" a running container, over WebSocket channels.

The real API server upgrades the request and proxies it to the kubelet, whose container
runtime starts the command in the container's namespaces. Here the command runs as a
local subprocess of the emulator (simulated, said so in the README):

- in a process container (containers.ProcessContainer), with that container's
  environment and in its working directory;
- in a simulated container, with the container's resolved environment (env, envFrom,
  fieldRef, ...) on top of this process's (without KUBECONFIG), in a folder of its own,
  ``<tmp>/k8s-emulator-pods/<namespace>/<pod>/<container>``, as the process runner lays
  them out. The image's files are not there: a command works if this machine has it.

Protocols ``v5.channel.k8s.io`` and ``v4.channel.k8s.io``: binary frames whose first byte
is the channel (0 stdin, 1 stdout, 2 stderr, 3 the final Status as JSON, 4 terminal
resize, ignored; v5 adds 255, "close this stream", for stdin's end). ``tty=true`` merges
stderr into stdout; no pseudo-terminal is allocated. When the client goes away the
command is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tornado import web, websocket

from . import errors
from .containers import ProcessContainer
from .resources import POD

if TYPE_CHECKING:
    from .apiserver import ApiServer
    from .kubelet import Kubelet

log = logging.getLogger(__name__)

Object = dict[str, Any]

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
ROUTE = r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/exec/?"


@dataclass
class ExecRequest:
    """What ``pods/exec`` was asked to run, and where."""

    pod: Object
    container: str
    command: list[str]
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool


def _flag(handler: web.RequestHandler, name: str) -> bool:
    return (handler.get_query_argument(name, "") or "").lower() in ("true", "1")


def parse_exec_request(
    handler: web.RequestHandler, api: ApiServer, namespace: str, name: str
) -> ExecRequest:
    """Check the request as the API server does before it upgrades the connection."""
    pod = api.get(POD, namespace, name)
    request = ExecRequest(
        pod=pod,
        container=handler.get_query_argument("container", "") or "",
        command=handler.get_query_arguments("command"),
        stdin=_flag(handler, "stdin"),
        stdout=_flag(handler, "stdout"),
        stderr=_flag(handler, "stderr"),
        tty=_flag(handler, "tty"),
    )
    if not (request.stdin or request.stdout or request.stderr):
        raise errors.bad_request("you must specify at least 1 of stdin, stdout, stderr")
    if not request.command:
        raise errors.bad_request("you must specify at least one command for the container")
    spec = pod["spec"]
    containers = [c["name"] for c in spec.get("containers") or []]
    init_containers = [c["name"] for c in spec.get("initContainers") or []]
    if not request.container:
        if len(containers) != 1:
            message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
            if init_containers:
                message += f" or one of the init containers: [{' '.join(init_containers)}]"
            raise errors.bad_request(message)
        request.container = containers[0]
    elif request.container not in containers and request.container not in init_containers:
        raise errors.bad_request(f"container {request.container} is not valid for pod {name}")
    if not spec.get("nodeName"):
        raise errors.bad_request(f"pod {name} does not have a host assigned")
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        raise errors.bad_request(
            f"cannot exec into a container in a completed pod; current phase is {phase}"
        )
    return request


def exit_status(code: int, command: list[str]) -> Object:
    """The Status the kubelet writes on the error channel when the command has ended."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: error executing command [{' '.join(command)}], exit code {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def start_failure(command: list[str], error: OSError) -> Object:
    """The Status for a command the runtime could not start (missing executable...)."""
    message = (
        "error executing command in container: failed to exec in container: "
        "OCI runtime exec failed: exec failed: unable to start container process: "
        f'exec: "{command[0]}": {error.strerror or error}: unknown'
    )
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"Internal error occurred: {message}",
        "reason": "InternalError",
        "details": {"causes": [{"message": message}]},
        "code": 500,
    }


class PodExecHandler(websocket.WebSocketHandler):
    """``GET /api/v1/namespaces/{ns}/pods/{name}/exec?command=...`` upgraded to a WebSocket."""

    def initialize(self, api: ApiServer, kubelet: Kubelet) -> None:
        self.api = api
        self.kubelet = kubelet
        self.exec_request: ExecRequest | None = None
        self.process: asyncio.subprocess.Process | None = None
        self.target: tuple[dict[str, str], Path] | None = None
        self.stdin_chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

    def check_origin(self, origin: str) -> bool:
        return True  # clients are not browsers; authentication is not emulated either

    def select_subprotocol(self, subprotocols: list[str]) -> str | None:
        return next((p for p in subprotocols if p in PROTOCOLS), None)

    def _refuse(self, error: errors.ApiError) -> None:
        self.set_status(error.code)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(error.status()))

    async def get(self, namespace: str, name: str) -> None:  # type: ignore[override]
        try:
            self.exec_request = parse_exec_request(self, self.api, namespace, name)
            if self.request.headers.get("Upgrade", "").lower() != "websocket":
                raise errors.bad_request("Upgrade request required")
            offered = [
                p.strip()
                for p in self.request.headers.get("Sec-WebSocket-Protocol", "").split(",")
                if p.strip()
            ]
            if not any(p in PROTOCOLS for p in offered):
                raise errors.bad_request(
                    f"unable to upgrade connection: none of the offered subprotocols {offered} is supported (emulated: {', '.join(PROTOCOLS)})"
                )
            # Fails before the upgrade when the container is not running, as the kubelet does.
            self.target = await self._target()
        except errors.ApiError as error:
            self._refuse(error)
            return
        await super().get(namespace, name)

    async def post(self, namespace: str, name: str) -> None:
        self._refuse(errors.bad_request("Upgrade request required"))

    async def _target(self) -> tuple[dict[str, str], Path]:
        """The environment and working directory the command runs with."""
        assert self.exec_request is not None
        meta = self.exec_request.pod["metadata"]
        container = self.exec_request.container
        try:
            worker = self.kubelet.worker(meta["namespace"], meta["name"])
        except LookupError:
            worker = None
        state = (
            (worker.statuses.get(container) or worker.init_statuses.get(container) or {})
            if worker
            else {}
        )
        instance = worker.containers.get(container) if worker else None
        if worker is None or instance is None or "running" not in state.get("state", {}):
            raise errors.ApiError(
                500,
                "InternalError",
                f'Internal error occurred: unable to upgrade connection: container not found ("{container}")',
            )
        if isinstance(instance, ProcessContainer):
            return dict(instance.env), Path(instance.cwd)
        spec = next(
            c
            for c in (worker.pod["spec"].get("containers") or [])
            + (worker.pod["spec"].get("initContainers") or [])
            if c["name"] == container
        )
        base = dict(os.environ)
        for key in ("KUBECONFIG", "PYTEST_CURRENT_TEST"):
            base.pop(key, None)
        env = {**base, **await self.kubelet.resolve_env(worker, spec)}
        cwd = (
            Path(tempfile.gettempdir())
            / "k8s-emulator-pods"
            / meta["namespace"]
            / meta["name"]
            / container
        )
        cwd.mkdir(parents=True, exist_ok=True)
        return env, cwd

    def open(self, namespace: str, name: str) -> None:  # type: ignore[override]
        self.task = asyncio.create_task(self._run(), name=f"exec-{namespace}/{name}")

    async def _send(self, channel: int, data: bytes) -> None:
        with contextlib.suppress(websocket.WebSocketClosedError):
            await self.write_message(bytes([channel]) + data, binary=True)

    async def _pump(self, stream: asyncio.StreamReader | None, channel: int) -> None:
        if stream is None:
            return
        while chunk := await stream.read(65536):
            await self._send(channel, chunk)

    async def _feed_stdin(self) -> None:
        assert self.process is not None and self.process.stdin is not None
        writer = self.process.stdin
        with contextlib.suppress(ConnectionError, BrokenPipeError):
            while (chunk := await self.stdin_chunks.get()) is not None:
                writer.write(chunk)
                await writer.drain()
        with contextlib.suppress(ConnectionError, BrokenPipeError):
            writer.close()

    async def _run(self) -> None:
        request = self.exec_request
        assert request is not None and self.target is not None
        env, cwd = self.target
        pipe, devnull = asyncio.subprocess.PIPE, asyncio.subprocess.DEVNULL
        try:
            self.process = await asyncio.create_subprocess_exec(
                *request.command,
                cwd=cwd,
                env=env,
                stdin=pipe if request.stdin else devnull,
                stdout=pipe if request.stdout or (request.tty and request.stderr) else devnull,
                stderr=(
                    asyncio.subprocess.STDOUT
                    if request.tty
                    else (pipe if request.stderr else devnull)
                ),
                start_new_session=True,
            )
        except OSError as error:
            await self._send(ERROR, json.dumps(start_failure(request.command, error)).encode())
            self.close(1000)
            return
        feeder = asyncio.create_task(self._feed_stdin()) if request.stdin else None
        try:
            await asyncio.gather(
                self._pump(self.process.stdout, STDOUT), self._pump(self.process.stderr, STDERR)
            )
            returncode = await self.process.wait()
        finally:
            if feeder is not None:
                self.stdin_chunks.put_nowait(None)
                with contextlib.suppress(asyncio.CancelledError):
                    await feeder
        code = returncode if returncode >= 0 else 128 - returncode
        await self._send(ERROR, json.dumps(exit_status(code, request.command)).encode())
        self.close(1000)

    def on_message(self, message: str | bytes) -> None:
        data = message.encode() if isinstance(message, str) else message
        if not data:
            return
        channel, payload = data[0], data[1:]
        if channel == STDIN and payload:
            self.stdin_chunks.put_nowait(payload)
        elif channel == CLOSE and payload[:1] == bytes([STDIN]):
            self.stdin_chunks.put_nowait(None)
        # RESIZE and anything else: a terminal size has no meaning without a terminal.

    def on_close(self) -> None:
        self.stdin_chunks.put_nowait(None)
        process = self.process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
