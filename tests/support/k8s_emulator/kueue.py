"""A small Kueue-like admission controller: queue-name pods gated, admitted by quota, FIFO.

Kueue's pod integration, reduced to what a spawner observes through the API:

- its webhook gives every pod labelled ``kueue.x-k8s.io/queue-name`` (once the controller
  is installed, i.e. a test configured a queue) the scheduling gate
  ``kueue.x-k8s.io/admission`` and the label ``kueue.x-k8s.io/managed: "true"``;
- a ClusterQueue-like quota per queue name (``{"nvidia.com/gpu": 40}``) admits gated pods
  in creation order (StrictFIFO: the first that does not fit holds back the ones behind
  it) by removing the gate, and records a ``Started`` event "Admitted by clusterQueue X"
  on the pod, as Kueue's job framework does;
- a pod's quota is held from admission until it has ended or is gone (a pod being
  deleted still holds it, as without Kueue's fast quota release);
- :meth:`KueueController.preempt` does what Kueue does to a preempted plain pod: a
  ``TerminationTarget`` condition (reason ``StoppedByKueue``) and a delete.

Pods of a queue that is not configured stay gated, as with a missing LocalQueue. Not
emulated: Workload objects, cohorts and borrowing, priorities, ResourceFlavors and their
node labels, the visibility API.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .client import ClientError, KubeClient
from .events import recorded_event
from .quantities import parse_quantity
from .scheduling import is_terminal, pod_requests
from .timestamps import rfc3339

log = logging.getLogger(__name__)

Object = dict[str, Any]
Key = tuple[str, str]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
PREEMPTED_MESSAGE = "Preempted to accommodate a higher priority Workload"


@dataclass
class QueueQuota:
    """A LocalQueue name and the quota of its ClusterQueue."""

    cluster_queue: str
    quota: dict[str, Fraction]


class KueueController:
    def __init__(self, client: KubeClient, pods: Any) -> None:
        self.client = client
        self.pods = pods  # the emulator's pod informer
        self.queues: dict[str, QueueQuota] = {}
        self._order = itertools.count()
        self._created: dict[str, int] = {}  # pod uid -> creation order
        self._admitted: set[str] = set()  # uids admitted here (before the watch shows it)
        self._wakeup = asyncio.Event()

    @property
    def installed(self) -> bool:
        return bool(self.queues)

    def set_quota(
        self, queue: str, quota: dict[str, Any], cluster_queue: str | None = None
    ) -> None:
        """Configure (or change) ``queue``'s quota, such as ``{"nvidia.com/gpu": 40}``."""
        self.queues[queue] = QueueQuota(
            cluster_queue or f"{queue}-cluster-queue",
            {name: parse_quantity(str(value)) for name, value in quota.items()},
        )
        self._wakeup.set()

    # --- the webhook ----------------------------------------------------------------------

    def gate_on_create(self, kind: str, obj: Object) -> None:
        """Mutating admission of a new pod: gate it when it names a queue."""
        if kind != "Pod" or not self.installed:
            return
        meta = obj["metadata"]
        if not (meta.get("labels") or {}).get(QUEUE_LABEL):
            return
        meta["labels"][MANAGED_LABEL] = "true"
        gates = obj.setdefault("spec", {}).setdefault("schedulingGates", [])
        if not any(g.get("name") == ADMISSION_GATE for g in gates):
            gates.append({"name": ADMISSION_GATE})

    # --- the controller -------------------------------------------------------------------

    def on_pod(self, kind: str, pod: Object, old: Object | None) -> None:
        uid = pod["metadata"].get("uid", "")
        if kind == "ADDED" and uid not in self._created:
            self._created[uid] = next(self._order)
        if kind == "DELETED":
            self._created.pop(uid, None)
            self._admitted.discard(uid)
        if self.installed and (pod["metadata"].get("labels") or {}).get(QUEUE_LABEL):
            self._wakeup.set()

    async def run(self) -> None:
        await self.pods.synced.wait()
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                await self._admit()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("kueue: admission failed")

    @staticmethod
    def _gated(pod: Object) -> bool:
        gates = (pod.get("spec") or {}).get("schedulingGates") or []
        return any(g.get("name") == ADMISSION_GATE for g in gates)

    def _holds_quota(self, pod: Object) -> bool:
        uid = pod["metadata"].get("uid", "")
        # Held until the pod has ended or is gone, not merely being deleted (Kueue's default,
        # without the PodIntegrationFastQuotaRelease gate): the next pod then fits the node.
        return not is_terminal(pod) and (uid in self._admitted or not self._gated(pod))

    def _demand(self, pod: Object, quota: QueueQuota) -> dict[str, Fraction]:
        requests = pod_requests(pod)
        return {name: requests.get(name, Fraction(0)) for name in quota.quota}

    async def _admit(self) -> None:
        by_queue: dict[str, list[Object]] = {}
        for pod in list(self.pods.cache.values()):
            queue = (pod["metadata"].get("labels") or {}).get(QUEUE_LABEL)
            if queue:
                by_queue.setdefault(queue, []).append(pod)
        for queue, pods in by_queue.items():
            quota = self.queues.get(queue)
            if quota is None:
                continue
            used = {name: Fraction(0) for name in quota.quota}
            for pod in pods:
                if self._holds_quota(pod):
                    for name, amount in self._demand(pod, quota).items():
                        used[name] += amount
            waiting = sorted(
                (
                    p
                    for p in pods
                    if self._gated(p)
                    and p["metadata"].get("uid") not in self._admitted
                    and not p["metadata"].get("deletionTimestamp")
                    and not is_terminal(p)
                ),
                key=lambda p: (
                    p["metadata"].get("creationTimestamp") or "",
                    self._created.get(p["metadata"].get("uid", ""), 0),
                ),
            )
            for pod in waiting:
                demand = self._demand(pod, quota)
                if any(used[name] + demand[name] > quota.quota[name] for name in demand):
                    break  # StrictFIFO: the head of the queue waits, and so do the others
                for name, amount in demand.items():
                    used[name] += amount
                await self._ungate(pod, quota)

    async def _ungate(self, pod: Object, quota: QueueQuota) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        self._admitted.add(uid)
        remaining = [
            g for g in (pod["spec"].get("schedulingGates") or []) if g.get("name") != ADMISSION_GATE
        ]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        try:
            await self.client.merge_patch(
                path, {"metadata": {"uid": uid}, "spec": {"schedulingGates": remaining or None}}
            )
        except ClientError as error:
            self._admitted.discard(uid)
            if error.status not in (404, 409):
                log.warning("kueue: admitting %s failed: %s", meta["name"], error)
            return
        with contextlib.suppress(ClientError):
            await self.client.create(
                f"/api/v1/namespaces/{meta['namespace']}/events",
                recorded_event(
                    pod,
                    component="kueue-admission",
                    reason="Started",
                    message=f"Admitted by clusterQueue {quota.cluster_queue}",
                ),
            )

    async def preempt(self, namespace: str, name: str, message: str = PREEMPTED_MESSAGE) -> None:
        """Stop a pod as Kueue stops a preempted plain pod: condition, then delete."""
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        condition = {
            "type": "TerminationTarget",
            "status": "True",
            "reason": "StoppedByKueue",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": rfc3339(),
        }
        await self.client.request(
            "PATCH",
            path + "/status",
            body={"status": {"conditions": [condition]}},
            content_type="application/strategic-merge-patch+json",
        )
        await self.client.delete(path)
