"""Copying a pod's log into the durable log store: exactly once, across broken streams.

:class:`PodLogCursor` (how far a pod's log was copied, saved beside the job's files) and
:class:`PodLogCopier` (the copying, for the KubernetesExecutor); the rest is pure. Why a
cursor of timestamps: docs/kubernetes-executor.md, "Log".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from ..k8s_objects import CONTAINER_NAME
from ..logs import LogStore
from ..models import JobStatus
from ..runfiles import STATUS_MARKER, RunnerStatus, atomic_write_text, parse_compact_status
from .kube_client import KubeError

# The runner's progress lines (runner.py): what the executor reads as the job runs,
# since status.json stays inside the pod.
_TOTAL = re.compile(r"^\[job\] starting kernel .*: (\d+) code cells to run$")
_CELL = re.compile(r"^\[job\] cell (\d+) started \((\d+) of (\d+)\)$")
_RUNNER_LINE = re.compile(rb"^\[job\] [^\n]*\n", re.MULTILINE)


def timestamp_key(stamp: str) -> str:
    """An RFC 3339 timestamp as a key that sorts in time order.

    The kubelet writes nanoseconds with trailing zeros dropped (``...05.1Z`` is later
    than ``...05.12Z`` as text, earlier in time), so the fraction is padded to 9 digits.
    """
    stamp = stamp.rstrip("Z")
    whole, _, fraction = stamp.partition(".")
    return f"{whole}.{fraction.ljust(9, '0')}"


@dataclass
class PodLogCursor:
    """How far one pod's log has been copied."""

    pod_uid: str | None = None
    last: str | None = None
    """Timestamp key of the last line copied."""
    at_last: int = 0
    """Lines copied that carry exactly ``last`` (several lines can share a timestamp)."""
    copied_bytes: int = 0

    def follow(self, pod_uid: str) -> None:
        """Start on pod ``pod_uid`` (a new pod of the Job starts a new log)."""
        if pod_uid != self.pod_uid:
            self.pod_uid = pod_uid
            self.last = None
            self.at_last = 0

    def since_time(self) -> str | None:
        """``sinceTime`` for reading on: the second of the last line copied (the API server
        takes whole seconds; the lines of that second already copied are skipped)."""
        return None if self.last is None else self.last.partition(".")[0] + "Z"

    def reading(self) -> LogReading:
        """A parser for one response of ``pods/log`` (one stream, from its start)."""
        return LogReading(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod_uid": self.pod_uid,
            "last": self.last,
            "at_last": self.at_last,
            "copied_bytes": self.copied_bytes,
        }

    @classmethod
    def from_dict(cls, data: Any) -> PodLogCursor:
        if not isinstance(data, dict):
            return cls()
        return cls(
            pod_uid=data.get("pod_uid"),
            last=data.get("last"),
            at_last=int(data.get("at_last") or 0),
            copied_bytes=int(data.get("copied_bytes") or 0),
        )


