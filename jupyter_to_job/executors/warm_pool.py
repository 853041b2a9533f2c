"""Warm runners: a few job runners started ahead for one person and flavor.

A warm runner (:mod:`jupyter_to_job.warm_start`) is a runner process started as its
owner, in the flavor's cgroup, with the environment a job of that owner and flavor gets,
its imports done and a kernel started, waiting on a control socket (a socket pair: only
this service holds the other end) for one job. The LocalExecutor takes one for a job
instead of starting a runner cold (see ``LocalExecutor.warm_pool_size``).

The rules that keep it safe and fair:

- a warm runner belongs to one owner and flavor and is taken only by a job of that
  owner and flavor, whose limits (its cgroup) are the ones it was started with; anything
  else starts cold;
- it serves one job and exits; it is never handed a second one;
- the job's log reaches it as an open descriptor, as it reaches a cold runner, and its
  environment is built by the same allow-list; the job's GPU share is decided at
  admission, after the runner started: the runner keeps its kernel only when the job's
  environment equals the one the kernel started with, and otherwise starts the job's
  kernel with the job's environment (a warm start of the runner only);
- idle ones are released after ``warm_idle_seconds`` (closing the control socket: the
  runner shuts its kernel down and exits), and all of them when the manager shuts down.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpuspawner.core.cgroups import Cgroup, ResourceLimits
from gpuspawner.core.ledger import ProcessHolder

from ..warm_start import set_late
from .process_exit import ProcessExit

_RELEASE_GRACE = 10.0
_START_ALLOWANCE = 120.0
"""Seconds a warm runner may take to become ready (imports, its kernel) before its idle
time starts counting anyway."""


@dataclass
class WarmRunner:
    """One runner process waiting for a job."""

    owner: str
    flavor: str | None
    limits: ResourceLimits
    environment: dict[str, str]
    """What the runner and its kernel started with (a job's, less its id)."""
    popen: subprocess.Popen[bytes]
    start_time: float
    control: socket.socket
    cgroup: Cgroup | None
    folder: Path
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the runner says its imports are done and its kernel runs."""
    idle_timer: asyncio.TimerHandle | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL the runner's process group (it leads its own session), only while its
        pid is still the runner this service started (its start time says so)."""
        if self.running() and ProcessHolder(self.pid, self.start_time).is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)

    def keeps_kernel(self, environment: dict[str, str]) -> bool:
        """Whether a job with ``environment`` may run in the kernel started ahead."""
        return {k: v for k, v in environment.items() if not set_late(k)} == {
            k: v for k, v in self.environment.items() if not set_late(k)
        }

    def hand_over(self, job_dir: Path, environment: dict[str, str], log_fd: int) -> bool:
        """Send the job (and the log's descriptor); False when the runner is gone."""
        message = {
            "job_dir": str(job_dir),
            "environment": environment,
            "keep_kernel": self.keeps_kernel(environment),
        }
        data = json.dumps(message).encode() + b"\n"
        try:
            self.control.setblocking(True)
            sent = socket.send_fds(self.control, [data], [log_fd])
            if sent < len(data):
                self.control.sendall(data[sent:])
            return True
        except OSError:
            return False
        finally:
            self.control.close()


