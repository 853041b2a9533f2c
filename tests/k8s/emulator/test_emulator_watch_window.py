"""A short watch window: resuming from a forgotten resourceVersion is 410 Gone, bookmarks
keep a quiet watcher resumable, and KubeSpawner's reflector recovers from dropped watches."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from tests.support.k8s_cluster import wait_for
from tests.support.k8s_spawners import make_kube_spawner


async def watch_events(
    url: str, version: str, *, seconds: int = 1, bookmarks: bool = False
) -> list[dict[str, Any]]:
    """The events of one watch of configmaps in ``default`` from ``version``."""
    query = {"watch": "true", "resourceVersion": version, "timeoutSeconds": str(seconds)}
    if bookmarks:
        query["allowWatchBookmarks"] = "true"
    async with aiohttp.ClientSession() as session:
        async with session.get(
            f"{url}/api/v1/namespaces/default/configmaps", params=query
        ) as response:
            text = await response.text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def gone(events: list[dict[str, Any]]) -> bool:
    return [(e["type"], e["object"].get("code")) for e in events] == [("ERROR", 410)]


async def a_config_map(core: client.CoreV1Api, name: str) -> str:
    created = await core.create_namespaced_config_map("default", {"metadata": {"name": name}})
    return created.metadata.resource_version


async def test_a_version_older_than_the_time_window_is_410_gone(k8s_api, k8s_controls):
    k8s_controls.set_watch_window(history_seconds=0.2)
    core = client.CoreV1Api(k8s_api)
    first = await a_config_map(core, "first")
    second = await a_config_map(core, "second")
    replayed = await watch_events(k8s_controls.url, first, seconds=1)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in replayed] == [("ADDED", "second")]
    await asyncio.sleep(0.3)
    expired = await watch_events(k8s_controls.url, first)
    assert gone(expired)
    assert expired[0]["object"]["reason"] == "Expired"
    # Nothing changed since "second": a watch from the newest version is still fine.
    assert await watch_events(k8s_controls.url, second) == []


async def test_only_the_last_changes_of_the_count_window_can_be_resumed(k8s_api, k8s_controls):
    k8s_controls.set_watch_window(history_limit=2)
    core = client.CoreV1Api(k8s_api)
    versions = [await a_config_map(core, f"cm-{i}") for i in range(4)]
    assert gone(await watch_events(k8s_controls.url, versions[0]))
    resumed = await watch_events(k8s_controls.url, versions[1])
    assert [e["object"]["metadata"]["name"] for e in resumed] == ["cm-2", "cm-3"]


async def test_a_bookmark_keeps_a_quiet_watcher_resumable_past_the_window(k8s_api, k8s_controls):
    core = client.CoreV1Api(k8s_api)
    mine = await a_config_map(core, "mine")
    k8s_controls.set_watch_window(history_seconds=0.3, bookmark_interval=0.1)
    # Other kinds change meanwhile: the configmap watcher sees nothing but bookmarks.
    for i in range(3):
        await core.create_namespaced_secret("default", {"metadata": {"name": f"s-{i}"}})
    events = await watch_events(k8s_controls.url, mine, seconds=1, bookmarks=True)
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks and len(bookmarks) == len(events)
    latest = bookmarks[-1]["object"]["metadata"]["resourceVersion"]
    assert int(latest) > int(mine)
    await asyncio.sleep(0.4)
    assert gone(await watch_events(k8s_controls.url, mine))
    assert await watch_events(k8s_controls.url, latest) == []


async def test_end_watches_ends_every_open_stream(k8s_api, k8s_controls):
    core = client.CoreV1Api(k8s_api)
    version = await a_config_map(core, "one")
    watching = asyncio.ensure_future(watch_events(k8s_controls.url, version, seconds=30))
    await asyncio.sleep(0.2)
    k8s_controls.end_watches()
    assert await asyncio.wait_for(watching, 5) == []


@pytest.mark.usefixtures("kubespawner_env")
async def test_kubespawners_reflector_recovers_when_watches_drop_beyond_the_window(
    k8s_controls,
):
    k8s_controls.add_gpu_nodes(1)
    first = make_kube_spawner("ada")
    await first.start()
    # The API server drops every watch and has forgotten their versions.
    k8s_controls.set_watch_window(history_seconds=0.05)
    await asyncio.sleep(0.1)
    k8s_controls.end_watches()
    second = make_kube_spawner("grace", start_timeout=10)
    await second.start()  # waits for the reflector to see the pod running
    assert await second.poll() is None
    await first.stop()
    await wait_for(
        lambda: first.pod_reflector.pods.get(f"default/{first.pod_name}") is None,
        what="the reflector seeing the first pod go",
    )
    await second.stop()
