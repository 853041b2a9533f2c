"""Other processes reach the emulator: the standalone command and a client subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]

LIST_NODES = """
import asyncio
from kubernetes_asyncio import client, config

async def main():
    await config.load_kube_config()  # from $KUBECONFIG, as a JupyterHub under test would
    async with client.ApiClient() as api:
        nodes = await client.CoreV1Api(api).list_node()
        print(" ".join(n.metadata.labels["nvidia.com/gpu.product"] for n in nodes.items))

asyncio.run(main())
"""


def test_a_subprocess_reaches_the_fixture_emulator_through_kubeconfig(k8s_controls):
    k8s_controls.add_gpu_nodes(2, product="Tesla-T4")
    env = {**os.environ, "KUBECONFIG": str(k8s_controls.kubeconfig)}
    result = subprocess.run(
        [sys.executable, "-c", LIST_NODES],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.split() == ["Tesla-T4", "Tesla-T4"]


def test_the_emulator_runs_standalone(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.k8s_emulator",
            "--gpu-nodes",
            "2",
            "--kubeconfig",
            str(kubeconfig),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        assert banner.startswith("Kubernetes API emulator listening on http://127.0.0.1:")
        url = banner.split()[-1]
        assert json.loads(kubeconfig.read_text())["clusters"][0]["cluster"]["server"] == url
        with urllib.request.urlopen(f"{url}/api/v1/nodes", timeout=10) as response:
            nodes = json.load(response)
        assert [n["metadata"]["name"] for n in nodes["items"]] == ["gpu-node-0", "gpu-node-1"]
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
