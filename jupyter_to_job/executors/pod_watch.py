"""Keeping a Kubernetes Job's pods current: list them, then watch from the list's
resourceVersion, listing again after a broken watch or a 410 Gone."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from .kube_client import KubeClient


async def watch_pods(
    kube: KubeClient,
    path: str,
    selector: list[tuple[str, str]],
    *,
    pods: dict[str, dict[str, Any]],
    gone: set[str],
    changed: asyncio.Event,
    saw: Callable[[dict[str, Any]], None],
    job_id: str,
    log: logging.Logger | logging.LoggerAdapter[Any],
) -> None:
    """Hand each pod the API shows to ``saw`` (which keeps it in ``pods``), add the uids of
    pods deleted (or missing from a new list) to ``gone``, and set ``changed`` after each
    change; runs until cancelled."""
    version: str | None = None
    while True:
        try:
            if version is None:
                listing = await kube.request("GET", path, query=selector)
                present = set()
                for pod in listing.get("items") or []:
                    saw(pod)
                    present.add(pod["metadata"]["uid"])
                gone.update(set(pods) - present)
                version = listing["metadata"]["resourceVersion"]
                changed.set()
            query = [*selector, ("resourceVersion", version), ("allowWatchBookmarks", "true")]
            async with contextlib.aclosing(kube.watch(path, query)) as events:
                async for event in events:
                    pod = event.get("object") or {}
                    if event.get("type") == "ERROR":  # 410 Gone: list again
                        version = None
                        break
                    version = pod["metadata"]["resourceVersion"]
                    if event["type"] == "BOOKMARK":
                        continue
                    saw(pod)
                    if event["type"] == "DELETED":
                        gone.add(pod["metadata"]["uid"])
                    changed.set()
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a broken watch: list again after a pause
            log.debug("Job %s: pod watch ended: %s", job_id, error)
            version = None
            await asyncio.sleep(1.0)
