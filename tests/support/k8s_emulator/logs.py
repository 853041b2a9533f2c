"""Container logs kept by the simulated kubelet and served through ``pods/{name}/log``.

The real API server proxies log requests to the kubelet of the pod's node; here the
kubelet's LogBook is handed to the HTTP layer, which plays the same role.
"""

from __future__ import annotations

import asyncio
import datetime as dt

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