class WarmRunnerPool:
    """The warm runners of one job manager, by owner and flavor."""

    def __init__(
        self, folder: Path, *, log: logging.Logger | logging.LoggerAdapter[logging.Logger]
    ):
        self.folder = folder
        """Where each warm runner's own folder is made (its kernel's until the job comes)."""
        self.log = log
        self._runners: dict[tuple[str, str | None], list[WarmRunner]] = {}
        self._refills: dict[tuple[str, str | None], Callable[[], object]] = {}
        self._ending: set[asyncio.Future[None]] = set()
        # Folders of warm runners of an earlier run of the service: those runners ended
        # when it did (the end of their control socket).
        if folder.is_dir():
            for stale in folder.iterdir():
                shutil.rmtree(stale, ignore_errors=True)

    def runners(self, owner: str, flavor: str | None) -> list[WarmRunner]:
        """The warm runners waiting for ``owner``'s next job of ``flavor``."""
        return [r for r in self._runners.get((owner, flavor), []) if r.running()]

    def add(self, runner: WarmRunner, *, idle_seconds: float) -> None:
        """Keep ``runner`` for its owner's next job, for ``idle_seconds`` at most."""
        loop = asyncio.get_running_loop()
        self._runners.setdefault((runner.owner, runner.flavor), []).append(runner)
        runner.control.setblocking(False)
        loop.add_reader(runner.control.fileno(), self._on_message, runner, idle_seconds)
        # Idle counts from when it is ready; until then it has a while to start its kernel.
        runner.idle_timer = loop.call_later(_START_ALLOWANCE + idle_seconds, self._idle, runner)

    def remember_refill(self, owner: str, flavor: str | None, refill: Callable[[], object]) -> None:
        """``refill()`` starts runners again for ``owner`` and ``flavor`` (after a job)."""
        self._refills[owner, flavor] = refill

    def refill(self, owner: str, flavor: str | None) -> None:
        """A job of ``owner`` ended: have warm runners ready for their next one again."""
        refill = self._refills.get((owner, flavor))
        if refill is not None:
            try:
                refill()
            except Exception:  # a warm start is a convenience; the next job starts cold
                self.log.exception("Could not start warm runners again for %s", owner)

    def take(self, owner: str, flavor: str | None, limits: ResourceLimits) -> WarmRunner | None:
        """A warm runner for a job of ``owner`` with ``flavor`` and ``limits``, now that
        job's alone (it leaves the pool), or None: the job starts cold."""
        candidates = [
            r for r in self._runners.get((owner, flavor), []) if r.running() and r.limits == limits
        ]
        # A ready one first; a job given one still starting waits for its kernel, which
        # started before any other could.
        candidates.sort(key=lambda r: not r.ready.is_set())
        for runner in candidates:
            self._forget(runner)
            return runner
        return None

    async def wait_ready(self, owner: str, flavor: str | None) -> int:
        """Wait until every warm runner of ``owner`` and ``flavor`` is ready (or gone); how
        many are ready and still waiting for a job."""
        runners = self.runners(owner, flavor)
        await asyncio.gather(*(r.ready.wait() for r in runners))
        waiting = self.runners(owner, flavor)
        return sum(1 for r in runners if r in waiting)

    def release(self, runner: WarmRunner) -> None:
        """Let ``runner`` go: it shuts its kernel down and exits; its folder and cgroup go."""
        self._forget(runner)
        with contextlib.suppress(OSError):
            runner.control.close()
        ending = asyncio.ensure_future(self._clean_up(runner))
        self._ending.add(ending)
        ending.add_done_callback(self._ending.discard)

    async def close(self) -> None:
        """Release every warm runner and wait for them to end."""
        for runners in list(self._runners.values()):
            for runner in list(runners):
                self.release(runner)
        self._refills.clear()
        if self._ending:
            await asyncio.gather(*self._ending, return_exceptions=True)

    # -- inside ---------------------------------------------------------------------------

    def _forget(self, runner: WarmRunner) -> None:
        runner.ready.set()  # nobody waits for a runner that left the pool
        runners = self._runners.get((runner.owner, runner.flavor), [])
        if runner in runners:
            runners.remove(runner)
        if runner.idle_timer is not None:
            runner.idle_timer.cancel()
        with contextlib.suppress(ValueError, OSError):
            if runner.control.fileno() >= 0:
                asyncio.get_running_loop().remove_reader(runner.control.fileno())

    def _on_message(self, runner: WarmRunner, idle_seconds: float) -> None:
        try:
            data = runner.control.recv(64)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the runner ended before its job came
            runner.ready.set()
            self.log.warning("Warm runner %d of %s ended by itself", runner.pid, runner.owner)
            self.release(runner)
            return
        words = data.split()
        if b"failed" in words or b"gone" in words:
            # Its kernel could not start, or has gone: no job is handed to it.
            runner.ready.set()
            self.log.warning(
                "Warm runner %d of %s has no kernel (%s); releasing it",
                runner.pid,
                runner.owner,
                "it did not start" if b"failed" in words else "it ended, or its folder went",
            )
            self.release(runner)
        elif b"ready" in words:
            runner.ready.set()
            if runner.idle_timer is not None:
                runner.idle_timer.cancel()
            runner.idle_timer = asyncio.get_running_loop().call_later(
                idle_seconds, self._idle, runner
            )

    def _idle(self, runner: WarmRunner) -> None:
        self.log.info("Releasing warm runner %d of %s: idle", runner.pid, runner.owner)
        # Their next job need not come soon: only a new sign of activity (prewarm) starts
        # runners for them again.
        self._refills.pop((runner.owner, runner.flavor), None)
        self.release(runner)

    async def _clean_up(self, runner: WarmRunner) -> None:
        ended = ProcessExit(runner.pid)
        try:
            deadline = asyncio.get_running_loop().time() + _RELEASE_GRACE
            while runner.running():
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    runner.kill()
                    deadline += _RELEASE_GRACE
                await ended.wait(max(left, 0.05))
        finally:
            ended.close()
        if runner.cgroup is not None:
            runner.cgroup.remove()
        shutil.rmtree(runner.folder, ignore_errors=True)
