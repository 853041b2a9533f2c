"""A warm runner: started before its job, it waits for one job with a kernel running.

Design notes: docs/design/jobs.md, "jupyter_to_job.warm_start".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .notebook_client import JobNotebookClient

JOB_ID_VARIABLE = "JUPYTER_TO_JOB_ID"
"""The one variable a job's environment has and its warm runner's cannot."""
PIPELINE_PREFIX = "JUPYTER_TO_JOB_PIPELINE_"
"""A pipeline job's variables (:mod:`jupyter_to_job.pipelines`)."""


def set_late(name: str) -> bool:
    """Whether variable ``name`` may be given to a kernel already running, before the job's
    first cell: the job's id, a pipeline job's ``JUPYTER_TO_JOB_PIPELINE_*`` (its shared
    folder, pipeline and stage) and the hub's ``GPUSPAWNER_*`` descriptions of its share and
    times, which code reads only when it asks (the PyTorch memory hook on import, too).
    Everything else (the GPU's ``CUDA_*`` and ``NVIDIA_*``, ``LD_PRELOAD``,
    ``PYTHONPATH``, ``PATH``) takes effect when a process starts, so a kernel is kept only
    where all of it is the job's."""
    return name == JOB_ID_VARIABLE or name.startswith(("GPUSPAWNER_", PIPELINE_PREFIX))


READY = b"ready\n"
FAILED = b"failed\n"
"""Said instead of ``ready`` when the kernel could not be started ahead."""
GONE = b"gone\n"
"""Said while waiting, when the kernel started ahead or its folder is gone."""
WATCH_SECONDS = 1.0
MAX_MESSAGE = 1024 * 1024
_KERNEL_OUTPUT_BUFFER = 64 * 1024


def preimport() -> None:
    """What every job imports before its first cell (see ``runner._prepare`` and
    ``runner._run_cells``), done while no job waits."""
    import jupyter_client.kernelspec  # noqa: F401
    import nbclient  # noqa: F401
    import nbformat  # noqa: F401
    import papermill.parameterize  # noqa: F401

    from . import notebook_client  # noqa: F401


class KernelOutputRelay:
    """What the kernel process itself writes to its standard output and error.

    A kernel started cold shares the runner's descriptors, which are the job log; a warm
    kernel starts before there is a log, so its output comes through a pipe, held until
    the job arrives and then appended to the log as it comes.
    """

    def __init__(self, read_fd: int):
        self._fd = read_fd
        self._held = bytearray()
        self._to_stdout = False
        os.set_blocking(read_fd, False)
        asyncio.get_running_loop().add_reader(read_fd, self._drain)

    def _drain(self) -> None:
        try:
            data = os.read(self._fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self._fd)
            os.close(self._fd)
            return
        if self._to_stdout:
            _write_all(1, data)
        elif len(self._held) < _KERNEL_OUTPUT_BUFFER:
            self._held += data[: _KERNEL_OUTPUT_BUFFER - len(self._held)]

    def to_stdout(self) -> None:
        """From now on the kernel's output goes to standard output (the job log)."""
        if self._held:
            _write_all(1, bytes(self._held))
            self._held.clear()
        self._to_stdout = True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class WarmKernel:
    """A kernel started before its job, handed to the job's notebook client."""

    def __init__(self, kernel_name: str, folder: Path, *, startup_timeout: int = 60):
        self.kernel_name = kernel_name
        self.folder = folder
        self.startup_timeout = startup_timeout
        self.language_info: dict[str, Any] = {}
        self._starter: JobNotebookClient | None = None
        self._sockets: tempfile.TemporaryDirectory[str] | None = None
        self.relay: KernelOutputRelay | None = None

    async def start(self) -> None:
        import nbformat
        from jupyter_core.utils import ensure_async

        from .notebook_client import JobNotebookClient

        starter = JobNotebookClient(
            nbformat.v4.new_notebook(),
            on_output=lambda index, text: None,
            kernel_name=self.kernel_name,
            startup_timeout=self.startup_timeout,
        )
        self._starter = starter
        # As JobNotebookClient.running_kernel: Unix sockets in a private folder.
        self._sockets = tempfile.TemporaryDirectory(prefix="job-kernel-")
        starter.km = starter.create_kernel_manager()
        starter.km.transport = "ipc"
        starter.km.ip = os.path.join(self._sockets.name, "kernel")
        read_fd, write_fd = os.pipe()
        try:
            await starter.async_start_new_kernel(
                cwd=str(self.folder), stdout=write_fd, stderr=write_fd
            )
        finally:
            os.close(write_fd)
        self.relay = KernelOutputRelay(read_fd)
        await starter.async_start_new_kernel_client()
        assert starter.kc is not None
        reply = await starter.async_wait_for_reply(await ensure_async(starter.kc.kernel_info()))
        if reply is not None:
            self.language_info = reply["content"].get("language_info", {})

    @property
    def is_python(self) -> bool:
        return self.language_info.get("name") == "python"

    async def alive(self) -> bool:
        from jupyter_core.utils import ensure_async

        km = self._starter.km if self._starter is not None else None
        return km is not None and bool(await ensure_async(km.is_alive()))

    async def shut_down(self) -> None:
        if self._starter is not None:
            await self._starter._shut_down_kernel(now=False)
        if self._sockets is not None:
            self._sockets.cleanup()

    @asynccontextmanager
    async def running_for(
        self, client: JobNotebookClient, cwd: str, environment: dict[str, str]
    ) -> AsyncIterator[None]:
        """The job's kernel, as ``client.running_kernel(cwd)`` would give it: moved into
        ``cwd`` and given the job's own variables, shut down at the end."""
        assert self._starter is not None
        client.km, client.kc = self._starter.km, self._starter.kc
        self._starter.km = self._starter.kc = None
        if self.language_info:
            client.nb.metadata["language_info"] = self.language_info
        client.graceful_shutdown = True
        try:
            await self._run_silently(
                client,
                "import os as __os\n"
                f"__os.chdir({cwd!r})\n"
                # the hub's descriptions are the job's, not the ones it was started with
                "for __n in [n for n in __os.environ if n.startswith('GPUSPAWNER_')]:\n"
                "    __os.environ.pop(__n)\n"
                "__n = None\n"
                f"__os.environ.update({environment!r})\n"
                "del __os, __n\n",
            )
            yield
        finally:
            await client._shut_down_kernel(now=not client.graceful_shutdown)
            if self._sockets is not None:
                self._sockets.cleanup()

    @staticmethod
    async def _run_silently(client: JobNotebookClient, code: str) -> None:
        """Run ``code`` without output, history or an execution count."""
        assert client.kc is not None
        msg_id = client.kc.execute(code, silent=True, store_history=False)
        reply = await client.async_wait_for_reply(msg_id)
        if reply is None or reply["content"].get("status") != "ok":
            raise RuntimeError("the warm kernel could not be moved into the notebook's folder")


