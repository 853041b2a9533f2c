"""Why the cluster's job queue (Kueue) took a running job's GPU back, in its owner's words.

A Job handed to Kueue (``c.KubernetesExecutor.queue_name``) that Kueue evicts while it runs
is suspended (the Job controller then deletes its pod) and queued again: it runs again,
from the start, when the queue admits it anew. The Job itself only says it is suspended;
the why is on its Workload (the ``Evicted`` condition's reason, and for a preemption the
``Preempted`` condition, whose message names the preemptor's Workload by the uid of what
it stands for: ``JobUID: <uid>``), and who took the GPU is that Workload's owner.

:func:`eviction_sentence` is pure; :func:`read_eviction` reads the Workloads (``list`` on
``workloads.kueue.x-k8s.io``, in the job service's Role) and the preempting pod's labels.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .kube_client import KubeClient, KubeError

GROUP = "kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")  # Kueue 0.15 and later serve v1beta2, older ones v1beta1
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
# GPUSpawner's labels on a server's pod (gpuspawner.kubernetes.COURSE_LABEL; z2jh's
# component label), which say whose server took the GPU.
COURSE_LABEL = "gpuspawner.campus-gpu-hub.org/course"
SERVER_COMPONENT = "singleuser-server"
JOB_MANAGER_LABEL = "app.kubernetes.io/managed-by"

# Kueue's reasons for an eviction (the Workload's ``Evicted`` condition), after "because".
EVICTIONS = {
    "PodsReadyTimeout": "its pod did not become ready within the time the queue allows",
    "ClusterQueueStopped": "the hub admins stopped the queue",
    "LocalQueueStopped": "the hub admins stopped the queue",
    "Deactivated": "the hub admins took it out of the queue",
    "InactiveWorkload": "the hub admins took it out of the queue",
    "NodeFailures": "its node failed",
    "AdmissionCheck": "a check of the queue withdrew its admission",
}
# Kueue's reasons for a preemption (the ``Preempted`` condition), after the preemptor.
PREEMPTIONS = {
    "InClusterQueue": "which comes first in the queue (a higher priority)",
    "InCohortReclamation": "whose queue took back GPUs it had lent to this job's queue",
    "InCohortReclaimWhileBorrowing": "which comes first (a higher priority)",
    "InCohortFairSharing": "to share the GPUs fairly between the queues",
}


@dataclass(frozen=True)
class Eviction:
    """What Kueue wrote on the job's Workload, and what took its place (None: unknown)."""

    reason: str
    """The ``Evicted`` condition's reason: ``Preempted``, ``PodsReadyTimeout``..."""
    message: str
    preemption: str | None = None
    """The ``Preempted`` condition's reason: ``InClusterQueue``..."""
    preemptor: str | None = None
    """Who took the GPU, in words: "a server of the class ml101", "another job"."""
    requeued: bool = True
    """False when Kueue will not admit it again by itself (taken out of the queue)."""


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


def eviction_of(workload: Mapping[str, Any]) -> Eviction | None:
    """The eviction Kueue wrote on ``workload``, without its preemptor; None if none."""
    evicted = _condition(workload, "Evicted")
    if evicted is None:
        return None
    preempted = _condition(workload, "Preempted")
    return Eviction(
        reason=evicted.get("reason") or "",
        message=(evicted.get("message") or "").strip(),
        preemption=preempted.get("reason") if preempted else None,
        requeued=(workload.get("spec") or {}).get("active", True) is not False,
    )


def preemptor_uid(message: str) -> str | None:
    """The uid of what the preempting Workload stands for, from Kueue's message
    ("Preempted to accommodate a workload (UID: ..., JobUID: <uid>) due to ...")."""
    found = re.search(r"JobUID: ([0-9a-f-]{36})", message)
    return found[1] if found else None


def preemptor_words(kind: str, labels: Mapping[str, str]) -> str:
    """Who took the GPU, from the preempting pod's or Job's kind and labels."""
    if labels.get(COURSE_LABEL):
        return f"a server of the class {labels[COURSE_LABEL]}"
    if labels.get("component") == SERVER_COMPONENT:
        return "a user's server"
    if labels.get(JOB_MANAGER_LABEL) == "jupyter-to-job" or kind == "Job":
        return "another job"
    return "other work"


