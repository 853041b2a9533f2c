"""pods/exec over WebSocket channels, and simulated containers answering on their ports."""

from __future__ import annotations

import json
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.stream import WsApiClient

from tests.support.k8s_cluster import wait_for
from tests.support.k8s_emulator import PodMatch, ProcessRunner
from tests.support.k8s_manifests import pod


@dataclass
class ExecResult:
    stdout: str = ""
    stderr: str = ""
    status: dict[str, Any] = field(default_factory=dict)


async def exec_in(
    k8s_api: client.ApiClient,
    name: str,
    command: list[str],
    *,
    stdin: bytes | None = None,
    protocol: str = "v4.channel.k8s.io",
    **options: Any,
) -> ExecResult:
    """Run ``command`` in pod ``name`` as ``kubectl exec`` does, reading every channel."""
    result = ExecResult()
    async with WsApiClient(k8s_api.configuration) as ws_api:
        core = client.CoreV1Api(ws_api)
        connect = await core.connect_get_namespaced_pod_exec(
            name,
            "default",
            command=command,
            stdin=stdin is not None,
            stdout=True,
            stderr=True,
            tty=False,
            _preload_content=False,
            _headers={"sec-websocket-protocol": protocol},
            **options,
        )
        async with connect as ws:
            if stdin is not None:
                await ws.send_bytes(b"\x00" + stdin)
                await ws.send_bytes(b"\xff\x00")  # v5: stdin is closed
            async for message in ws:
                if message.type != aiohttp.WSMsgType.BINARY:
                    continue
                channel, data = message.data[0], message.data[1:].decode()
                if channel == 1:
                    result.stdout += data
                elif channel == 2:
                    result.stderr += data
                elif channel == 3:
                    result.status = json.loads(data)
    return result


async def running_pod(core: client.CoreV1Api, manifest: dict[str, Any]) -> dict[str, Any]:
    await core.create_namespaced_pod("default", manifest)
    name = manifest["metadata"]["name"]

    async def running() -> dict[str, Any] | None:
        current = await core.read_namespaced_pod(name, "default")
        return current if current.status.phase == "Running" else None

    return await wait_for(running, what=f"pod {name} Running")


