"""Noticing that a process ended as it ends, rather than at the next poll.

A pidfd (Linux 5.3 and later) becomes readable when its process exits, whoever its
parent is, so the same wait serves a runner this service started and one it adopted
after a restart. Where there is none, the wait falls back to looking every
``fallback_interval`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os


class ProcessExit:
    """``await wait(timeout)``: True once process ``pid`` has ended, False at the timeout."""

    def __init__(self, pid: int, *, fallback_interval: float = 0.1):
        self.pid = pid
        self.fallback_interval = fallback_interval
        self._ended = asyncio.Event()
        self._fd: int | None = None
        try:
            self._fd = os.pidfd_open(pid)
        except (AttributeError, OSError):  # no pidfds here, or the process is gone already
            return
        asyncio.get_running_loop().add_reader(self._fd, self._on_exit)

    def _on_exit(self) -> None:
        self._ended.set()
        self.close()

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds; True when the process has ended (by its pidfd)."""
        if self._fd is None and not self._ended.is_set():
            await asyncio.sleep(min(timeout, self.fallback_interval))
            return False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ended.wait(), timeout)
        return self._ended.is_set()

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(ValueError, RuntimeError):
                asyncio.get_running_loop().remove_reader(self._fd)
            os.close(self._fd)
            self._fd = None
