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
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ..k8s_ranks import COMPLETION_INDEX_ANNOTATION
from ..logs import LogStore
from ..models import JobErrorInfo, JobStatus
from ..retries import exhausted, separator
from ..store import JobAttemptsRow, JobStore
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


def failed_at(pod: Object, gone: bool) -> str | None:
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


def first_failed_rank(
    pods: dict[str, Object], gone: set[str], seen: dict[str, int] | None = None
) -> Object | None:
    """The pod of the rank that failed first (rank 0's included), or None; each rank's
    newest pod only (an earlier attempt's, taken back by the queue, failed nothing).

    The API's times are whole seconds: within one, ``seen`` (the order in which the pod
    watch first saw each pod fail, which is the order of the API's writes) tells which
    came first, so the rank deleted or failed is not mistaken for rank 0, which the Job
    controller stopped within the same second."""
    order = seen or {}
    newest: dict[int, tuple[str, str, Object]] = {}
    for uid, pod in pods.items():
        rank, made = rank_of(pod) or 0, pod["metadata"].get("creationTimestamp") or ""
        if rank not in newest or made >= newest[rank][0]:
            newest[rank] = (made, uid, pod)
    failed = [
        (at, order.get(uid, len(order)), rank, pod)
        for rank, (_, uid, pod) in newest.items()
        if (at := failed_at(pod, uid in gone)) is not None
    ]
    return min(failed, key=lambda item: item[:3])[3] if failed else None


def rank_failure(pod: Object, taken: tuple[str, str] | None = None) -> FinalState:
    """The job failed because rank N did: which rank, where, why (``taken``: the cluster took
    its pod away, in words), and that the rest stopped."""
    rank = rank_of(pod) or 0
    node = pod.get("spec", {}).get("nodeName") or "no node"
    why = taken[1] if taken else why_failed(pod)
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


def all_ranks_again(
    store: JobStore,
    job_id: str,
    attempts: JobAttemptsRow,
    taken: tuple[str, str],
    verdict: FinalState,
    log_line: Callable[[str], None],
) -> FinalState | None:
    """A job on several nodes with a checkpoint, one of whose ranks the cluster took away:
    queued again whole for its next attempt (None; a new Job, every rank going on from the
    checkpoint, as after an out-of-memory kill), or ``verdict`` saying its retries are used
    up."""
    attempt = store.start_again(job_id, (JobStatus.RUNNING,), taken[1])
    if attempt is not None:
        log_line(separator(attempt, attempts.max_attempts, taken[1]))
        return None
    sentence = exhausted(attempts.max_attempts)
    log_line(sentence)
    return dataclasses.replace(verdict, message=f"{verdict.message} {sentence}")


class OtherRanks:
    """Copies the logs of ranks 1 and up while the job runs (each pod once, as it starts)."""

    def __init__(
        self,
        job_id: str,
        log_store: LogStore,
        folder: Path,
        log: logging.Logger | logging.LoggerAdapter[Any],
        *,
        read_log: Callable[[PodLogCopier], Callable[..., Awaitable[LogReading]]],
        ended: Callable[[str], bool],
        wait_change: Callable[[float], Awaitable[None]],
        reconnect_seconds: float,
    ) -> None:
        """``read_log(copier)``: a reader of a pod's log from ``copier``'s cursor on;
        ``ended(uid)``: whether that pod's container has ended; as the executor's own."""
        self.job_id = job_id
        self.log_store = log_store
        self.folder = folder
        self.log = log
        self.read_log, self.ended, self.wait_change = read_log, ended, wait_change
        self.reconnect_seconds = reconnect_seconds
        self.pods: dict[str, Object] = {}
        """The pods of ranks 1 and up, as the API has them now."""
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

    def saw(self, pod: Object) -> None:
        """Keep pod ``pod`` of rank 1 or up, and copy its log once its container started."""
        self.pods[pod["metadata"]["uid"]] = pod
        for uid, pod in list(self.pods.items()):
            rank = rank_of(pod)
            state = container_state(pod)
            if not rank or uid in self.tasks or not ("running" in state or "terminated" in state):
                continue
            copier = self.copier(rank)
            self.tasks[uid] = asyncio.ensure_future(
                copier.copy_pod(
                    uid,
                    pod["metadata"]["name"],
                    read_log=self.read_log(copier),
                    ended=lambda uid=uid: self.ended(uid),  # type: ignore[misc]
                    wait_change=self.wait_change,
                    reconnect_seconds=self.reconnect_seconds,
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
