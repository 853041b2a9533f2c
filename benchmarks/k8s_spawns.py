"""Concurrent spawns on the Kubernetes API emulator: GPUSpawner against plain KubeSpawner.

A class starting at once: N servers start concurrently, each asking for one GPU, on an
emulated cluster with enough GPUs. The emulator (API server, scheduler, kubelets) runs in
its own process, so this process's CPU time is the hub side of the work: the spawners,
their reflectors and, for GPUSpawner, the policy (entitlement, capacity, rendering).
KubeSpawner gets the same resource request through ``extra_resource_limits``.

Two parts:

- ``run()``: 40 and 200 concurrent starts, rounds alternating between the two spawners on
  one emulator, so drift in the machine's load (and the events the cluster accumulates)
  hits both. Target: hub CPU per spawn at 200 within 1.05x of KubeSpawner's, judged on
  the median over the rounds.
- ``run_storm()``: 2,000 concurrent starts, once per spawner, each in a process of its own
  with a fresh emulator, so that its peak memory and its failures are its own. Target: no
  failed GPUSpawner spawn. ``python -m benchmarks.k8s_spawns --storm`` runs it alone; the
  full ``python -m benchmarks`` runs it when ``BENCH_K8S_STORM=1`` is set (a few minutes
  on a 2-core machine).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest.mock import Mock

from .report import Row, Section, render
from .timing import Timing

ROOT = Path(__file__).resolve().parents[1]
CLASS_SIZES = (40, 200)
ROUNDS = 4
TARGET_RATIO = 1.05
"""Hub CPU per spawn at 200 concurrent starts, GPUSpawner over KubeSpawner (medians)."""
STORM_SIZE = 2000
KINDS = ("GPUSpawner", "KubeSpawner")

# A class of 2,000 keeps the API server busy for minutes on a small machine: both spawners
# get the same, longer API timeouts (KubeSpawner's defaults, 3 s per request and 30 s of
# retries, are sized for a real API server, not for one Python process behind 2,000
# clients). The client's connection pool (100) is the same for both and left as it is.
STORM_SETTINGS = {
    "start_timeout": 1800,
    "k8s_api_request_timeout": 120,
    "k8s_api_request_retry_timeout": 1200,
}


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


@dataclass
class ClassStart:
    """What one class start measured, for one spawner."""

    kind: str
    size: int
    wall: float
    """Seconds from the first start() to the last one's end."""
    cpu: float
    """This process's CPU seconds over the same span (the hub side)."""
    failures: list[str] = field(default_factory=list)
    """The message of each failed start."""
    peak_rss_mib: float = 0.0

    @property
    def completed(self) -> int:
        return self.size - len(self.failures)


