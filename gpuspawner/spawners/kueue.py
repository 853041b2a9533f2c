"""Waiting in a Kueue queue: where a server stands, how long it may wait, where it landed.

Design notes: docs/design/hub.md, "gpuspawner.spawners.kueue".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from ..policy import Allocation, CapacityPool
from ..policy.share import SliceDemand

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
QUEUED_LABEL = "gpuspawner.campus-gpu-hub.org/queued"
"""On a server that joined the queue without a GPU slice booked, until the hub books the
slice where it landed (then the label goes and the allocation annotation comes)."""
QUEUED_AT_ANNOTATION = "gpuspawner.campus-gpu-hub.org/queued-at"
"""When the hub queued the server (microseconds): breaks ties between pods created in the
same second, whose ``creationTimestamp`` is equal."""

# The conditions that mark a pod being stopped: Kueue's ``TerminationTarget`` (reason
# ``WorkloadEvictedDueTo<why>``: Preempted, PodsReadyTimeout, Deactivated, ClusterQueueStopped,
# ...; ``StoppedByKueue`` before Kueue 0.9) and the scheduler's ``DisruptionTarget``.
_STOP_CONDITIONS = ("TerminationTarget", "DisruptionTarget")
_PREEMPTED_REASONS = (
    "WorkloadEvictedDueToPreempted",
    "StoppedByKueue",
    "PreemptionByScheduler",
    "PreemptionByKubeScheduler",
)
_KUEUE_EVICTION = "WorkloadEvicted"
# Kueue's Workload conditions (kueue.x-k8s.io/v1beta2, the same in v1beta1).
_RESERVED, _FINISHED, _EVICTED = "QuotaReserved", "Finished", "Evicted"
# Evictions after which Kueue queues a Workload by the eviction's time, not its creation
# (``workload.Ordering.GetQueueOrderTimestamp``; the eviction-time requeuing is its default).
_REQUEUED_AT_EVICTION = ("PodsReadyTimeout", "AdmissionCheck")


def is_gated(pod: Mapping[str, Any]) -> bool:
    """True while the pod has scheduling gates (Kueue has not admitted it yet)."""
    return bool((pod.get("spec") or {}).get("schedulingGates"))


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


def owner_uid(workload: Mapping[str, Any]) -> str | None:
    """The uid of the object a Workload stands for (a pod, for a server), or None."""
    for owner in (workload.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("controller"):
            return owner.get("uid")
    return None


def _queued_since(workload: Mapping[str, Any]) -> str:
    """When the Workload joined the queue, as Kueue sorts it: its creation, or the time of
    an eviction after which Kueue queues it again from then."""
    evicted = _condition(workload, _EVICTED)
    if evicted is not None and evicted.get("reason") in _REQUEUED_AT_EVICTION:
        return evicted.get("lastTransitionTime") or ""
    return (workload.get("metadata") or {}).get("creationTimestamp") or ""


def waiting_workloads(
    workloads: Iterable[Mapping[str, Any]], queue: str
) -> list[Mapping[str, Any]]:
    """The Workloads waiting in LocalQueue ``queue``, first in line first.

    Waiting: no quota reserved, not finished, active, not being deleted. The order is
    Kueue's (its ClusterQueue's queue, for StrictFIFO and BestEffortFIFO alike): higher
    priority first, then the time it joined, then the Workload's uid, which is how Kueue
    breaks the tie between Workloads created in the same second.
    """
    waiting = [
        workload
        for workload in workloads
        if (workload.get("spec") or {}).get("queueName") == queue
        and (workload.get("spec") or {}).get("active", True) is not False
        and not (workload.get("metadata") or {}).get("deletionTimestamp")
        and _condition(workload, _RESERVED) is None
        and _condition(workload, _FINISHED) is None
    ]
    return sorted(
        waiting,
        key=lambda workload: (
            -int((workload.get("spec") or {}).get("priority") or 0),
            _queued_since(workload),
            workload["metadata"].get("uid") or "",
        ),
    )


def place_in_queue(
    workloads: Iterable[Mapping[str, Any]], queue: str, pod_uid: str
) -> tuple[int, int] | None:
    """The pod's position in ``queue`` and the number waiting, from the Workloads; None
    while its Workload is not waiting (not made yet, or admitted)."""
    line = [owner_uid(workload) for workload in waiting_workloads(workloads, queue)]
    if pod_uid not in line:
        return None
    return line.index(pod_uid) + 1, len(line)


def waiting_pods(pods: Iterable[Mapping[str, Any]], queue: str) -> list[Mapping[str, Any]]:
    """The gated pods of ``queue``, first in line first (creation time, then the hub's
    queued-at stamp, then name): the hub's estimate of Kueue's order when it may not read
    the Workloads."""
    waiting = [
        pod
        for pod in pods
        if ((pod.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL) == queue
        and is_gated(pod)
        and not pod["metadata"].get("deletionTimestamp")
    ]
    return sorted(
        waiting,
        key=lambda pod: (
            pod["metadata"].get("creationTimestamp") or "",
            (pod["metadata"].get("annotations") or {}).get(QUEUED_AT_ANNOTATION, ""),
            pod["metadata"]["name"],
        ),
    )


def expected_wait(
    position: int, session_ends: Iterable[datetime | None], now: datetime
) -> timedelta | None:
    """How long the server at ``position`` may wait: until the ``position``-th of the running
    GPU servers' sessions ends (each ending server frees the slice of the next in line).

    An estimate for a class of equal shares; None when fewer running servers have an end.
    """
    ends = sorted(end for end in session_ends if end is not None)
    if position < 1 or position > len(ends):
        return None
    return max(ends[position - 1] - now, timedelta(0))


def _duration(wait: timedelta) -> str:
    minutes = max(math.ceil(wait.total_seconds() / 60), 1)
    if minutes < 60:
        return f"about {minutes} minute{'s' if minutes != 1 else ''}"
    hours, rest = divmod(minutes, 60)
    text = f"about {hours} hour{'s' if hours != 1 else ''}"
    return text + (f" {rest} minute{'s' if rest != 1 else ''}" if rest else "")


def queue_line(position: int, total: int, wait: timedelta | None) -> str:
    """The spawn page's sentence for a server waiting in the GPU queue."""
    if wait is None:
        when = "no estimate of the wait yet (the servers ahead have no end time)"
    else:
        when = _duration(wait)
    return (
        f"Waiting in the GPU queue: position {position} of {total}, {when}. "
        "You can leave the queue by cancelling this start."
    )