async def test_a_command_runs_with_the_containers_env_and_reports_its_exit_code(
    k8s_api, k8s_controls
):
    k8s_controls.add_gpu_nodes(1)
    core = client.CoreV1Api(k8s_api)
    manifest = pod("shell")
    manifest["spec"]["containers"][0]["env"] = [
        {"name": "GREETING", "value": "hello"},
        {"name": "WHO", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    await running_pod(core, manifest)
    script = "import os, sys; print(os.environ['GREETING'], os.environ['WHO']); print('careful', file=sys.stderr); sys.exit(3)"
    result = await exec_in(k8s_api, "shell", [sys.executable, "-c", script])
    assert result.stdout == "hello shell\n"
    assert result.stderr == "careful\n"
    assert result.status["status"] == "Failure"
    assert result.status["reason"] == "NonZeroExitCode"
    assert result.status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    assert WsApiClient.parse_error_data(json.dumps(result.status)) == 3

    done = await exec_in(k8s_api, "shell", ["true"])
    assert done.status == {"metadata": {}, "status": "Success"}


async def test_stdin_reaches_the_command_until_the_client_closes_it(k8s_api, k8s_controls):
    k8s_controls.add_gpu_nodes(1)
    core = client.CoreV1Api(k8s_api)
    await running_pod(core, pod("cat"))
    result = await exec_in(
        k8s_api, "cat", ["cat"], stdin=b"line one\nline two\n", protocol="v5.channel.k8s.io"
    )
    assert result.stdout == "line one\nline two\n"
    assert result.status["status"] == "Success"


async def test_a_missing_executable_is_an_internal_error_on_the_status_channel(
    k8s_api, k8s_controls
):
    k8s_controls.add_gpu_nodes(1)
    core = client.CoreV1Api(k8s_api)
    await running_pod(core, pod("lean"))
    result = await exec_in(k8s_api, "lean", ["no-such-program-here"])
    assert result.status["reason"] == "InternalError" and result.status["code"] == 500
    assert 'exec: "no-such-program-here"' in result.status["message"]


async def test_a_process_container_runs_the_command_in_its_working_directory(
    k8s_api, k8s_controls, tmp_path: Path
):
    k8s_controls.add_gpu_nodes(1)
    k8s_controls.run_processes(
        ProcessRunner(match=PodMatch(labels="run=process"), workdir=tmp_path)
    )
    core = client.CoreV1Api(k8s_api)
    manifest = pod(
        "worker",
        labels={"run": "process"},
        command=[sys.executable, "-c", "import time; open('ready', 'w').close(); time.sleep(60)"],
    )
    await running_pod(core, manifest)
    folder = tmp_path / "default" / "worker" / "main"
    await wait_for(lambda: (folder / "ready").exists(), what="the process to start")
    result = await exec_in(k8s_api, "worker", ["ls"])
    assert result.stdout.split() == ["ready"]


@pytest.mark.parametrize(
    ("situation", "code", "message"),
    [
        ("no such pod", 404, 'pods "ghost" not found'),
        ("not scheduled", 400, "pod waiting does not have a host assigned"),
        ("no upgrade", 400, "Upgrade request required"),
        ("no stream", 400, "you must specify at least 1 of stdin, stdout, stderr"),
    ],
)
async def test_exec_is_refused_before_the_upgrade_as_the_api_server_does(
    k8s_api, k8s_controls, situation, code, message
):
    k8s_controls.add_gpu_nodes(1)
    core = client.CoreV1Api(k8s_api)
    await running_pod(core, pod("up"))
    await core.create_namespaced_pod(
        "default", pod("waiting", nodeSelector={"no-such": "node"})
    )  # stays Pending
    name = {"no such pod": "ghost", "not scheduled": "waiting"}.get(situation, "up")
    query = "command=true" if situation == "no stream" else "command=true&stdout=true"
    upgrade = {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Protocol": "v4.channel.k8s.io",
    }
    async with aiohttp.ClientSession() as session:
        async with session.get(
            f"{k8s_controls.url}/api/v1/namespaces/default/pods/{name}/exec?{query}",
            headers={} if situation == "no upgrade" else upgrade,
        ) as response:
            body = await response.json()
    assert response.status == code
    assert body["kind"] == "Status" and body["message"] == message


async def test_the_client_sees_a_refused_upgrade_as_a_handshake_error(k8s_api, k8s_controls):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_pod("default", pod("pending"))
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await exec_in(k8s_api, "pending", ["true"])
    assert refused.value.status == 400


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_a_simulated_jupyter_server_answers_on_its_port_while_it_runs(k8s_api, k8s_controls):
    k8s_controls.add_gpu_nodes(1)
    k8s_controls.serve_ports()
    core = client.CoreV1Api(k8s_api)
    port = free_port()
    manifest = pod("jupyter-ada")
    manifest["spec"]["containers"][0]["ports"] = [{"containerPort": port, "name": "notebook-port"}]
    manifest["spec"]["containers"][0]["env"] = [
        {"name": "JUPYTERHUB_SERVICE_PREFIX", "value": "/user/ada/"},
        {"name": "JUPYTERHUB_CLIENT_ID", "value": "jupyterhub-user-ada"},
    ]
    started = await running_pod(core, manifest)
    base = f"http://{started.status.pod_ip}:{port}"
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{base}/", allow_redirects=False) as outside:
            assert outside.status == 302 and outside.headers["Location"] == "/user/ada/"
        async with session.get(f"{base}/user/ada/lab", allow_redirects=False) as inside:
            assert inside.status == 302
            assert inside.headers["Location"].startswith("/hub/api/oauth2/authorize?")
            assert "client_id=jupyterhub-user-ada" in inside.headers["Location"]
    await core.delete_namespaced_pod("jupyter-ada", "default")
    await wait_for(
        lambda: k8s_controls.get("pods", "jupyter-ada", "default") is None, what="pod gone"
    )
    with pytest.raises(aiohttp.ClientConnectionError):
        async with aiohttp.ClientSession() as session:
            await session.get(f"{base}/", allow_redirects=False)


async def test_ports_are_closed_unless_asked_for(k8s_api, k8s_controls):
    k8s_controls.add_gpu_nodes(1)
    core = client.CoreV1Api(k8s_api)
    port = free_port()
    manifest = pod("quiet")
    manifest["spec"]["containers"][0]["ports"] = [{"containerPort": port}]
    started = await running_pod(core, manifest)
    with pytest.raises(aiohttp.ClientConnectionError):
        async with aiohttp.ClientSession() as session:
            await session.get(f"http://{started.status.pod_ip}:{port}/")
