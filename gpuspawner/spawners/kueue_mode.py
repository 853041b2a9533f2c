"""GPUSpawner's queue mode: a GPU server the pool has no room for waits in the cluster's queue.

Design notes: docs/design/hub.md, "gpuspawner.spawners.kueue_mode".
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from jupyterhub.spawner import SpawnException
from kubernetes_asyncio.client import ApiClient, CustomObjectsApi
from kubernetes_asyncio.client.rest import ApiException
from traitlets import Unicode
from traitlets.config import LoggingConfigurable

from ..core.allocation_record import ALLOCATION_ANNOTATION, encode_allocation
from ..core.grant import Grant
from ..policy import Allocation, CapacityPool
from .kai_queue import QUEUE_LABEL as KAI_QUEUE_LABEL
from .kai_queue import is_waiting, place_in_kai_queue, waiting_kai_pods
from .kueue import (
    QUEUE_LABEL,
    QUEUED_AT_ANNOTATION,
    QUEUED_LABEL,
    expected_wait,
    is_gated,
    place_in_queue,
    place_on_node,
    queue_line,
    waiting_pods,
)

GROUP = "kueue.x-k8s.io"
# The newest first: Kueue 0.15 and later serve v1beta2, older ones v1beta1 only.
VERSIONS = ("v1beta2", "v1beta1")
KAI_GROUP = "scheduling.run.ai"
KAI_VERSIONS = ("v2alpha2",)
# How often a start waiting in the Kueue queue looks at its place in line.
QUEUE_POLL_SECONDS = 0.5

log = logging.getLogger(__name__)


def unrecorded_slice(pod_name: str, status: int | None, reason: str | None) -> str:
    """The hub admins' sentence when a queued server's GPU slice could not be written on its
    pod: the pool holds it until the hub restarts, and the rebuilt pool would not."""
    loss = (
        "The hub holds the slice until it restarts, then forgets it, and may give the same "
        "slice to another server."
    )
    if status == 403:
        return (
            f"The GPU slice of {pod_name} is not recorded on its pod: the hub's service "
            f"account may not patch pods (403 Forbidden). {loss} Hub admins: apply "
            "hub_config/kubernetes/rbac.yaml (its Role campus-gpu-hub-pods grants patch on "
            "pods)."
        )
    return (
        f"The GPU slice of {pod_name} is not recorded on its pod (the API server answered "
        f"{status} {reason}). {loss} Hub admins: once the API server answers again, stop "
        "and start that server."
    )


def unreadable_workloads(namespace: str, status: int | None, reason: str | None) -> str:
    """The hub admins' sentence when the hub may not read Kueue's Workloads."""
    if status == 403:
        cause = (
            "the hub's service account may not list them (403 Forbidden). Hub admins: "
            "apply hub_config/kubernetes/rbac.yaml (its Role campus-gpu-hub-kueue grants "
            "list on workloads.kueue.x-k8s.io)."
        )
    elif status == 404:
        cause = "the cluster does not serve Kueue's API (is Kueue installed?)."
    else:
        cause = f"the API server answered {status} {reason}."
    return (
        f"The hub cannot read Kueue's Workloads in {namespace}: {cause} Until it can, the "
        "places in the GPU queue shown on the spawn page are estimated from the pods, and "
        "servers that joined in the same second may be admitted in another order."
    )


def unreadable_pod_groups(namespace: str, status: int | None, reason: str | None) -> str:
    """The hub admins' sentence when the hub may not read KAI-scheduler's PodGroups."""
    if status == 403:
        cause = (
            "the hub's service account may not list them (403 Forbidden). Hub admins: "
            "apply hub_config/kubernetes/rbac.yaml (its Role campus-gpu-hub-kai grants "
            "list on podgroups.scheduling.run.ai)."
        )
    elif status == 404:
        cause = "the cluster does not serve KAI-scheduler's API (is KAI-scheduler installed?)."
    else:
        cause = f"the API server answered {status} {reason}."
    return (
        f"The hub cannot read KAI-scheduler's PodGroups in {namespace}: {cause} Until it can, "
        "the places in the GPU queue shown on the spawn page are estimated from the pods, "
        "and servers that joined within the same second or two may be placed in another "
        "order."
    )


class QueueListing:
    """The objects that stand for queued work in one namespace, read again when older than
    ``max_age`` seconds: Kueue's Workloads, or KAI-scheduler's PodGroups (``group``,
    ``versions``, ``plural`` and the sentence when they are ``unreadable``)."""

    def __init__(
        self,
        namespace: str,
        max_age: float,
        *,
        group: str = GROUP,
        versions: tuple[str, ...] = VERSIONS,
        plural: str = "workloads",
        unreadable: Callable[[str, int | None, str | None], str] = unreadable_workloads,
    ) -> None:
        self.namespace = namespace
        self.max_age = max_age
        self.group, self.versions, self.plural = group, versions, plural
        self.unreadable = unreadable
        self.items: list[dict[str, Any]] | None = None
        """The latest listing; None until one was read (or while they cannot be)."""
        self.read_at = 0.0
        self.version: str | None = None
        self.refused: int | None = None
        self.lock = asyncio.Lock()

    async def refresh(self, api_client: ApiClient, timeout: float | None = None) -> None:
        """Read the Workloads again unless the listing is younger than ``max_age``."""
        async with self.lock:
            if time.monotonic() - self.read_at < self.max_age:
                return
            self.read_at = time.monotonic()
            custom = CustomObjectsApi(api_client)
            failure: ApiException | None = None
            for version in [self.version] if self.version else self.versions:
                try:
                    response = await custom.list_namespaced_custom_object(
                        self.group,
                        version,
                        self.namespace,
                        self.plural,
                        _request_timeout=timeout,
                        _preload_content=False,
                    )
                    if not response.ok:
                        raise ApiException(status=response.status, reason=response.reason)
                    self.items = json.loads(await response.read())["items"]
                except ApiException as error:
                    failure = error
                    if error.status == 404:
                        continue  # an older Kueue: its earlier version
                    break
                except Exception as error:  # the API server is away: keep the last listing
                    log.debug("Reading %s failed: %s", self.plural, error)
                    return
                self.version, self.refused = version, None
                return
            self.items = None
            if failure is not None and failure.status != self.refused:
                self.refused = failure.status
                log.warning("%s", self.unreadable(self.namespace, failure.status, failure.reason))


class KueueMode(LoggingConfigurable):
    """GPUSpawner's queue mode, on Kueue or KAI-scheduler (a part of
    :class:`~gpuspawner.spawners.kubernetes.GPUSpawner`, which provides the pool, the admission, the
    pod reflector and the API client)."""

    kueue_queue_name = Unicode(
        "",
        config=True,
        help="""
        The Kueue LocalQueue of GPU servers, on a cluster that runs Kueue with its ``pod``
        integration enabled for this namespace. Empty (the default): no queue, and a start
        the GPUs have no room for is refused.

        When set, every GPU server's pod carries the label ``kueue.x-k8s.io/queue-name``
        and Kueue admits it (its webhook gates the pod until its ClusterQueue's quota has
        room). When the hub's pool says all GPUs are taken (or others are already waiting),
        the server is not refused: it joins the queue without a GPU slice booked, the
        progress page shows "Waiting in the GPU queue: position N of M" with an expected
        wait (from the running servers' session ends), and the student leaves the queue
        by cancelling the start. The places are read from Kueue's Workloads, in the order
        Kueue admits them (the hub needs ``list`` on ``workloads.kueue.x-k8s.io``:
        hub_config/kubernetes/rbac.yaml; without it they are estimated from the pods).
        Once Kueue admits it, the slice it holds is recorded on the GPU of the node it
        lands on. Refusals that waiting cannot cure (not enrolled, class closed, seats
        reserved for another class, the per-person limit) stay refusals. A server Kueue
        preempts before it started ends with a sentence saying so.

        The ClusterQueue's quota judges how many servers run: give it the capacity the
        hub sees (10 GPUs shared four ways by time-slicing: ``nvidia.com/gpu: 40``), and
        set ``start_timeout`` to the longest wait a student may spend in the queue. Give
        "Run as Job" a LocalQueue of the same ClusterQueue
        (``c.KubernetesExecutor.queue_name``), and the servers a higher PriorityClass
        (``c.KubeSpawner.priority_class_name``), so that a class's servers come first.
        hub_config/kubernetes/README.md ("Kueue") shows the objects an admin creates.

        Leave it empty on a cluster whose GPU pods KAI-scheduler schedules
        (``c.GPUAdmission.sharing_backend = "kai"``): the servers wait the same way in
        KAI's queues, each unbound until its KAI queue's quota or limit and a GPU have room,
        with its place read from KAI's PodGroups (``list`` on
        ``podgroups.scheduling.run.ai``: rbac.yaml's Role campus-gpu-hub-kai).

        Example::

            c.GPUSpawner.kueue_queue_name = "gpu-servers"
            c.GPUSpawner.start_timeout = 3600
        """,
    )

    # Per start: "deciding" until admission decided, "queue" for a pod that goes through
    # the queue, "off" otherwise. A server that joined the queue without a slice keeps the
    # share as rendered here until it lands on a node.
    _queue_state = "off"
    _queued_allocation: Allocation | None = None
    _queue_marks: tuple[dict[str, str], dict[str, str]] | None = None
    """The labels and annotation of a server that joined the queue, for its pod."""

    @property
    def kai_queueing(self) -> bool:
        """True when GPU servers wait in KAI-scheduler's queues (the ``kai`` sharing back
        end) rather than Kueue's."""
        return not self.kueue_queue_name and self.admission.sharing_backend == "kai"

    @property
    def queueing(self) -> bool:
        """True when a GPU server the pool has no room for waits in the cluster's queue."""
        return bool(self.kueue_queue_name) or self.kai_queueing

    @property
    def gpu_queue_name(self) -> str:
        """The queue this start's server waits in: Kueue's LocalQueue, or its KAI queue."""
        if self.kueue_queue_name:
            return str(self.kueue_queue_name)
        plan = getattr(self, "_plan", None)
        return str(plan.labels.get(KAI_QUEUE_LABEL, "")) if plan is not None else ""

    def waiting_in_queue(self, pod: dict) -> bool:
        """True while ``pod`` waits in the queue: gated by Kueue, or not yet bound by KAI."""
        if self.kai_queueing:
            return is_waiting(pod)
        return is_gated(pod)

    def _decide_or_queue(self, others_waiting: bool) -> Grant:
        """The grant of this start; in queue mode a GPU start the pool has no room for (or
        that would pass others already waiting) joins the queue instead of being refused."""
        if not self.queueing:
            return self.decide_start()
        try:
            grant = self.decide_start()
        except SpawnException as error:
            if error.reason != "full":
                raise
            return self._queued_grant(error.message)
        if grant.allocation is None:
            self._queue_state = "off"  # a profile without a GPU does not queue
            return grant
        if others_waiting:
            self.release_allocation()
            return self._queued_grant("others are waiting")
        self._queue_state = "queue"
        return grant

    def _queued_grant(self, why: str) -> Grant:
        """The grant of a server that waits in the queue: its share rendered as on an idle
        cluster, with no slice booked in the pool and no node chosen (the queue and the
        scheduler choose; :meth:`_record_landing` books the slice where it lands)."""
        grant = self.ask_admission(CapacityPool(self.capacity_pool.devices))
        queue = self.kueue_queue_name or (
            grant.plan.labels.get(KAI_QUEUE_LABEL) if grant.plan else ""
        )
        self.log.info("Queueing %s in %s: %s", self.pod_name, queue, why)
        self._queued_allocation = grant.allocation
        grant = replace(grant, allocation=None, node=None)
        self._grant, self._allocation, self._profile_id = grant, None, grant.subject
        self._queue_state = "queue"
        return grant

    def _join_queue(self) -> None:
        """Label the pod for Kueue (a KAI pod names its queue already) and, without a slice
        booked, as queued; stamp when it joined (to order pods created in the same second)."""
        labels = {QUEUE_LABEL: self.kueue_queue_name} if self.kueue_queue_name else {}
        if self._queued_allocation is not None:
            labels[QUEUED_LABEL] = "true"
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self._queue_marks = (labels, {QUEUED_AT_ANNOTATION: stamp})

    def _queue_listing(self) -> QueueListing:
        inventory = self._inventory
        if self.kai_queueing:
            if inventory.pod_groups is None:
                inventory.pod_groups = QueueListing(
                    self.namespace,
                    QUEUE_POLL_SECONDS,
                    group=KAI_GROUP,
                    versions=KAI_VERSIONS,
                    plural="podgroups",
                    unreadable=unreadable_pod_groups,
                )
            return inventory.pod_groups
        if inventory.workloads is None:
            inventory.workloads = QueueListing(self.namespace, QUEUE_POLL_SECONDS)
        return inventory.workloads

    async def read_queue(self) -> None:
        """Read the queue's Workloads (or KAI's PodGroups) again, unless another waiting
        server just did."""
        await self._queue_listing().refresh(self.api.api_client, self.k8s_api_request_timeout)

    def queue_place(self) -> tuple[int, int] | None:
        """This server's position in the queue and the queue's length, while it waits.

        From Kueue's Workloads or KAI's PodGroups (as :meth:`read_queue` last read them), in
        the order the queue admits them; estimated from the pods when the hub may not read
        those.
        """
        reflector = getattr(self, "pod_reflector", None)
        queue = self.gpu_queue_name
        if reflector is None or not queue:
            return None
        listed = self._queue_listing().items
        if listed is not None:
            pod = self._current_pod()
            if pod is None or not self.waiting_in_queue(pod):
                return None
            if self.kai_queueing:
                pods = {p["metadata"]["uid"]: p for p in list(reflector.pods.values())}
                return place_in_kai_queue(listed, queue, pod, pods)
            return place_in_queue(listed, queue, pod["metadata"]["uid"])
        pods = list(reflector.pods.values())
        waiting = waiting_kai_pods(pods, queue) if self.kai_queueing else waiting_pods(pods, queue)
        names = [pod["metadata"]["name"] for pod in waiting]
        if self.pod_name not in names:
            return None
        return names.index(self.pod_name) + 1, len(names)

    def queue_message(self) -> str | None:
        """The progress line while the server waits: its position, the queue's length and
        the expected wait ("Waiting in the GPU queue: position N of M, about X minutes").

        The wait is estimated from the session ends of the GPU servers running now (the
        N-th to end frees the N-th place); none when they have no end (staff servers).
        """
        place = self.queue_place()
        if place is None:
            return None
        position, total = place
        ends = [
            allocation.session_end
            for allocation in self.capacity_pool.allocations.values()
            if allocation.key.startswith("server:")
        ]
        return queue_line(position, total, expected_wait(position, ends, self.now()))

    async def _record_landing(self, pod: dict) -> None:
        """A server admitted from the queue is on a node: book its slice on that node's GPU
        in the pool, and record it on the pod, as a directly granted server's is."""
        queued, self._queued_allocation = self._queued_allocation, None
        node = (pod.get("spec") or {}).get("nodeName")
        if queued is None or not node:
            return
        with self.capacity_transaction() as pool:
            allocation = place_on_node(pool, queued, node)
            for warning in pool.restore(allocation):
                self.log.warning("Server admitted from the GPU queue: %s", warning)
        self._allocation = allocation
        if self._grant is not None:
            self._grant = replace(self._grant, allocation=allocation, node=node)
        try:
            await self.api.patch_namespaced_pod(
                self.pod_name,
                self.namespace,
                {
                    "metadata": {
                        "labels": {QUEUED_LABEL: None},
                        "annotations": {ALLOCATION_ANNOTATION: encode_allocation(allocation)},
                    }
                },
                _content_type="application/merge-patch+json",
                _request_timeout=self.k8s_api_request_timeout,
            )
        except ApiException as error:  # the pool in memory has it; a restart would not
            self.log.error("%s", unrecorded_slice(self.pod_name, error.status, error.reason))