def queue_timeout_sentence(seconds: float) -> str:
    """The spawn page's sentence when a server waited ``start_timeout`` without a GPU."""
    minutes = max(round(seconds / 60), 1)
    return (
        f"Your server waited {minutes} minute{'s' if minutes != 1 else ''} in the GPU queue "
        "without getting a GPU, so it left the queue. Try again later, or start a profile "
        "without a GPU."
    )


def place_on_node(pool: CapacityPool, allocation: Allocation, node: str) -> Allocation:
    """``allocation`` (the share, as rendered for the queue) moved to GPUs of ``node``, where
    the scheduler placed the admitted server: the fullest GPUs that still fit it, else the
    emptiest (the pool then warns of an overcommit, as for any restored slice)."""
    usage = pool.usage()
    on_node = [u for device_id, u in usage.items() if device_id.rsplit("/", 1)[0] == node]
    if not on_node:
        return allocation
    demand = SliceDemand(allocation.fraction, allocation.memory_mib, allocation.compute_min_pct)
    ranked = sorted(
        on_node,
        key=lambda u: (not u.fits(demand), -u.fraction if u.fits(demand) else u.fraction),
    )
    chosen = tuple(u.device.id for u in ranked[: max(len(allocation.device_ids), 1)])
    return replace(allocation, device_ids=chosen)


def preemption_sentence(pod: Mapping[str, Any]) -> str | None:
    """The student's sentence when the pod is being stopped before it started, by Kueue
    or the scheduler (None otherwise)."""
    for kind in _STOP_CONDITIONS:
        condition = _condition(pod, kind)
        if condition is None:
            continue
        reason = condition.get("reason") or ""
        if reason in _PREEMPTED_REASONS:
            return (
                "Your server was preempted before it started: the cluster's GPU queue gave "
                "its place to work with a higher priority. Start it again to rejoin the queue."
            )
        if reason.startswith(_KUEUE_EVICTION):
            why = (condition.get("message") or "").strip().rstrip(".")
            return (
                "Your server was stopped by the cluster's GPU queue before it started"
                + (f" ({why[:200]})" if why else "")
                + ". Start it again to rejoin the queue, or tell the hub admins if this "
                "happens again."
            )
    return None
