"""nbclient's NotebookClient, as a job runs it: output streamed to the log, kernel under control.

Design notes: docs/design/jobs.md, "jupyter_to_job.notebook_client".
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from jupyter_core.utils import ensure_async
from nbclient import NotebookClient

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """Remove terminal colour codes (IPython colours its tracebacks)."""
    return _ANSI.sub("", text)


def output_text(msg: dict[str, Any]) -> str | None:
    """The text a log should show for one iopub message, or None for messages without any."""
    msg_type = msg["msg_type"]
    content = msg["content"]
    if msg_type == "stream":
        return content.get("text") or None
    if msg_type in ("execute_result", "display_data"):
        text = content.get("data", {}).get("text/plain")
        return f"{text}\n" if text else None
    if msg_type == "error":
        lines = content.get("traceback") or [f"{content.get('ename')}: {content.get('evalue')}"]
        return strip_ansi("\n".join(lines)) + "\n"
    return None


class JobNotebookClient(NotebookClient):
    """A NotebookClient that reports output as it happens and lets the runner own the kernel."""

    def __init__(self, nb: Any, *, on_output: Callable[[int, str], None], **kw: Any):
        super().__init__(nb, **kw)
        self._on_output = on_output
        self.unsaved_output = False

    def process_message(self, msg: dict[str, Any], cell: Any, cell_index: int) -> Any:
        text = output_text(msg)
        if text is not None:
            self._on_output(cell_index, text)
            self.unsaved_output = True
        return super().process_message(msg, cell, cell_index)

    @property
    def kernel_pid(self) -> int | None:
        """The kernel's process id (it runs in a process group of its own)."""
        provisioner = getattr(self.km, "provisioner", None)
        pid = getattr(provisioner, "pid", None)
        return pid if isinstance(pid, int) else None

    @asynccontextmanager
    async def running_kernel(self, cwd: str) -> AsyncIterator[None]:
        """Start the kernel in ``cwd``, learn its language, and always shut it down after.

        The kernel listens on Unix sockets in a private temporary folder rather than
        on TCP ports, which other users of a shared machine could reach.
        """
        sockets = tempfile.TemporaryDirectory(prefix="job-kernel-")
        self.km = self.create_kernel_manager()
        self.km.transport = "ipc"
        self.km.ip = os.path.join(sockets.name, "kernel")
        self.graceful_shutdown = True
        try:
            await self.async_start_new_kernel(cwd=cwd)
            await self.async_start_new_kernel_client()
            assert self.kc is not None
            reply = await self.async_wait_for_reply(await ensure_async(self.kc.kernel_info()))
            if reply is not None and "language_info" in reply["content"]:
                self.nb.metadata["language_info"] = reply["content"]["language_info"]
            yield
        finally:
            await self._shut_down_kernel(now=not self.graceful_shutdown)
            sockets.cleanup()

    async def interrupt(self) -> None:
        """Send the kernel an interrupt (KeyboardInterrupt in Python)."""
        if self.km is not None and self.km.has_kernel:
            await ensure_async(self.km.interrupt_kernel())

    async def _shut_down_kernel(self, *, now: bool) -> None:
        km, kc = self.km, self.kc
        if kc is not None:
            kc.stop_channels()
        if km is not None and km.has_kernel:
            try:
                alive = await ensure_async(km.is_alive())
                await ensure_async(km.shutdown_kernel(now=now or not alive))
            except Exception as error:  # a kernel that died or hangs must not hide the result
                self.log.warning("Could not shut the kernel down cleanly: %s", error)
        self.kc = None
        self.km = None
