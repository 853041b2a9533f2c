"""Waiting in a KAI-scheduler queue: which servers wait, and in which order KAI takes them.

Design notes: docs/design/hub.md, "gpuspawner.spawners.kai_queue".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

QUEUE_LABEL = "kai.scheduler/queue"
POD_GROUP_ANNOTATION = "pod-group-name"
PRIORITY_LABEL = "priorityClassName"
KAI_PRIORITIES = {"inference": 125, "build": 100, "build-preemptible": 75, "train": 50}
"""The PriorityClasses KAI-scheduler's chart installs, by name, and their values."""
DEFAULT_PRIORITY = 50
"""KAI's priority for a PodGroup whose class it does not find (without a global default)."""


def kai_priority(class_name: str | None) -> int:
    """The priority KAI gives a PodGroup of PriorityClass ``class_name``, as far as the hub
    knows it (KAI's own classes; any other as KAI's default)."""
    return KAI_PRIORITIES.get(class_name or "", DEFAULT_PRIORITY)


def is_waiting(pod: Mapping[str, Any]) -> bool:
    """True while the pod waits for KAI: not bound to a node, not ended, not being deleted."""
    meta = pod.get("metadata") or {}
    return (
        not (pod.get("spec") or {}).get("nodeName")
        and not meta.get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    )


def _owner_uid(pod_group: Mapping[str, Any]) -> str | None:
    """The uid of the pod a PodGroup of a lone pod stands for (its owner), or None."""
    for owner in (pod_group.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("kind") == "Pod":
            return owner.get("uid")
    return None


def _has_resources(resources: Mapping[str, Any] | None) -> bool:
    return any(str(value) not in ("0", "0m", "") for value in (resources or {}).values())


def waiting_pod_groups(
    pod_groups: Iterable[Mapping[str, Any]],
    queue: str,
    pods: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Mapping[str, Any]]:
    """The PodGroups waiting in KAI queue ``queue``, first in line first.

    ``pods``: the pods the hub sees, by uid. A PodGroup of one of them waits while that pod
    does (:func:`is_waiting`); any other (a job's, another hub's) while its status, as
    KAI's pod group controller writes it, shows resources requested and none allocated.
    """
    pods = pods or {}
    waiting = []
    for group in pod_groups:
        meta = group.get("metadata") or {}
        if (group.get("spec") or {}).get("queue") != queue or meta.get("deletionTimestamp"):
            continue
        owner = _owner_uid(group)
        if owner is not None and owner in pods:
            if is_waiting(pods[owner]):
                waiting.append(group)
            continue
        status = ((group.get("status") or {}).get("resourcesStatus")) or {}
        if _has_resources(status.get("requested")) and not _has_resources(status.get("allocated")):
            waiting.append(group)
    return sorted(
        waiting,
        key=lambda group: (
            -kai_priority((group.get("spec") or {}).get("priorityClassName")),
            group["metadata"].get("creationTimestamp") or "",
            group["metadata"].get("name") or "",
        ),
    )


def place_in_kai_queue(
    pod_groups: Iterable[Mapping[str, Any]],
    queue: str,
    pod: Mapping[str, Any],
    pods: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[int, int] | None:
    """The pod's position in ``queue`` and the number waiting, from the PodGroups; None
    while its PodGroup is not waiting (not made yet, or its pod is bound)."""
    uid = (pod.get("metadata") or {}).get("uid")
    line = [_owner_uid(group) for group in waiting_pod_groups(pod_groups, queue, pods)]
    if uid not in line:
        return None
    return line.index(uid) + 1, len(line)


def waiting_kai_pods(pods: Iterable[Mapping[str, Any]], queue: str) -> list[Mapping[str, Any]]:
    """The pods waiting in KAI queue ``queue``, first in line first, as estimated from the
    pods: priority, creation time, then the name of the PodGroup KAI made for each."""
    waiting = [
        pod
        for pod in pods
        if ((pod.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL) == queue
        and (pod.get("spec") or {}).get("schedulerName") == "kai-scheduler"
        and is_waiting(pod)
    ]
    return sorted(
        waiting,
        key=lambda pod: (
            -kai_priority((pod["metadata"].get("labels") or {}).get(PRIORITY_LABEL)),
            pod["metadata"].get("creationTimestamp") or "",
            (pod["metadata"].get("annotations") or {}).get(POD_GROUP_ANNOTATION)
            or pod["metadata"]["name"],
        ),
    )
