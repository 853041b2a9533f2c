"""The pods of a job on several nodes, beside rank 0's: their logs and their failures.

The KubernetesExecutor follows rank 0's pod as it follows a one-pod job (its runner's
progress and final status are the job's; its outputs are the job's). :class:`OtherRanks`
copies the other ranks' logs into the job's log beside it, each line prefixed
``[rank N] ``, each rank with its own cursor file, and says which rank failed first, where,
and why, for the job's message (docs/kubernetes-executor.md, "Jobs on several nodes").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ..k8s_ranks import COMPLETION_INDEX_ANNOTATION
from ..logs import LogStore
from ..models import JobErrorInfo, JobStatus
from .base import FinalState
from .pod_log import LogReading, PodLogCopier
from .pod_status import container_state, disruption

Object = dict[str, Any]


def rank_of(pod: Object) -> int | None:
    """The pod's completion index (its rank), or None for a pod of a one-pod Job."""
    value = (pod.get("metadata", {}).get("annotations") or {}).get(COMPLETION_INDEX_ANNOTATION)
    return int(value) if value is not None and str(value).isdigit() else None


def rank_prefix(rank: int) -> bytes:
    """What each of a rank's log lines starts with."""
    return f"[rank {rank}] ".encode()


def _failed_at(pod: Object, gone: bool) -> str | None:
    """When the pod failed (an RFC 3339 time that sorts as text), or None: it has not.

    A container that ended with a non-zero exit code failed when it ended; a pod deleted
    (by hand, or gone) failed when its deletion was asked for."""
    terminated = container_state(pod).get("terminated")
    deleted = pod.get("metadata", {}).get("deletionTimestamp")
    if terminated and terminated.get("exitCode") not in (0, None):
        return deleted or terminated.get("finishedAt") or ""
    if deleted or (gone and not terminated):
        return deleted or ""
    return None


def why_failed(pod: Object) -> str:
    """A rank's end in words: its exit code and reason, or how the cluster took it."""
    disrupted = disruption(pod)
    if disrupted is not None:
        return disrupted[1]
    terminated = container_state(pod).get("terminated") or {}
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return "its pod was deleted"
    code, reason = terminated.get("exitCode"), terminated.get("reason")
    if code is None:
        return "its pod is gone"
    return f"its runner ended with exit code {code}" + (f" ({reason})" if reason else "")


def first_failed_rank(pods: dict[str, Object], gone: set[str]) -> Object | None:
    """The pod of the rank that failed first (rank 0's included), or None."""
    failed = [
        (at, rank_of(pod) or 0, pod)
        for uid, pod in pods.items()
        if (at := _failed_at(pod, uid in gone)) is not None
    ]
    return min(failed, key=lambda item: (item[0], item[1]))[2] if failed else None


def rank_failure(pod: Object) -> FinalState:
    """The job failed because rank N did: which rank, where, why, and that the rest stopped."""
    rank = rank_of(pod) or 0
    node = pod.get("spec", {}).get("nodeName") or "no node"
    why = why_failed(pod)
    message = (
        f"rank {rank} (pod {pod['metadata']['name']} on {node}) failed: {why}; the other "
        "ranks were stopped. Its lines in the log start with "
        f"[rank {rank}]; fix what they show and run the job again."
    )
    code = (container_state(pod).get("terminated") or {}).get("exitCode")
    return FinalState(
        JobStatus.FAILED,
        message,
        JobErrorInfo(cell_index=None, ename="RankFailed", evalue=f"rank {rank}: {why}"),
        code,
    )


class OtherRanks:
    """Copies the logs of ranks 1 and up while the job runs (each pod once, as it starts)."""

    def __init__(
        self,
        job_id: str,
        log_store: LogStore,
        folder: Path,
        log: logging.Logger | logging.LoggerAdapter[Any],
    ) -> None:
        self.job_id = job_id
        self.log_store = log_store
        self.folder = folder
        self.log = log
        self.copiers: dict[int, PodLogCopier] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def copier(self, rank: int) -> PodLogCopier:
        """Rank ``rank``'s copier, its cursor saved beside the job's files."""
        if rank not in self.copiers:
            copier = PodLogCopier(
                self.job_id,
                self.log_store,
                self.folder / f"pod-log-rank-{rank}.json",
                lambda status: None,  # rank 0's runner reports the job's progress
                self.log,
                prefix=rank_prefix(rank),
            )
            copier.load_cursor()
            self.copiers[rank] = copier
        return self.copiers[rank]

    def start(
        self,
        pods: dict[str, Object],
        read_log: Callable[[PodLogCopier], Callable[..., Awaitable[LogReading]]],
        ended: Callable[[str], bool],
        wait_change: Callable[[float], Awaitable[None]],
        reconnect_seconds: float,
    ) -> None:
        """Start copying the log of each pod of rank 1 and up whose container started."""
        for uid, pod in list(pods.items()):
            rank = rank_of(pod)
            state = container_state(pod)
            if not rank or uid in self.tasks or not ("running" in state or "terminated" in state):
                continue
            copier = self.copier(rank)
            self.tasks[uid] = asyncio.ensure_future(
                copier.copy_pod(
                    uid,
                    pod["metadata"]["name"],
                    read_log=read_log(copier),
                    ended=lambda uid=uid: ended(uid),  # type: ignore[misc]
                    wait_change=wait_change,
                    reconnect_seconds=reconnect_seconds,
                )
            )

    async def finish(self) -> None:
        """Let the copies end (their containers have ended or are being stopped)."""
        if self.tasks:
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        for copier in self.copiers.values():
            copier.save_cursor()

    async def cancel(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)
