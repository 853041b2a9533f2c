"""The simulated default scheduler: binds pending pods to nodes through the API.

It schedules only pods whose ``spec.schedulerName`` is one of ``scheduler_names`` (pods for
HAMi, Volcano or another scheduler stay Pending unless their name is added). A pod that
fits nowhere gets PodScheduled=False/Unschedulable and a FailedScheduling warning, and is
retried whenever nodes change or pods finish. A placed pod is bound (pods/binding), gets a
Scheduled event, and its PersistentVolumeClaims are marked Bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from typing import Any

from .client import ClientError, Informer, KubeClient
from .events import scheduler_event
from .scheduling import is_terminal, place
from .timestamps import micro, rfc3339

log = logging.getLogger(__name__)

Object = dict[str, Any]
Key = tuple[str, str]


class Scheduler:
    def __init__(
        self, client: KubeClient, pods: Informer, nodes: Informer, scheduler_names: set[str]
    ) -> None:
        self.client = client
        self.pods = pods
        self.nodes = nodes
        self.scheduler_names = scheduler_names
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._queued: set[Key] = set()
        self._unschedulable: set[Key] = set()
        self._assumed: dict[Key, tuple[str, Object]] = {}
        self._failures: dict[Key, tuple[str, str, int]] = {}  # event name, message, count
        self._binding: set[asyncio.Task[None]] = set()

    def wants(self, pod: Object) -> bool:
        spec = pod.get("spec") or {}
        return (
            not spec.get("nodeName")
            and not pod["metadata"].get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
            and spec.get("schedulerName", "default-scheduler") in self.scheduler_names
            and not spec.get("schedulingGates")
        )

    def _enqueue(self, key: Key) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def retry_unschedulable(self) -> None:
        for key in sorted(self._unschedulable):
            self._enqueue(key)

    def on_pod(self, kind: str, pod: Object, old: Object | None) -> None:
        key = Informer.key(pod)
        if pod["spec"].get("nodeName") or kind == "DELETED":
            self._assumed.pop(key, None)
        if kind == "DELETED":
            self._unschedulable.discard(key)
            self._failures.pop(key, None)
            if pod["spec"].get("nodeName"):
                self.retry_unschedulable()
            return
        if is_terminal(pod) and not (old and is_terminal(old)) and pod["spec"].get("nodeName"):
            self.retry_unschedulable()
        if self.wants(pod):
            self._enqueue(key)

    def serve(self, scheduler_names: set[str]) -> None:
        """Schedule pods of these schedulerNames from now on (pending ones included)."""
        self.scheduler_names.clear()
        self.scheduler_names.update(scheduler_names)
        for key, pod in sorted(self.pods.cache.items()):
            if self.wants(pod):
                self._enqueue(key)

    def on_node(self, kind: str, node: Object, old: Object | None) -> None:
        self.retry_unschedulable()

    def on_claim(self, kind: str, claim: Object, old: Object | None) -> None:
        if kind == "ADDED":  # a pod may have been waiting for this claim
            self.retry_unschedulable()

    async def run(self) -> None:
        await self.pods.synced.wait()
        await self.nodes.synced.wait()
        try:
            while True:
                key = await self._queue.get()
                self._queued.discard(key)
                try:
                    await self._schedule(key)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("scheduler: scheduling %s/%s failed", *key)
        finally:
            for task in list(self._binding):
                task.cancel()
            await asyncio.gather(*self._binding, return_exceptions=True)

    def _pods_by_node(self) -> dict[str, list[Object]]:
        by_node: dict[str, list[Object]] = defaultdict(list)
        for key, pod in self.pods.cache.items():
            node = pod["spec"].get("nodeName")
            if node and not is_terminal(pod) and key not in self._assumed:
                by_node[node].append(pod)
        for node, pod in self._assumed.values():
            by_node[node].append(pod)
        return by_node

    async def _missing_claim(self, pod: Object) -> str | None:
        namespace = pod["metadata"]["namespace"]
        for volume in pod["spec"].get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                try:
                    await self.client.get(
                        f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}"
                    )
                except ClientError as error:
                    if error.status == 404:
                        return f'persistentvolumeclaim "{claim}" not found'
                    raise
        return None

    async def _schedule(self, key: Key) -> None:
        pod = self.pods.cache.get(key)
        if pod is None or not self.wants(pod) or key in self._assumed:
            return
        nodes = list(self.nodes.cache.values())
        missing = await self._missing_claim(pod)
        if missing:
            total = len(nodes)
            message = f"0/{total} nodes are available: {missing}. preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."
            await self._unschedulable_pod(key, pod, message)
            return
        placement = place(pod, nodes, self._pods_by_node())
        if placement.node is None:
            await self._unschedulable_pod(key, pod, placement.message)
            return
        # Like the real scheduler, assume the placement and bind asynchronously, so the
        # next pod is placed while this binding is on its way.
        self._assumed[key] = (placement.node, pod)
        self._unschedulable.discard(key)
        self._failures.pop(key, None)
        self._spawn(self._bind(key, pod, placement.node))

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._binding.add(task)
        task.add_done_callback(self._binding.discard)

    async def _bind(self, key: Key, pod: Object, node: str) -> None:
        namespace, name = key
        await self._bind_claims(pod)  # the VolumeBinding plugin's PreBind step
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            await self.client.create(f"/api/v1/namespaces/{namespace}/pods/{name}/binding", binding)
        except ClientError as error:
            self._assumed.pop(key, None)
            if error.status not in (404, 409):
                log.warning(
                    "scheduler: binding %s/%s to %s failed: %s", namespace, name, node, error
                )
                self._enqueue(key)
            return
        await self._record(
            pod, "Scheduled", f"Successfully assigned {namespace}/{name} to {node}", "Binding"
        )

    async def _unschedulable_pod(self, key: Key, pod: Object, message: str) -> None:
        self._unschedulable.add(key)
        namespace, name = key
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": rfc3339(),
        }
        current = next(
            (
                c
                for c in (pod.get("status") or {}).get("conditions") or []
                if c["type"] == "PodScheduled"
            ),
            None,
        )
        if current is None or current.get("message") != message:
            with contextlib.suppress(ClientError):
                await self.client.request(
                    "PATCH",
                    f"/api/v1/namespaces/{namespace}/pods/{name}/status",
                    body={"status": {"conditions": [condition]}},
                    content_type="application/strategic-merge-patch+json",
                )
        previous = self._failures.get(key)
        if previous and previous[1] == message:
            event_name, _, count = previous
            self._failures[key] = (event_name, message, count + 1)
            with contextlib.suppress(ClientError):
                await self.client.merge_patch(
                    f"/api/v1/namespaces/{namespace}/events/{event_name}",
                    {"series": {"count": count + 1, "lastObservedTime": micro()}},
                )
            return
        event = await self._record(pod, "FailedScheduling", message, "Scheduling", type="Warning")
        if event is not None:
            self._failures[key] = (event["metadata"]["name"], message, 1)

    async def _record(
        self, pod: Object, reason: str, message: str, action: str, type: str = "Normal"
    ) -> Object | None:
        namespace = pod["metadata"]["namespace"]
        try:
            return await self.client.create(
                f"/api/v1/namespaces/{namespace}/events",
                scheduler_event(pod, reason=reason, message=message, action=action, type=type),
            )
        except ClientError:
            return None

    async def _bind_claims(self, pod: Object) -> None:
        namespace = pod["metadata"]["namespace"]
        for volume in pod["spec"].get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim:
                continue
            path = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}"
            with contextlib.suppress(ClientError):
                pvc = await self.client.get(path)
                if (pvc.get("status") or {}).get("phase") == "Bound":
                    continue
                spec = pvc.get("spec") or {}
                await self.client.merge_patch(
                    path, {"spec": {"volumeName": f"pvc-{pvc['metadata']['uid']}"}}
                )
                await self.client.merge_patch(
                    path + "/status",
                    {
                        "status": {
                            "phase": "Bound",
                            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                            "capacity": {
                                "storage": (
                                    (spec.get("resources") or {}).get("requests") or {}
                                ).get("storage", "1Gi")
                            },
                        }
                    },
                )
