"""pods/log options the job executor relies on: timestamps, sinceTime, and their validation."""

from __future__ import annotations

import asyncio
import re
import time

import aiohttp
import pytest
from kubernetes_asyncio import client

from tests.support.k8s_cluster import wait_for
from tests.support.k8s_manifests import pod

# The kubelet's RFC3339NanoFixed: always nine digits of fraction.
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$")


async def get_log(url: str, name: str, **query: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session:
        async with session.get(
            f"{url}/api/v1/namespaces/default/pods/{name}/log", params=query
        ) as response:
            return response.status, await response.text()


async def a_talking_pod(k8s_api, k8s_controls, name: str) -> None:
    k8s_controls.add_gpu_nodes(1)
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_pod("default", pod(name))

    async def running() -> bool:
        return (await core.read_namespaced_pod(name, "default")).status.phase == "Running"

    await wait_for(running, what=f"{name} Running")


async def test_since_time_keeps_the_lines_from_that_whole_second_on(k8s_api, k8s_controls):
    await a_talking_pod(k8s_api, k8s_controls, "talker")
    k8s_controls.write_log("default", "talker", "early\n")
    await asyncio.sleep(1.05 - time.time() % 1)  # the next line falls in a later second
    k8s_controls.write_log("default", "talker", "late\nlater\n")

    _, stamped = await get_log(k8s_controls.url, "talker", timestamps="true")
    stamps = [line.split(" ", 1)[0] for line in stamped.splitlines()]
    assert all(STAMP.match(stamp) for stamp in stamps), stamps
    late = stamps[1]

    # A sinceTime inside the second of "late" (even after it) still gives that whole second.
    code, text = await get_log(k8s_controls.url, "talker", sinceTime=late[:19] + ".999999Z")
    assert (code, text) == (200, "late\nlater\n")
    code, text = await get_log(k8s_controls.url, "talker", sinceTime=late[:19] + "Z")
    assert (code, text) == (200, "late\nlater\n")
    code, text = await get_log(k8s_controls.url, "talker", sinceTime="2000-01-01T00:00:00Z")
    assert (code, text) == (200, "early\nlate\nlater\n")
    code, text = await get_log(k8s_controls.url, "talker", sinceTime="2999-01-01T00:00:00Z")
    assert (code, text) == (200, "")


@pytest.mark.parametrize(
    ("query", "code", "message"),
    [
        (
            {"sinceTime": "2026-01-01T00:00:00Z", "sinceSeconds": "5"},
            422,
            'PodLogOptions "talker" is invalid: : Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified',
        ),
        (
            {"sinceSeconds": "0"},
            422,
            'PodLogOptions "talker" is invalid: sinceSeconds: Invalid value: 0: must be greater than 0',
        ),
        (
            {"tailLines": "-1"},
            422,
            'PodLogOptions "talker" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0',
        ),
        ({"sinceTime": "yesterday"}, 400, 'parsing time "yesterday"'),
    ],
)
async def test_log_options_are_validated_as_the_api_server_does(
    k8s_api, k8s_controls, query, code, message
):
    await a_talking_pod(k8s_api, k8s_controls, "talker")
    async with aiohttp.ClientSession() as session:
        async with session.get(
            f"{k8s_controls.url}/api/v1/namespaces/default/pods/talker/log", params=query
        ) as response:
            body = await response.json()
    assert response.status == code
    assert body["message"].startswith(message)
