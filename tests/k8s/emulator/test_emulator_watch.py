"""Watches and log streams behave like the real API server's."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from kubernetes_asyncio import client, watch

from tests.support.k8s_cluster import wait_for
from tests.support.k8s_manifests import pod


async def collect(stream, count: int, timeout: float = 5.0) -> list[tuple[str, str]]:
    """The first ``count`` (type, name) events of a kubernetes_asyncio watch."""
    seen: list[tuple[str, str]] = []

    async def read() -> None:
        async for event in stream:
            seen.append((event["type"], event["raw_object"]["metadata"].get("name", "")))
            if len(seen) >= count:
                return

    await asyncio.wait_for(read(), timeout)
    return seen


async def test_watch_replays_changes_after_a_resource_version(k8s_api):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_config_map("default", {"metadata": {"name": "before"}})
    version = (await core.list_namespaced_config_map("default")).metadata.resource_version
    await core.create_namespaced_config_map("default", {"metadata": {"name": "after"}})
    await core.patch_namespaced_config_map("after", "default", {"data": {"x": "1"}})
    await core.delete_namespaced_config_map("after", "default")
    w = watch.Watch()
    async with w.stream(
        core.list_namespaced_config_map, "default", resource_version=version, timeout_seconds=5
    ) as stream:
        events = await collect(stream, 3)
    assert events == [("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "after")]


async def test_watch_without_a_version_starts_with_current_objects_then_follows(k8s_api):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_config_map("default", {"metadata": {"name": "existing"}})

    async def later() -> None:
        await asyncio.sleep(0.05)
        await core.create_namespaced_config_map("default", {"metadata": {"name": "new"}})

    task = asyncio.create_task(later())
    # label_selector skips kube-root-ca.crt, which real clusters put in every namespace
    async with watch.Watch().stream(
        core.list_namespaced_config_map, "default", label_selector="!kube-root", timeout_seconds=5
    ) as stream:
        events = await collect(stream, 2)
    await task
    assert events == [("ADDED", "existing"), ("ADDED", "new")]


async def test_watch_with_a_selector_sees_objects_enter_and_leave_it(k8s_api):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "cm", "labels": {"gpu": "no"}}}
    )
    version = (await core.list_namespaced_config_map("default")).metadata.resource_version
    await core.patch_namespaced_config_map(
        "cm", "default", {"metadata": {"labels": {"gpu": "yes"}}}
    )
    await core.patch_namespaced_config_map("cm", "default", {"data": {"a": "b"}})
    await core.patch_namespaced_config_map("cm", "default", {"metadata": {"labels": {"gpu": "no"}}})
    async with watch.Watch().stream(
        core.list_namespaced_config_map,
        "default",
        label_selector="gpu=yes",
        resource_version=version,
        timeout_seconds=5,
    ) as stream:
        events = await collect(stream, 3)
    assert [e[0] for e in events] == ["ADDED", "MODIFIED", "DELETED"]


async def test_watch_ends_after_timeout_seconds(k8s_api):
    core = client.CoreV1Api(k8s_api)
    started = time.monotonic()
    events = []
    async with watch.Watch().stream(
        core.list_namespaced_secret, "default", timeout_seconds=1, resource_version="1"
    ) as stream:
        async for event in stream:
            events.append(event)
    assert 0.9 < time.monotonic() - started < 3
    assert events == []


async def test_watch_sends_bookmarks_when_allowed(k8s_api, k8s_controls):
    k8s_controls.emulator.settings.bookmark_interval = 0.2
    response = await k8s_api.call_api(
        "/api/v1/namespaces/default/pods",
        "GET",
        query_params=[("watch", "true"), ("allowWatchBookmarks", "true"), ("timeoutSeconds", "1")],
        _preload_content=False,
    )
    lines = [json.loads(line) for line in (await response.read()).splitlines() if line.strip()]
    assert lines and all(event["type"] == "BOOKMARK" for event in lines)
    assert (
        lines[0]["object"]["kind"] == "Pod"
        and int(lines[0]["object"]["metadata"]["resourceVersion"]) > 0
    )


async def test_a_compacted_resource_version_is_410_gone(k8s_api, k8s_controls):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_config_map("default", {"metadata": {"name": "old"}})
    k8s_controls.compact()
    await core.create_namespaced_config_map("default", {"metadata": {"name": "new"}})
    with pytest.raises(client.ApiException) as raised:
        async with watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version="1", timeout_seconds=2
        ) as stream:
            async for _ in stream:
                pass
    assert raised.value.status == 410


async def test_all_namespaces_watch_with_capital_true_and_a_field_selector(k8s_api):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespace({"metadata": {"name": "other"}})
    version = (await core.list_pod_for_all_namespaces()).metadata.resource_version
    await core.create_namespaced_pod("default", pod("here"))
    await core.create_namespaced_pod("other", pod("there"))
    # kubernetes_asyncio sends watch=True; KubeSpawner's event reflector selects involvedObject.kind
    async with watch.Watch().stream(
        core.list_pod_for_all_namespaces,
        resource_version=version,
        field_selector="metadata.namespace=other",
        timeout_seconds=3,
    ) as stream:
        events = await collect(stream, 1)
    assert events == [("ADDED", "there")]


async def test_pod_log_is_400_before_start_then_tails_and_follows(k8s_api, k8s_controls):
    core = client.CoreV1Api(k8s_api)
    k8s_controls.add_gpu_nodes(1)
    k8s_controls.fail_image_pull("registry.example.org/missing:1")
    await core.create_namespaced_pod(
        "default", pod("stuck", image="registry.example.org/missing:1")
    )
    await wait_for(
        lambda: _waiting_reason(core, "stuck", "ImagePullBackOff"), what="image pull back-off"
    )
    with pytest.raises(client.ApiException) as raised:
        await core.read_namespaced_pod_log("stuck", "default")
    assert raised.value.status == 400
    assert (
        'container "main" in pod "stuck" is waiting to start'
        in json.loads(raised.value.body)["message"]
    )

    await core.create_namespaced_pod("default", pod("talker"))
    await wait_for(lambda: _phase(core, "talker", "Running"), what="Running")
    k8s_controls.write_log("default", "talker", "one\ntwo\nthree\n")
    assert await core.read_namespaced_pod_log("talker", "default") == "one\ntwo\nthree\n"
    assert await core.read_namespaced_pod_log("talker", "default", tail_lines=1) == "three\n"
    stamped = await core.read_namespaced_pod_log("talker", "default", tail_lines=1, timestamps=True)
    assert stamped.endswith("Z three\n")

    async def follow() -> list[str]:
        lines = []
        async with watch.Watch().stream(
            core.read_namespaced_pod_log, "talker", "default"
        ) as stream:
            async for line in stream:
                lines.append(line)
                if line == "three\n":  # the follower is connected: more output arrives live
                    k8s_controls.write_log("default", "talker", "four\n")
                if line == "four\n":
                    k8s_controls.complete_container("default", "talker", exit_code=0)
        return lines

    # The stream ends by itself once the container has terminated.
    assert await asyncio.wait_for(follow(), 5) == ["one\n", "two\n", "three\n", "four\n"]


async def _phase(core: client.CoreV1Api, name: str, phase: str) -> bool:
    return (await core.read_namespaced_pod(name, "default")).status.phase == phase


async def _waiting_reason(core: client.CoreV1Api, name: str, reason: str) -> bool:
    statuses = (await core.read_namespaced_pod(name, "default")).status.container_statuses or []
    return any(s.state.waiting and s.state.waiting.reason == reason for s in statuses)


async def test_the_legacy_watch_path_follows_one_object(k8s_api):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_config_map("default", {"metadata": {"name": "one"}})
    await core.create_namespaced_config_map("default", {"metadata": {"name": "two"}})
    response = await k8s_api.call_api(
        "/api/v1/watch/namespaces/default/configmaps/one",
        "GET",
        query_params=[("timeoutSeconds", "1")],
        _preload_content=False,
    )
    lines = [json.loads(line) for line in (await response.read()).splitlines() if line.strip()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [("ADDED", "one")]


async def test_send_initial_events_ends_the_initial_list_with_a_bookmark(k8s_api):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_config_map("default", {"metadata": {"name": "present"}})
    response = await k8s_api.call_api(
        "/api/v1/namespaces/default/configmaps",
        "GET",
        query_params=[
            ("watch", "1"),
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", "1"),
        ],
        _preload_content=False,
    )
    lines = [json.loads(line) for line in (await response.read()).splitlines() if line.strip()]
    assert [e["type"] for e in lines[:2]] == ["ADDED", "BOOKMARK"]
    assert lines[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_the_previous_log_survives_a_container_restart(k8s_api, k8s_controls):
    k8s_controls.add_gpu_nodes(1)
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_pod("default", pod("restarter", restart_policy="Always"))
    await wait_for(lambda: _phase(core, "restarter", "Running"), what="Running")
    k8s_controls.write_log("default", "restarter", "first run\n")
    k8s_controls.complete_container("default", "restarter", exit_code=1)
    await wait_for(lambda: _restarted(core, "restarter"), what="the restart")
    assert (
        await core.read_namespaced_pod_log("restarter", "default", previous=True) == "first run\n"
    )
    assert await core.read_namespaced_pod_log("restarter", "default") == ""
    assert (
        await core.read_namespaced_pod_log("restarter", "default", previous=True, limit_bytes=5)
        == "first"
    )


async def _restarted(core: client.CoreV1Api, name: str) -> bool:
    (status,) = (await core.read_namespaced_pod(name, "default")).status.container_statuses
    return status.restart_count == 1 and status.state.running is not None
