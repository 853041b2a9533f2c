"""Container logs kept by the simulated kubelet and served through ``pods/{name}/log``.

The real API server proxies log requests to the kubelet of the pod's node; here the
kubelet's LogBook is handed to the HTTP layer, which plays the same role.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from . import errors
from .timestamps import now


class ContainerLog:
    """The output of one container run: timestamped lines, and whether the run ended."""

    def __init__(self) -> None:
        self.lines: list[tuple[dt.datetime, str]] = []
        self.closed = False
        self._partial = ""
        self._changed = asyncio.Event()

    def write(self, text: str) -> None:
        text = self._partial + text
        *complete, self._partial = text.split("\n")
        moment = now()
        self.lines.extend((moment, line + "\n") for line in complete)
        if complete:
            self._signal()

    def close(self) -> None:
        if self._partial:
            self.lines.append((now(), self._partial))
            self._partial = ""
        self.closed = True
        self._signal()

    def _signal(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for_more(self, seen: int, timeout: float) -> None:
        """Return when there are more than ``seen`` lines, the log closed, or ``timeout`` passed."""
        if len(self.lines) > seen or self.closed:
            return
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            pass


class LogBook:
    """Logs per (pod uid, container): the current run and the previous one."""

    def __init__(self) -> None:
        self._current: dict[tuple[str, str], ContainerLog] = {}
        self._previous: dict[tuple[str, str], ContainerLog] = {}

    def current(self, pod_uid: str, container: str) -> ContainerLog:
        return self._current.setdefault((pod_uid, container), ContainerLog())

    def previous(self, pod_uid: str, container: str) -> ContainerLog | None:
        return self._previous.get((pod_uid, container))

    def restart(self, pod_uid: str, container: str) -> ContainerLog:
        """Start a new run: the current log becomes the previous one."""
        key = (pod_uid, container)
        if key in self._current:
            self._current[key].close()
            self._previous[key] = self._current.pop(key)
        return self.current(pod_uid, container)

    def forget(self, pod_uid: str) -> None:
        """The pod is gone, and its logs with it; followers see the end of the stream."""
        for book in (self._current, self._previous):
            for key in [k for k in book if k[0] == pod_uid]:
                book.pop(key).close()


def log_timestamp(moment: dt.datetime) -> str:
    """A line's time as ``timestamps=true`` shows it: the kubelet's RFC3339NanoFixed,
    always nine fraction digits (``2026-01-05T10:00:00.123456000Z``)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f000Z")


def log_since_time(value: str | None) -> dt.datetime | None:
    """``sinceTime`` as the API server reads it: RFC 3339, kept to the whole second (it
    reaches the kubelet as a metav1.Time), so lines of that second are all included."""
    if not value:
        return None
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise errors.bad_request(
            f'parsing time "{value}" as "2006-01-02T15:04:05Z07:00": cannot parse "{value}" as "2006"'
        ) from None
    if moment.tzinfo is None:
        raise errors.bad_request(
            f'parsing time "{value}" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "Z07:00"'
        )
    return moment.astimezone(dt.UTC).replace(microsecond=0)


def check_log_options(
    pod: str,
    since_seconds: int | None,
    since_time: dt.datetime | None,
    tail_lines: int | None,
    limit_bytes: int | None,
) -> None:
    """PodLogOptions validation: 422 Invalid, as the API server answers."""
    causes: list[tuple[str, str]] = []
    if since_seconds is not None and since_time is not None:
        causes.append(
            ("", "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified")
        )
    if since_seconds is not None and since_seconds < 1:
        causes.append(("sinceSeconds", f"Invalid value: {since_seconds}: must be greater than 0"))
    if tail_lines is not None and tail_lines < 0:
        causes.append(
            ("tailLines", f"Invalid value: {tail_lines}: must be greater than or equal to 0")
        )
    if limit_bytes is not None and limit_bytes < 1:
        causes.append(("limitBytes", f"Invalid value: {limit_bytes}: must be greater than 0"))
    if causes:
        raise errors.invalid("PodLogOptions", pod, causes)


@dataclass
class LogQuery:
    """What a log request asks for (PodLogOptions as the kubelet receives them)."""

    since_seconds: int | None = None
    since_time: dt.datetime | None = None
    tail_lines: int | None = None
    timestamps: bool = False
    limit_bytes: int | None = None
    follow: bool = False


def container_log(book: LogBook, pod: dict, container: str, previous: bool) -> ContainerLog:
    """The log to serve for ``container``, or a 400 saying why there is none (kubelet words)."""
    name = pod["metadata"]["name"]
    uid = pod["metadata"]["uid"]
    status = pod.get("status") or {}
    statuses = (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])
    container_status = next((s for s in statuses if s["name"] == container), None)
    if previous:
        found = book.previous(uid, container)
        if found is None or not (container_status or {}).get("lastState", {}).get("terminated"):
            raise errors.bad_request(
                f'previous terminated container "{container}" in pod "{name}" not found'
            )
        return found
    state = (container_status or {}).get("state") or {}
    last = (container_status or {}).get("lastState") or {}
    if container_status is None or ("waiting" in state and not last.get("terminated")):
        reason = state.get("waiting", {}).get("reason") or "ContainerCreating"
        if reason in ("ErrImagePull", "ImagePullBackOff", "InvalidImageName"):
            reason = "trying and failing to pull image"
        raise errors.bad_request(
            f'container "{container}" in pod "{name}" is waiting to start: {reason}'
        )
    return book.current(uid, container)


async def stream_log(
    log: ContainerLog,
    query: LogQuery,
    write: Callable[[str], None],
    flush: Callable[[], Awaitable[None]],
    disconnected: asyncio.Event,
) -> None:
    """Write ``log`` as ``query`` asks (following it while it grows, if asked)."""
    lines = list(log.lines)
    if query.since_seconds is not None:
        cutoff = now().timestamp() - query.since_seconds
        lines = [line for line in lines if line[0].timestamp() >= cutoff]
    if query.since_time is not None:
        lines = [line for line in lines if line[0] >= query.since_time]
    if query.tail_lines is not None:
        lines = lines[-query.tail_lines :] if query.tail_lines > 0 else []
    limit = query.limit_bytes
    sent = 0

    def render(entries: list[tuple[dt.datetime, str]]) -> str:
        return "".join(
            (f"{log_timestamp(moment)} {text}" if query.timestamps else text)
            for moment, text in entries
        )

    def send(text: str) -> bool:
        nonlocal sent
        if limit is not None:
            text = text.encode()[: max(limit - sent, 0)].decode(errors="ignore")
        sent += len(text.encode())
        if text:
            write(text)
        return limit is None or sent < limit

    if not send(render(lines)) or not query.follow:
        return
    await flush()
    seen = len(log.lines)
    while not disconnected.is_set():
        await log.wait_for_more(seen, timeout=1.0)
        fresh = log.lines[seen:]
        seen += len(fresh)
        if fresh:
            more = send(render(fresh))
            await flush()
            if not more:
                return
        if log.closed and seen >= len(log.lines):
            return
