"""What runs "inside" a container: a scripted simulation, or a real local process.

A simulated container runs until a test control or its script ends it. A process container
executes the container's command and args on this machine with the container's
environment, and its merged stdout/stderr become the container log.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fnmatch
import os
import signal
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .logs import ContainerLog
from .selectors import labels_match, parse_label_selector

Object = dict[str, Any]
Exit = tuple[int, str]  # exit code and reason (Completed, Error, OOMKilled)


@dataclass
class PodMatch:
    """Which pods (and containers) a rule applies to; unset fields match everything."""

    pod_name: str | None = None  # a shell pattern, such as "jupyter-*"
    namespace: str | None = None
    labels: str | None = None  # a label selector, such as "job-name=train"
    container: str | None = None
    image: str | None = None

    def matches(self, pod: Object, container: Object | None = None) -> bool:
        meta = pod["metadata"]
        if self.pod_name and not fnmatch.fnmatchcase(meta["name"], self.pod_name):
            return False
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        if self.labels and not labels_match(parse_label_selector(self.labels), meta.get("labels")):
            return False
        if container is not None:
            if self.container and container.get("name") != self.container:
                return False
            if self.image and container.get("image") != self.image:
                return False
        return True


@dataclass
class ContainerScript:
    """What a simulated container does once started (the newest matching script wins).

    ``exit_code=None`` runs until stopped; otherwise the container exits with it after
    ``after`` seconds (as OOMKilled with 137 when ``oom_killed``). ``output`` is written to
    the log at start. ``image_pull_error`` makes the image pull fail with that message.
    """

    match: PodMatch = field(default_factory=PodMatch)
    exit_code: int | None = None
    after: float = 0.0
    oom_killed: bool = False
    output: str = ""
    image_pull_error: str | None = None


def end_with_parent() -> None:
    """In a container's process: SIGKILL when the test process ends, even if it is killed,
    as a node's containers go with the node."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def exit_reason(code: int) -> str:
    return "Completed" if code == 0 else "Error"


class SimulatedContainer:
    def __init__(self, script: ContainerScript | None, log: ContainerLog) -> None:
        self.script = script or ContainerScript()
        self.log = log
        self._exit: asyncio.Future[Exit] = asyncio.get_running_loop().create_future()
        self._timer: asyncio.TimerHandle | None = None

    async def start(self) -> None:
        if self.script.output:
            self.log.write(self.script.output)
        code = 137 if self.script.oom_killed else self.script.exit_code
        if code is not None:
            reason = "OOMKilled" if self.script.oom_killed else exit_reason(code)
            self._timer = asyncio.get_running_loop().call_later(
                self.script.after, self.end, code, reason
            )

    def end(self, code: int, reason: str) -> None:
        if not self._exit.done():
            self._exit.set_result((code, reason))
            self.log.close()

    async def wait(self) -> Exit:
        return await asyncio.shield(self._exit)

    async def stop(self, grace: float) -> Exit:
        if self._timer:
            self._timer.cancel()
        self.end(0, "Completed")
        return await self.wait()


@dataclass
class ProcessRunner:
    """Run the containers of matching pods as local processes.

    ``match`` picks pods (a PodMatch, or a callable taking the pod). Each container runs its
    ``command`` + ``args`` (or ``entrypoints[image]`` + args when it has no command) in
    ``workdir/<namespace>/<pod>/<container>`` (a temporary directory when ``workdir`` is
    None), with the container's resolved env on top of ``env`` and, when
    ``inherit_environment``, this process's environment (without KUBECONFIG). Subclass and
    override ``prepare`` to map paths or ports.
    """

    match: PodMatch | Callable[[Object], bool] = field(default_factory=PodMatch)
    workdir: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    inherit_environment: bool = True
    entrypoints: dict[str, list[str]] = field(default_factory=dict)

    def matches(self, pod: Object) -> bool:
        return self.match(pod) if callable(self.match) else self.match.matches(pod)

    def prepare(
        self,
        pod: Object,
        container: Object,
        env: dict[str, str],
        volumes: dict[str, dict[str, bytes]] | None = None,
    ) -> tuple[list[str], dict[str, str], Path]:
        """Return (argv, environment, working directory) for one container run.

        ``volumes`` holds the files of the pod's ConfigMap and Secret volumes by volume name.
        """
        command = list(
            container.get("command") or self.entrypoints.get(container.get("image", ""), [])
        )
        argv = command + list(container.get("args") or [])
        if not argv:
            raise RuntimeError(
                f"container {container['name']!r} has no command and the process runner knows no entrypoint for image {container.get('image')!r}"
            )
        base = (
            dict(os.environ)
            if self.inherit_environment
            else {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        )
        for key in ("KUBECONFIG", "PYTEST_CURRENT_TEST"):
            base.pop(key, None)
        root = self.workdir or Path(tempfile.gettempdir()) / "k8s-emulator-pods"
        cwd = (
            root
            / pod["metadata"].get("namespace", "default")
            / pod["metadata"]["name"]
            / container["name"]
        )
        cwd.mkdir(parents=True, exist_ok=True)
        return argv, {**base, **self.env, **env}, cwd


class ProcessContainer:
    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, log: ContainerLog) -> None:
        self.argv, self.env, self.cwd, self.log = argv, env, cwd, log
        self.process: asyncio.subprocess.Process | None = None
        self._pump: asyncio.Task[None] | None = None
        self._forced: Exit | None = None

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            *self.argv,
            cwd=self.cwd,
            env=self.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=end_with_parent,
        )
        self._pump = asyncio.create_task(self._read_output())

    async def _read_output(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while chunk := await self.process.stdout.read(65536):
            self.log.write(chunk.decode(errors="replace"))

    async def wait(self) -> Exit:
        assert self.process is not None
        returncode = await self.process.wait()
        if self._pump:
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
        self.log.close()
        if self._forced is not None:
            return self._forced
        code = returncode if returncode >= 0 else 128 - returncode
        return code, exit_reason(code)

    def _signal(self, signum: int) -> None:
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signum)

    def end(self, code: int, reason: str) -> None:
        """Kill the process now and report ``code``/``reason`` (test controls, OOM)."""
        self._forced = (code, reason)
        self._signal(signal.SIGKILL)

    async def stop(self, grace: float) -> Exit:
        self._signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(asyncio.shield(self.wait()), max(grace, 0.1))
        except TimeoutError:
            self._signal(signal.SIGKILL)
            return await self.wait()
