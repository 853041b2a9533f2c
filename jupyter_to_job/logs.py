"""The durable log store: one append-only file per job, kept after the job's process is gone.

The runner and the executor append to ``<root>/<job id>.log`` while the job runs
(so nothing depends on a pipe or a pod staying alive), and readers page through
it by byte offset. Offsets always land on whole UTF-8 characters.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from traitlets import Float, Integer, Unicode
from traitlets.config import LoggingConfigurable

_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def check_job_id(job_id: str) -> str:
    """``job_id`` when it is safe as a file name, else ValueError."""
    if not isinstance(job_id, str) or not _JOB_ID.match(job_id):
        raise ValueError(f"not a job id: {str(job_id)[:80]!r}")
    return job_id


def _whole_characters(data: bytes) -> int:
    """How many leading bytes of ``data`` hold whole UTF-8 characters."""
    end = len(data)
    # A character is at most 4 bytes: look back at most 3 for an unfinished one.
    for back in range(1, min(4, end) + 1):
        byte = data[end - back]
        if byte < 0x80:  # ASCII: everything up to here is whole
            return end
        if byte >= 0xC0:  # lead byte of a sequence of `need` bytes
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return end if back >= need else end - back
    return end  # no lead byte found: invalid UTF-8, let the decoder replace it


@dataclass(frozen=True)
class LogSlice:
    """Bytes ``offset`` to ``next_offset`` of a log, decoded."""

    offset: int
    next_offset: int
    size: int
    data: str


class LogStore(LoggingConfigurable):
    """Per-job log files under one folder."""

    root = Unicode(
        help="""Folder holding one ``<job id>.log`` file per job.

        Example: ``c.LogStore.root = "/srv/jobs/logs"``. Defaults to ``logs`` in the job
        manager's ``root_dir``.
        """,
    ).tag(config=True)

    read_limit = Integer(
        256 * 1024,
        help="The most bytes one read returns: ``c.LogStore.read_limit = 262144``.",
    ).tag(config=True)

    follow_interval = Float(
        0.25,
        help="Seconds between looks at a growing log while following it.",
    ).tag(config=True)

    def path(self, job_id: str) -> Path:
        """The log file of ``job_id`` (which must be a plain job id)."""
        root = Path(self.root).resolve()
        path = root / f"{check_job_id(job_id)}.log"
        if path.parent != root:
            raise ValueError(f"not a job id: {job_id[:80]!r}")
        return path

    def create(self, job_id: str) -> Path:
        """Make an empty log for a new job (an existing one is kept)."""
        path = self.path(job_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640))
        return path

    def append(self, job_id: str, text: str) -> None:
        """Append ``text`` in one write (a whole line or lines)."""
        self.append_bytes(job_id, text.encode("utf-8", errors="replace"))

    def append_bytes(self, job_id: str, data: bytes) -> None:
        """Append ``data`` (UTF-8, whole lines) in one write."""
        path = self.path(job_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    def append_line(self, job_id: str, line: str) -> None:
        """Append one whole line, starting a new line if the log ends mid-line
        (a cell printing a progress bar without a newline, say)."""
        text = line if line.endswith("\n") else line + "\n"
        try:
            with self.path(job_id).open("rb") as stream:
                stream.seek(-1, os.SEEK_END)
                if stream.read(1) != b"\n":
                    text = "\n" + text
        except (FileNotFoundError, OSError):  # missing or empty: nothing to end
            pass
        self.append(job_id, text)

    def size(self, job_id: str) -> int:
        """Bytes in the log (0 when there is none)."""
        try:
            return self.path(job_id).stat().st_size
        except FileNotFoundError:
            return 0

    def exists(self, job_id: str) -> bool:
        return self.path(job_id).exists()

    def read(self, job_id: str, offset: int = 0, limit: int | None = None) -> LogSlice:
        """Up to ``limit`` bytes from ``offset``, cut back to a whole character."""
        if offset < 0:
            raise ValueError("a log offset cannot be negative")
        try:
            with self.path(job_id).open("rb") as stream:
                return self._read_from(stream, offset, limit)
        except FileNotFoundError:
            return LogSlice(0, 0, 0, "")

    def _read_from(self, stream: BinaryIO, offset: int, limit: int | None) -> LogSlice:
        limit = self.read_limit if limit is None else max(1, min(limit, self.read_limit))
        size = os.fstat(stream.fileno()).st_size
        offset = min(offset, size)
        stream.seek(offset)
        data = stream.read(limit)
        whole = _whole_characters(data) if len(data) == limit else len(data)
        if whole == 0 and data:  # a lone partial character at a limit of 1-3 bytes
            whole = len(data)
        text = data[:whole].decode("utf-8", errors="replace")
        return LogSlice(offset, offset + whole, max(size, offset + whole), text)

    def tail(self, job_id: str, lines: int = 100) -> LogSlice:
        """The last ``lines`` lines (at most ``read_limit`` bytes of them)."""
        lines = max(1, lines)
        try:
            with self.path(job_id).open("rb") as stream:
                size = os.fstat(stream.fileno()).st_size
                start = max(0, size - self.read_limit)
                stream.seek(start)
                data = stream.read(size - start)
        except FileNotFoundError:
            return LogSlice(0, 0, 0, "")
        if start > 0:
            # The window starts mid-line: drop that partial line.
            first = data.find(b"\n")
            if 0 <= first < len(data) - 1:
                data = data[first + 1 :]
                start += first + 1
        cut = 0
        position = len(data) - 1 if data.endswith(b"\n") else len(data)
        for _ in range(lines):
            position = data.rfind(b"\n", 0, position)
            if position < 0:
                cut = 0
                break
            cut = position + 1
        text = data[cut:].decode("utf-8", errors="replace")
        return LogSlice(start + cut, size, size, text)

    async def follow(
        self,
        job_id: str,
        offset: int = 0,
        *,
        is_final: Callable[[], bool],
        limit: int | None = None,
    ) -> AsyncIterator[LogSlice]:
        """Yield new log data from ``offset`` as it is written, until the job is final.

        ``is_final`` is asked *before* each read, so the data written before the job
        became final is always yielded before the generator ends. The file stays open
        while it is followed, and each read starts where the last one ended: a poll
        costs one ``fstat`` and reads only what is new.
        """
        if offset < 0:
            raise ValueError("a log offset cannot be negative")
        try:
            stream = self.path(job_id).open("rb")
        except FileNotFoundError:
            return
        with stream:
            while True:
                final = is_final()
                piece = self._read_from(stream, offset, limit)
                if piece.data:
                    offset = piece.next_offset
                    yield piece
                    continue
                if final or not self.exists(job_id):
                    return
                await asyncio.sleep(self.follow_interval)

    def delete(self, job_id: str) -> None:
        self.path(job_id).unlink(missing_ok=True)