@dataclass
class LogReading:
    """Splits one response into new lines, skipping those the cursor has copied.

    Works on whole blocks of lines, not line by line. The container runtime's
    timestamps only grow, so at the start of a stream read again (``sinceTime``) the
    first line not copied yet is found by a binary search over the block; from there on
    every line is new, its timestamp is cut off by one regular expression over the
    block, and the cursor learns the block's last timestamp.
    """

    cursor: PodLogCursor
    _partial: bytes = b""
    _seen_at_last: int = 0
    _caught_up: bool = False

    def feed(self, chunk: bytes) -> bytes:
        """The new whole lines in ``chunk`` (their text with newlines, without timestamps)."""
        data = self._partial + chunk
        end = data.rfind(b"\n") + 1
        self._partial = data[end:]
        return self._accept(data[:end]) if end else b""

    def finish(self) -> bytes:
        """At the end of a finished container's log: its last line, if it had no newline."""
        rest, self._partial = self._partial, b""
        return self._accept(rest + b"\n") if rest else b""

    def _accept(self, block: bytes) -> bytes:
        """The new lines of ``block`` (whole lines), without their timestamps."""
        cursor = self.cursor
        if not self._caught_up:
            block = self._skip_copied(block)
            if not block:
                return b""
        last_start = block.rfind(b"\n", 0, len(block) - 1) + 1
        stamp = _stamp(block, last_start)
        # How many lines at the end of the block carry the last line's timestamp (in time
        # order they are together, and the same time is written the same way).
        if block.startswith(stamp + b" "):
            same = block.count(b"\n")
        else:
            same = block.count(b"\n" + stamp + b" ")
        key = timestamp_key(stamp.decode("ascii", errors="replace"))
        if key == cursor.last:
            cursor.at_last += same
        else:
            cursor.last, cursor.at_last = key, same
        text = _TIMESTAMP.sub(b"", block)
        cursor.copied_bytes += len(text)
        return text

    def _skip_copied(self, block: bytes) -> bytes:
        """``block`` from its first line the cursor has not copied."""
        cursor = self.cursor
        if cursor.last is None:
            self._caught_up = True
            return block
        last = cursor.last

        def key(start: int) -> str:
            return timestamp_key(_stamp(block, start).decode("ascii", errors="replace"))

        # The first line at or after the cursor's time: lines are in time order, so a
        # binary search over the block's bytes finds it in a few looks.
        low, high = 0, len(block)
        while low < high:
            start = block.rfind(b"\n", 0, (low + high) // 2) + 1
            if start < low:
                start = low
            if key(start) >= last:
                high = start
            else:
                low = block.index(b"\n", start) + 1
        position = low
        if position < len(block) and key(position) == last:
            # The lines of the cursor's time already copied: skip as many as it counted.
            prefix = _stamp(block, position) + b" "
            while (
                position < len(block)
                and self._seen_at_last < cursor.at_last
                and block.startswith(prefix, position)
            ):
                self._seen_at_last += 1
                position = block.index(b"\n", position) + 1
        if position >= len(block):
            return b""
        self._caught_up = True
        return block[position:]


_TIMESTAMP = re.compile(rb"^[^ \n]* ", re.MULTILINE)


def _stamp(block: bytes, start: int) -> bytes:
    """The timestamp of the line starting at ``start``."""
    end = block.find(b" ", start, block.find(b"\n", start))
    return block[start:end] if end >= 0 else b""


def prefixed(block: bytes, prefix: bytes) -> bytes:
    """Whole lines ``block`` with ``prefix`` before each of them."""
    if not prefix:
        return block
    lines = block.split(b"\n")
    rest = lines.pop()  # after the last newline: empty for whole lines
    return b"".join(prefix + line + b"\n" for line in lines) + (prefix + rest if rest else b"")


@dataclass
class RunProgress:
    """What the log says of the run: progress lines, and the final status line."""

    job_id: str
    cells_total: int | None = None
    cells_completed: int = 0
    current_cell: int | None = None
    final: RunnerStatus | None = None
    changed: bool = field(default=False, repr=False)

    def observe(self, line: str) -> bool:
        """Note what ``line`` says; False for the final-status line (kept out of the log)."""
        if not line.startswith("[job] "):
            return True
        text = line.rstrip("\n")
        if text.startswith(STATUS_MARKER):
            self.final = parse_compact_status(text) or self.final
            return False
        if match := _CELL.match(text):
            cell, number, total = (int(group) for group in match.groups())
            self.current_cell, self.cells_completed, self.cells_total = cell, number - 1, total
            self.changed = True
        elif match := _TOTAL.match(text):
            self.cells_total = int(match.group(1))
            self.changed = True
        return True

    def observe_lines(self, block: bytes) -> bytes:
        """Note what the runner's lines among the whole lines of ``block`` say; returns
        ``block`` without the final-status line. Cell output is passed over in bulk."""
        kept, start = [], 0
        for match in _RUNNER_LINE.finditer(block):
            if not self.observe(match.group().decode("utf-8", errors="replace")):
                kept.append(block[start : match.start()])
                start = match.end()
        if not kept:
            return block
        kept.append(block[start:])
        return b"".join(kept)

    def status(self) -> RunnerStatus:
        """The runner's status as far as the log tells (the final one once it was read)."""
        if self.final is not None:
            return self.final
        return RunnerStatus(
            job_id=self.job_id,
            state=JobStatus.RUNNING,
            cells_total=self.cells_total,
            cells_completed=self.cells_completed,
            current_cell=self.current_cell,
        )


class PodLogCopier:
    """Copies a job's pod logs into its durable log, exactly once: across broken streams,
    and after a restart of the job service from the cursor saved beside the job's files."""

    def __init__(
        self,
        job_id: str,
        log_store: LogStore,
        cursor_file: Path,
        report_progress: Callable[[RunnerStatus], None],
        log: logging.Logger | logging.LoggerAdapter[Any],
        *,
        prefix: bytes = b"",
    ) -> None:
        self.job_id = job_id
        self.prefix = prefix
        """Put before each line copied (``[rank 1] `` for a job on several nodes)."""
        self.log_store = log_store
        self.cursor_file = cursor_file
        self.report_progress = report_progress
        self.log = log
        self.cursor = PodLogCursor()
        self.progress = RunProgress(job_id)
        self.saved_at = 0.0

    def load_cursor(self) -> None:
        """Take up the cursor saved by an earlier job service, if any."""
        with contextlib.suppress(OSError, ValueError):
            self.cursor = PodLogCursor.from_dict(json.loads(self.cursor_file.read_text()))

    async def copy_pod(
        self,
        uid: str,
        name: str,
        *,
        read_log: Callable[..., Awaitable[LogReading]],
        ended: Callable[[], bool],
        wait_change: Callable[[float], Awaitable[None]],
        reconnect_seconds: float,
    ) -> None:
        """Copy the pod's log until its container has ended, then read it once more.
        ``read_log(name, follow=...)`` reads it once; ``ended()`` says the container ended."""
        self.cursor.follow(uid)
        leftover = None
        while True:
            container_ended = ended()
            broke = False
            try:
                leftover = await read_log(name, follow=not container_ended)
            except KubeError as error:
                if error.status == 404:  # the pod is gone, and its log with it
                    if leftover is not None:
                        self.copy(leftover.finish())
                    return
                broke = True
                if error.status != 400:  # 400: not started yet, or just ended
                    self.log.warning("Job %s: reading the log failed: %s", self.job_id, error)
            except (aiohttp.ClientError, TimeoutError) as error:
                broke = True
                self.log.info("Job %s: the log stream broke (%s); reopening", self.job_id, error)
            if container_ended:
                if leftover is not None:
                    self.copy(leftover.finish())
                return
            if not broke:
                # The stream ended by itself: the container has ended, which the watch is
                # about to say; then the loop reads the log once more.
                deadline = time.monotonic() + 5.0
                while not ended() and time.monotonic() < deadline:
                    await wait_change(0.2)
            if not ended():
                await asyncio.sleep(reconnect_seconds)

    def query(self, *, follow: bool) -> list[tuple[str, Any]]:
        """The ``pods/log`` query of one read from the cursor on."""
        query: list[tuple[str, Any]] = [("container", CONTAINER_NAME), ("timestamps", "true")]
        if follow:
            query.append(("follow", "true"))
        if self.cursor.last is not None:
            query.append(("sinceTime", self.cursor.since_time()))
        return query

    async def read(self, chunks: AsyncIterator[bytes]) -> LogReading:
        """Copy one response's new lines; returns the reading (its leftover)."""
        reading = self.cursor.reading()
        async with contextlib.aclosing(chunks) as stream:  # type: ignore[type-var]
            async for chunk in stream:
                self.copy(reading.feed(chunk))
        return reading

    def copy(self, lines: bytes) -> None:
        """Append new pod log lines (whole lines, in one block) to the durable log, in one
        write; note progress and the final status."""
        if not lines:
            return
        kept = self.progress.observe_lines(lines)
        if kept:
            self.log_store.append_bytes(self.job_id, prefixed(kept, self.prefix))
        # Right after the lines it counts (one small file per block, not per line): a
        # service killed in between copies this one block again when it comes back.
        self.save_cursor()
        if self.progress.changed:
            self.progress.changed = False
            self.report_progress(self.progress.status())

    def save_cursor(self) -> None:
        """Save the cursor after the lines it counts (a crash in between repeats, never loses)."""
        if self.cursor.pod_uid is None:
            return
        with contextlib.suppress(OSError):
            atomic_write_text(self.cursor_file, json.dumps(self.cursor.to_dict()) + "\n")
        self.saved_at = time.monotonic()