def eviction_words(eviction: Eviction | None) -> str:
    """What happened, as a clause: "the cluster's GPU queue gave its GPU to a server of the
    class ml101, which comes first in the queue (a higher priority)"."""
    if eviction is not None and eviction.reason == "Preempted":
        who = eviction.preemptor or "other work"
        why = PREEMPTIONS.get(eviction.preemption or "", "which comes first")
        return f"the cluster's GPU queue gave its GPU to {who}, {why}"
    if eviction is not None:
        why = EVICTIONS.get(eviction.reason) or eviction.message.rstrip(".") or eviction.reason
        return f"the cluster's GPU queue stopped it because {why}"
    return "the cluster's GPU queue took its GPU back for work that comes first"


def eviction_sentence(eviction: Eviction | None, queue: str, checkpoint: bool) -> str:
    """The status message of a job whose GPU the queue took back while it ran."""
    preempted = eviction is None or eviction.reason == "Preempted"
    what = f"The job was {'preempted' if preempted else 'stopped'}: {eviction_words(eviction)}."
    if eviction is not None and not eviction.requeued:
        return (
            f"{what} It is no longer in the queue {queue}, so it will not run again unless "
            "the hub admins put it back; the log keeps what it did until then. Stop it, and "
            "run it again later."
        )
    again = (
        "runs again, with its checkpoint folder, when a GPU is free"
        if checkpoint
        else "runs again from the start when a GPU is free"
    )
    return (
        f"{what} It waits in the queue {queue} and {again}; the log keeps what it did until then."
    )


async def _list(kube: KubeClient, path: str, **query: str) -> list[dict[str, Any]]:
    listed = await kube.request("GET", path, query=list(query.items()))
    return list(listed.get("items") or [])


async def read_eviction(
    kube: KubeClient, namespace: str, job: Mapping[str, Any]
) -> Eviction | None:
    """The eviction on the Workload of Kubernetes Job ``job``, with its preemptor in words;
    None when Kueue wrote none. Raises :class:`KubeError` when the Workloads cannot be read
    (a 403: the job service's Role lacks ``list`` on them)."""
    uid = job["metadata"]["uid"]
    for version in VERSIONS:
        path = f"/apis/{GROUP}/{version}/namespaces/{namespace}/workloads"
        try:
            mine = await _list(kube, path, labelSelector=f"{JOB_UID_LABEL}={uid}")
        except KubeError as error:
            if error.status == 404 and version != VERSIONS[-1]:
                continue  # an older Kueue
            raise
        break
    eviction = next((e for e in map(eviction_of, mine) if e is not None), None)
    if eviction is None or eviction.reason != "Preempted":
        return eviction
    preemptor = await _preemptor(kube, namespace, path, eviction.message)
    return Eviction(
        eviction.reason, eviction.message, eviction.preemption, preemptor, eviction.requeued
    )


async def _preemptor(kube: KubeClient, namespace: str, workloads: str, message: str) -> str | None:
    """The preempting Workload's owner in words (its pod's or Job's labels), or None."""
    uid = preemptor_uid(message)
    if uid is None:
        return None
    theirs = await _list(kube, workloads, labelSelector=f"{JOB_UID_LABEL}={uid}")
    owners = [o for w in theirs for o in w["metadata"].get("ownerReferences") or []]
    owner = next((o for o in owners if o.get("uid") == uid), None)
    if owner is None:
        return None
    labels: Mapping[str, str] = {}
    if owner.get("kind") == "Pod":
        pods = await _list(
            kube,
            f"/api/v1/namespaces/{namespace}/pods",
            fieldSelector=f"metadata.name={owner['name']}",
        )
        labels = (pods[0]["metadata"].get("labels") or {}) if pods else {}
    return preemptor_words(owner.get("kind") or "", labels)


async def read_eviction_or_warn(
    kube: KubeClient, namespace: str, job: Mapping[str, Any], log: Any, job_id: str
) -> Eviction | None:
    """:func:`read_eviction`, or None with a warning to the hub admins when the Workloads
    cannot be read."""
    try:
        return await read_eviction(kube, namespace, job)
    except KubeError as error:
        log.warning(
            "Job %s: the job service cannot read why the queue took the job back (%s). "
            "Hub admins: apply hub_config/kubernetes/job-service.yaml (its Role grants "
            "list on workloads.kueue.x-k8s.io).",
            job_id,
            error,
        )
        return None