def _catalog(path: Path, students: list[str]) -> Path:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    start, end = now - timedelta(minutes=10), now + timedelta(minutes=120)
    overnight = ", overnight: true" if end.time() < start.time() else ""
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
                    - {{day: {start:%a}, start: "{start:%H:%M}", end: "{end:%H:%M}"{overnight}}}
            """
        )
    )
    return path


def _nodes_for(size: int) -> int:
    """4-GPU nodes for a class of ``size``: one GPU each, and one spare node."""
    return size // 4 + 1


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


def _stop_emulator(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _point_clients_at(kubeconfig: Path) -> None:
    from kubernetes_asyncio.config import kube_config
    from kubespawner import clients

    os.environ["KUBECONFIG"] = str(kubeconfig)
    os.environ.pop("KUBERNETES_SERVICE_HOST", None)
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = str(kubeconfig)
    clients.load_config.cache_clear()


def _spawner(kind: str, name: str, catalog: Path, settings: dict | None = None):
    from jupyterhub.objects import Hub
    from kubespawner import KubeSpawner
    from traitlets.config import Config

    from gpuspawner.spawners.kubernetes import GPUSpawner

    config = Config()
    section = config.GPUSpawner if kind == "GPUSpawner" else config.KubeSpawner
    section.namespace = "default"
    section.image = "quay.io/jupyter/base-notebook:2025-01-06"
    section.start_timeout = 300
    for key, value in (settings or {}).items():
        setattr(section, key, value)
    if kind == "GPUSpawner":
        config.GPUAdmission.catalog_path = str(catalog)  # the admission holds the catalog
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


def _students(size: int, rounds: int) -> list[str]:
    return [f"gpuspawner-{r}-{i:04d}" for r in range(rounds) for i in range(size)]


async def _class_start(
    kind: str, size: int, catalog: Path, round_: int, settings: dict | None = None
) -> ClassStart:
    """Start ``size`` servers at once, measure, then stop those that started."""
    from gpuspawner.spawners.kubernetes import GPUSpawner

    GPUSpawner._inventories.clear()
    names = [f"{kind.lower()}-{round_}-{i:04d}" for i in range(size)]
    spawners = [_spawner(kind, name, catalog, settings) for name in names]
    # Both spawners start from the same collector state: a full collection left over from
    # the previous round would otherwise land in whichever round comes next.
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    results = await asyncio.gather(*(s.start() for s in spawners), return_exceptions=True)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    failures = [_failure(r) for r in results if isinstance(r, BaseException)]
    urls = {r for r in results if not isinstance(r, BaseException)}
    assert len(urls) == size - len(failures), "every server got its own pod"
    started = [
        s for s, r in zip(spawners, results, strict=True) if not isinstance(r, BaseException)
    ]
    await asyncio.gather(*(s.stop(now=True) for s in started))
    return ClassStart(kind, size, wall, cpu, failures)


def _failure(error: BaseException) -> str:
    message = getattr(error, "message", None) or str(error) or type(error).__name__
    return f"{type(error).__name__}: {message}"[:300]


async def _measure(catalog_dir: Path) -> dict[tuple[str, int], list[ClassStart]]:
    from kubespawner import KubeSpawner

    results: dict[tuple[str, int], list[ClassStart]] = {}
    for size in CLASS_SIZES:
        catalog = _catalog(catalog_dir / f"class-{size}.yaml", _students(size, ROUNDS))
        for round_ in range(ROUNDS):
            order = KINDS[::-1] if round_ % 2 == 0 else KINDS
            for kind in order:
                results.setdefault((kind, size), []).append(
                    await _class_start(kind, size, catalog, round_)
                )
    await KubeSpawner._stop_all_reflectors()
    return results


def _verdict(passed: bool) -> str:
    return "PASS" if passed else "FAIL"


def run() -> Section:
    section = Section(
        "k8s spawns: a class starting at once on the Kubernetes API emulator",
        "plain KubeSpawner 7.1 with the same GPU request, same emulator, same run",
    )
    with tempfile.TemporaryDirectory(prefix="gpuspawner-k8s-bench-") as name:
        workdir = Path(name)
        emulator, kubeconfig = _start_emulator(workdir, _nodes_for(max(CLASS_SIZES)))
        try:
            _point_clients_at(kubeconfig)
            results = asyncio.run(_measure(workdir))
        finally:
            _stop_emulator(emulator)
    failed = sum(len(r.failures) for runs in results.values() for r in runs)
    for size in CLASS_SIZES:
        ours = results["GPUSpawner", size]
        anchor = results["KubeSpawner", size]
        section.rows.append(
            Row(
                f"{size} concurrent starts: wall time per spawn",
                Timing(tuple(r.wall / size for r in ours)),
                Timing(tuple(r.wall / size for r in anchor)),
            )
        )
        section.rows.append(
            Row(
                f"{size} concurrent starts: hub CPU per spawn",
                Timing(tuple(r.cpu / size for r in ours)),
                Timing(tuple(r.cpu / size for r in anchor)),
            )
        )
    section.notes.append(
        f"{ROUNDS} rounds per size, alternating which spawner goes first; "
        f"{_nodes_for(max(CLASS_SIZES))} emulated nodes with 4 GPUs each"
    )
    cpu_200 = section.rows[-1]
    ratio = cpu_200.ratio or float("inf")
    section.notes.append(
        f"target: hub CPU per spawn at {max(CLASS_SIZES)} within {TARGET_RATIO:.2f}x of "
        f"KubeSpawner: {_verdict(ratio <= TARGET_RATIO)} ({ratio:.2f}x)"
    )
    if failed:
        messages = Counter(m for runs in results.values() for r in runs for m in r.failures)
        section.notes.append(f"FAIL: {failed} spawns failed: {dict(messages.most_common(3))}")
    return section


# -- 2,000 at once ----------------------------------------------------------------


def _storm_child(kind: str, size: int) -> ClassStart:
    """One spawner's class start of ``size`` on a fresh emulator (in this process)."""
    from kubespawner import KubeSpawner

    with tempfile.TemporaryDirectory(prefix="gpuspawner-k8s-storm-") as name:
        workdir = Path(name)
        emulator, kubeconfig = _start_emulator(workdir, _nodes_for(size))
        try:
            _point_clients_at(kubeconfig)
            catalog = _catalog(workdir / "class.yaml", _students(size, 1))

            async def storm() -> ClassStart:
                result = await _class_start(kind, size, catalog, 0, STORM_SETTINGS)
                await KubeSpawner._stop_all_reflectors()
                return result

            result = asyncio.run(storm())
        finally:
            _stop_emulator(emulator)
    # ru_maxrss is in KiB on Linux.
    result.peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def _storm_in_subprocess(kind: str, size: int) -> ClassStart:
    process = subprocess.run(
        [sys.executable, "-m", "benchmarks.k8s_spawns", "--storm-child", kind, str(size)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    lines = [line for line in process.stdout.splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        raise RuntimeError(
            f"the {size}-spawn run of {kind} crashed (exit {process.returncode}):\n"
            f"{process.stderr[-3000:]}"
        )
    data = json.loads(lines[-1])
    return ClassStart(**data)


def _mib(value: float) -> str:
    return f"{value:.0f} MiB"


def run_storm(size: int = STORM_SIZE) -> Section:
    section = Section(
        f"k8s spawns: {size:,} servers starting at once on the Kubernetes API emulator",
        "plain KubeSpawner 7.1 with the same GPU request, on a fresh emulator of its own",
    )
    runs = {kind: _storm_in_subprocess(kind, size) for kind in ("KubeSpawner", "GPUSpawner")}
    ours, anchor = runs["GPUSpawner"], runs["KubeSpawner"]
    section.rows.append(
        Row(
            f"{size:,} concurrent starts: wall time, whole class",
            Timing((ours.wall,)),
            Timing((anchor.wall,)),
        )
    )
    section.rows.append(
        Row(
            f"{size:,} concurrent starts: hub CPU per spawn",
            Timing((ours.cpu / max(ours.completed, 1),)),
            Timing((anchor.cpu / max(anchor.completed, 1),)),
        )
    )
    table = [
        ("", "GPUSpawner", "KubeSpawner"),
        ("spawns completed", str(ours.completed), str(anchor.completed)),
        ("failed spawns", str(len(ours.failures)), str(len(anchor.failures))),
        ("peak hub RSS", _mib(ours.peak_rss_mib), _mib(anchor.peak_rss_mib)),
    ]
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    for name, *cells in table:
        columns = (c.rjust(w) for c, w in zip(cells, widths[1:], strict=True))
        section.notes.append("  ".join([name.ljust(widths[0]), *columns]))
    for kind, result in runs.items():
        for message, count in Counter(result.failures).most_common(3):
            section.notes.append(f"{kind} failure x{count}: {message}")
    section.notes.append(
        f"one run each, in its own process, on {_nodes_for(size)} emulated nodes with 4 GPUs "
        f"each; API timeouts for both: {STORM_SETTINGS}"
    )
    section.notes.append(
        f"target: every GPUSpawner spawn completes: {_verdict(not ours.failures)} "
        f"({len(ours.failures)} of {size} failed)"
    )
    return section


def storm_enabled() -> bool:
    """Whether ``python -m benchmarks`` includes the 2,000-spawn run (``BENCH_K8S_STORM=1``)."""
    return os.environ.get("BENCH_K8S_STORM", "") not in ("", "0")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.k8s_spawns", description=__doc__)
    parser.add_argument("--storm", action="store_true", help="only the 2,000-spawn run")
    parser.add_argument(
        "--size", type=int, default=STORM_SIZE, help="class size of the --storm run"
    )
    parser.add_argument("--storm-child", nargs=2, metavar=("KIND", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.storm_child:
        kind, size = args.storm_child
        print(json.dumps(asdict(_storm_child(kind, int(size)))), flush=True)
        return 0
    started = time.perf_counter()
    print(render(run_storm(args.size) if args.storm else run()))
    print(f"   ({time.perf_counter() - started:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
