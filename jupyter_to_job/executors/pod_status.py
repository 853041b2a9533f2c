"""Reading a Job's and its pod's status dicts: finished or not, why a pod has not started.

Pure functions over the objects as the API returns them (camelCase dicts).
"""

from __future__ import annotations

from typing import Any

from ..k8s_objects import CONTAINER_NAME

# Container waiting reasons after which the container will not start by itself.
START_FAILURES = frozenset(
    {
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)


def _condition(job: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for condition in ((job or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


def job_finished(job: dict[str, Any] | None) -> bool:
    """True when the Job's controller has marked it Complete or Failed."""
    return bool(_condition(job, "Complete") or _condition(job, "Failed"))


def job_failure_reason(job: dict[str, Any] | None) -> str | None:
    """``DeadlineExceeded``, ``BackoffLimitExceeded``... for a failing or failed Job."""
    condition = _condition(job, "Failed") or _condition(job, "FailureTarget")
    return condition.get("reason") if condition else None


def container_state(pod: dict[str, Any]) -> dict[str, Any]:
    """The notebook container's ``state`` (``waiting``, ``running`` or ``terminated``)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == CONTAINER_NAME:
            return status.get("state") or {}
    return {}


def pending_reason(pod: dict[str, Any]) -> tuple[str, str] | None:
    """Why a pod has not started: ``("unschedulable", message)``, ``("start", message)``
    for a container that cannot start (bad image...), or None (it is on its way)."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            return "unschedulable", (condition.get("message") or "no node fits").strip()
    waiting = container_state(pod).get("waiting") or {}
    if waiting.get("reason") in START_FAILURES:
        detail = (waiting.get("message") or "").strip()
        return "start", f"{waiting['reason']}: {detail}" if detail else waiting["reason"]
    return None


# Why the cluster took a pod away (the reason of its DisruptionTarget condition), in the
# words its owner reads after "The job was preempted: ".
DISRUPTIONS = {
    "PreemptionByScheduler": "the cluster gave its place to a pod of higher priority",
    "PreemptionByKubeScheduler": "the cluster gave its place to a pod of higher priority",
    "EvictionByEvictionAPI": "its pod was evicted (its node was drained, or an admin evicted it)",
    "DeletionByTaintManager": "its node was lost or taken out of service",
    "DeletionByPodGC": "its node is gone",
    "TerminationByKubelet": "its node ran short of resources or shut down",
    "StoppedByKueue": "the cluster's job queue (Kueue) took its place back",
}
NODE_LOSS = frozenset({"DeletionByTaintManager", "DeletionByPodGC", "TerminationByKubelet"})


def disruption(pod: dict[str, Any]) -> tuple[str, str] | None:
    """``(reason, what happened in words)`` when the cluster marked the pod for disruption
    (condition ``DisruptionTarget``: preemption, eviction, node loss; or Kueue's
    ``TerminationTarget``), else None."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        kind = condition.get("type")
        if kind in ("DisruptionTarget", "TerminationTarget") and condition.get("status") == "True":
            reason = condition.get("reason") or "Disrupted"
            words = DISRUPTIONS.get(reason)
            if words is None:
                detail = (condition.get("message") or "").strip().rstrip(".")
                words = f"the cluster took its pod away ({reason}{': ' + detail if detail else ''})"
            return reason, words
    return None
