"""Concurrent spawns on the Kubernetes API emulator: GPUSpawner against plain KubeSpawner.

A class starting at once: N servers start concurrently, each asking for one GPU, on an
emulated cluster with enough GPUs. The emulator (API server, scheduler, kubelets) runs in
its own process, so this process's CPU time is the hub side of the work: the spawners,
their reflectors and, for GPUSpawner, the policy (entitlement, capacity, rendering).
KubeSpawner gets the same resource request through ``extra_resource_limits``. Runs
alternate between the two, so drift in the machine's load hits both.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest.mock import Mock

from .report import Row, Section
from .timing import Timing

ROOT = Path(__file__).resolve().parents[1]
CLASS_SIZES = (40, 200)
ROUNDS = 2


class _User(Mock):
    def __init__(self, name: str = "u", **kwargs):
        super().__init__(**kwargs)
        self.name = name
        self.groups = []
        self.admin = False

    @property
    def escaped_name(self):
        return self.name

    @property
    def url(self):
        return f"/user/{self.name}/"


def _catalog(path: Path, students: list[str]) -> Path:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    start, end = now - timedelta(minutes=10), now + timedelta(minutes=120)
    path.write_text(
        textwrap.dedent(
            f"""\
            courses:
              - id: bench
                title: Benchmark class
                enrolment: {{users: [{", ".join(students)}]}}
                gpu: {{count: 1}}
                schedule:
                  timezone: UTC
                  term: {{first_day: {(now - timedelta(days=1)).date()}, last_day: {(now + timedelta(days=9)).date()}}}
                  windows:
                    - {{day: {start:%a}, start: "{start:%H:%M}", end: "{end:%H:%M}"}}
            """
        )
    )
    return path


def _start_emulator(workdir: Path, nodes: int) -> tuple[subprocess.Popen, Path]:
    kubeconfig = workdir / "kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.k8s_emulator",
            "--gpu-nodes",
            str(nodes),
            "--gpus-per-node",
            "4",
            "--kubeconfig",
            str(kubeconfig),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if "listening on" in line:
            return process, kubeconfig
    raise RuntimeError("the Kubernetes API emulator did not start")


def _point_clients_at(kubeconfig: Path) -> None:
    from kubernetes_asyncio.config import kube_config
    from kubespawner import clients

    os.environ["KUBECONFIG"] = str(kubeconfig)
    os.environ.pop("KUBERNETES_SERVICE_HOST", None)
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = str(kubeconfig)
    clients.load_config.cache_clear()


def _spawner(kind: str, name: str, catalog: Path):
    from jupyterhub.objects import Hub
    from kubespawner import KubeSpawner
    from traitlets.config import Config

    from gpuspawner.kubernetes import GPUSpawner

    config = Config()
    section = config.GPUSpawner if kind == "GPUSpawner" else config.KubeSpawner
    section.namespace = "default"
    section.image = "quay.io/jupyter/base-notebook:2025-01-06"
    section.start_timeout = 300
    if kind == "GPUSpawner":
        section.catalog_path = str(catalog)
        spawner_class = GPUSpawner
    else:
        section.extra_resource_limits = {"nvidia.com/gpu": "1"}
        spawner_class = KubeSpawner
    spawner = spawner_class(
        hub=Hub(),
        user=_User(name),
        config=config,
        api_token="x",
        oauth_client_id="x",
        _mock=True,
    )
    spawner.user_options = {"profile": "bench"} if kind == "GPUSpawner" else {}
    return spawner


async def _class_start(kind: str, size: int, catalog: Path, round_: int) -> tuple[float, float]:
    from gpuspawner.kubernetes import GPUSpawner

    GPUSpawner._inventories.clear()
    names = [f"{kind.lower()}-{round_}-{i:03d}" for i in range(size)]
    spawners = [_spawner(kind, name, catalog) for name in names]
    wall, cpu = time.perf_counter(), time.process_time()
    urls = await asyncio.gather(*(s.start() for s in spawners))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert len(set(urls)) == size, "every server got its own pod"
    await asyncio.gather(*(s.stop(now=True) for s in spawners))
    return wall / size, cpu / size


async def _measure(catalog_dir: Path) -> dict[tuple[str, int], list[tuple[float, float]]]:
    from kubespawner import KubeSpawner

    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for size in CLASS_SIZES:
        names = [f"gpuspawner-{r}-{i:03d}" for r in range(ROUNDS) for i in range(size)]
        catalog = _catalog(catalog_dir / f"class-{size}.yaml", names)
        for round_ in range(ROUNDS):
            for kind in (
                ("KubeSpawner", "GPUSpawner") if round_ % 2 == 0 else ("GPUSpawner", "KubeSpawner")
            ):
                results.setdefault((kind, size), []).append(
                    await _class_start(kind, size, catalog, round_)
                )
    await KubeSpawner._stop_all_reflectors()
    return results


def run() -> Section:
    section = Section(
        "k8s spawns: a class starting at once on the Kubernetes API emulator",
        "plain KubeSpawner 7.1 with the same GPU request, same emulator, same run",
    )
    with tempfile.TemporaryDirectory(prefix="gpuspawner-k8s-bench-") as name:
        workdir = Path(name)
        nodes = max(CLASS_SIZES) // 4 + 1
        emulator, kubeconfig = _start_emulator(workdir, nodes)
        try:
            _point_clients_at(kubeconfig)
            results = asyncio.run(_measure(workdir))
        finally:
            emulator.terminate()
            emulator.wait(timeout=10)
    for size in CLASS_SIZES:
        ours = results["GPUSpawner", size]
        anchor = results["KubeSpawner", size]
        section.rows.append(
            Row(
                f"{size} concurrent starts: wall time per spawn",
                Timing(tuple(w for w, _ in ours)),
                Timing(tuple(w for w, _ in anchor)),
            )
        )
        section.rows.append(
            Row(
                f"{size} concurrent starts: hub CPU per spawn",
                Timing(tuple(c for _, c in ours)),
                Timing(tuple(c for _, c in anchor)),
            )
        )
    section.notes.append(
        f"{ROUNDS} rounds per size, alternating; {max(CLASS_SIZES) // 4 + 1} emulated nodes with "
        "4 GPUs each; target: GPUSpawner within 1.10x of KubeSpawner"
    )
    return section
