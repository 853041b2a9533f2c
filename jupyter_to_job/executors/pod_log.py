"""Copying a pod's log into the durable log store: exactly once, across broken streams.

The executor reads ``pods/log`` with ``timestamps=true``: every line starts with the time
the container runtime received it. :class:`PodLogCursor` remembers the last timestamp
copied and how many lines carried it, so a stream read again after a break (with
``sinceTime``, which the API server honours to the second) skips exactly the lines
already copied. Byte offsets would not do: after the kubelet rotates a container log
(10 MiB by default) the log starts from the newest file, and offsets shift.

Pure: no I/O. The cursor is saved as JSON next to the job's files, so a restarted job
service resumes where the last one stopped (:meth:`PodLogCursor.to_dict`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..models import JobStatus
from ..runfiles import STATUS_MARKER, RunnerStatus, parse_compact_status

# The runner's progress lines (runner.py): what the executor reads as the job runs,
# since status.json stays inside the pod.
_TOTAL = re.compile(r"^\[job\] starting kernel .*: (\d+) code cells to run$")
_CELL = re.compile(r"^\[job\] cell (\d+) started \((\d+) of (\d+)\)$")


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
    """Splits one response into new lines, skipping those the cursor has copied."""

    cursor: PodLogCursor
    _partial: bytes = b""
    _seen_at_last: int = 0

    def feed(self, chunk: bytes) -> list[str]:
        """The new whole lines in ``chunk`` (text with its newline, without timestamp)."""
        data = self._partial + chunk
        end = data.rfind(b"\n")
        if end < 0:
            self._partial = data
            return []
        self._partial = data[end + 1 :]
        return self._accept(data[: end + 1].decode("utf-8", errors="replace").splitlines(True))

    def finish(self) -> list[str]:
        """At the end of a finished container's log: its last line, if it had no newline."""
        rest, self._partial = self._partial, b""
        if not rest:
            return []
        lines = self._accept([rest.decode("utf-8", errors="replace")])
        return [line if line.endswith("\n") else line + "\n" for line in lines]

    def _accept(self, lines: list[str]) -> list[str]:
        cursor = self.cursor
        fresh = []
        for line in lines:
            stamp, _, text = line.partition(" ")
            key = timestamp_key(stamp)
            if cursor.last is not None:
                if key < cursor.last:
                    continue
                if key == cursor.last:
                    self._seen_at_last += 1
                    if self._seen_at_last <= cursor.at_last:
                        continue
                    cursor.at_last += 1
                else:
                    cursor.last, cursor.at_last, self._seen_at_last = key, 1, 1
            else:
                cursor.last, cursor.at_last, self._seen_at_last = key, 1, 1
            cursor.copied_bytes += len(text.encode("utf-8"))
            fresh.append(text)
        return fresh


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
