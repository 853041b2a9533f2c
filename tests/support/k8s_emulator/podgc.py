"""The simulated pod garbage collector: the part of it that unscheduled pods need.

A pod deleted before it was bound to a node has no kubelet to end it; while a finalizer
holds it (a Job's ``batch.kubernetes.io/job-tracking``) it would stay Pending for ever. The
real PodGC's ``gcUnscheduledTerminating`` marks such a pod Failed and deletes it at once;
so does this, through the API, as soon as it sees one (the real one looks every 20 s).
Orphaned pods (bound to a node that is gone) are not collected here.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from .client import ClientError, KubeClient

Object = dict[str, Any]


class PodGarbageCollector:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._tasks: set[asyncio.Task[None]] = set()
        self._done: set[str] = set()

    def on_pod(self, kind: str, pod: Object, old: Object | None) -> None:
        meta = pod["metadata"]
        if (
            kind == "DELETED"
            or not meta.get("deletionTimestamp")
            or pod["spec"].get("nodeName")
            or pod["status"].get("phase") in ("Succeeded", "Failed")
            or meta["uid"] in self._done
        ):
            return
        self._done.add(meta["uid"])
        task = asyncio.get_running_loop().create_task(self._fail_and_delete(pod))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _fail_and_delete(self, pod: Object) -> None:
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        with contextlib.suppress(ClientError):
            await self.client.json_patch(
                f"{path}/status",
                [
                    {"op": "test", "path": "/metadata/uid", "value": meta["uid"]},
                    {"op": "replace", "path": "/status/phase", "value": "Failed"},
                ],
            )
            await self.client.delete(
                path, {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}}
            )

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