async def _receive_job(control: socket.socket) -> tuple[dict[str, Any], int] | None:
    """The job message and the log's descriptor; None at end of file."""
    loop = asyncio.get_running_loop()
    control.setblocking(False)
    received = asyncio.Event()
    loop.add_reader(control.fileno(), received.set)
    try:
        data = b""
        fds: list[int] = []
        while not data.endswith(b"\n"):
            await received.wait()
            received.clear()
            try:
                chunk, more_fds, _, _ = socket.recv_fds(control, MAX_MESSAGE, 4)
            except BlockingIOError:
                continue
            if not chunk:
                for fd in fds + list(more_fds):
                    os.close(fd)
                return None
            data += chunk
            fds += list(more_fds)
            if len(data) > MAX_MESSAGE:
                raise ValueError("the job message is too long")
    finally:
        loop.remove_reader(control.fileno())
    if len(fds) != 1:
        raise ValueError("the job message must carry exactly the log's descriptor")
    return json.loads(data), fds[0]


async def _watch_kernel(control: socket.socket, kernel: WarmKernel, folder: Path) -> bool:
    """While no job has come: if the kernel or its folder goes, say so to the pool (which
    then gives its jobs to other runners) and return True; never returns otherwise."""
    while True:
        await asyncio.sleep(WATCH_SECONDS)
        if not folder.is_dir() or not await kernel.alive():
            with contextlib.suppress(Exception):
                await kernel.shut_down()
            with contextlib.suppress(OSError):
                control.sendall(GONE)
            return True


async def serve_one_job(
    control_fd: int, folder: Path, kernel_name: str, run_job: Callable[..., Awaitable[int]]
) -> int:
    """Start ahead, wait for one job, run it with the runner's ``run_job``; its exit code."""
    # Until the job comes, nothing is worth the job service's log but a failure.
    logging.getLogger("papermill").setLevel(logging.ERROR)
    control = socket.socket(fileno=control_fd)
    preimport()
    kernel: WarmKernel | None = WarmKernel(kernel_name, folder)
    problem = None
    try:
        await kernel.start()  # type: ignore[union-attr]
    except Exception as error:  # the job starts its own kernel, as a cold one does
        problem = f"[job] the kernel started ahead ({kernel_name!r}) failed: {error}\n"
        kernel = None
    try:
        control.sendall(READY if kernel is not None else FAILED)
    except OSError:
        pass
    watch = asyncio.ensure_future(_watch_kernel(control, kernel, folder)) if kernel else None
    try:
        message = await _receive_job(control)
    finally:
        if watch is not None:
            watch.cancel()
    if watch is not None and watch.done() and not watch.cancelled() and watch.result():
        problem = "[job] the kernel started ahead had ended; starting one for the job\n"
        kernel = None
    if message is None:
        if kernel is not None:
            await kernel.shut_down()
        return 0
    job, log_fd = message
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    control.close()
    if problem is not None:  # said now that there is a log to say it in
        _write_all(1, problem.encode("utf-8", errors="replace"))
    if kernel is not None and kernel.relay is not None:
        kernel.relay.to_stdout()
    job_dir = Path(job["job_dir"])
    os.chdir(job_dir)
    environment: dict[str, str] = job["environment"]
    os.environ.clear()
    os.environ.update(environment)
    if kernel is not None and not (job.get("keep_kernel") and await kernel.alive()):
        await kernel.shut_down()
        kernel = None
    return await run_job(
        job_dir,
        log_file=Path("-"),
        handle_signals=True,
        warm_kernel=kernel,
    )
