"""Run every benchmark and print one table each: ``python -m benchmarks``.

``BENCH_K8S_STORM=1`` adds the 2,000-spawn run on the Kubernetes API emulator (about
5 minutes on a 2-core machine; ``python -m benchmarks.k8s_spawns --storm`` runs it alone).

Exits 0 whatever the numbers (speed targets are reported, not enforced); a
non-zero exit means a benchmark crashed, for instance because an anchor no
longer computes the same profiles as the hub.
"""

from __future__ import annotations

import os
import platform
import sys
import time

from . import admission, entitlements, jobs, k8s_spawns, packing, spawn_page
from .report import render

BENCHMARKS = (entitlements, spawn_page, admission, packing, k8s_spawns, jobs)


def machine() -> str:
    cpus = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus
    return (
        f"python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.system()} {platform.machine()}, {cpus} CPUs ({usable} usable), "
        f"processor: {platform.processor() or 'unknown'}"
    )


def main() -> int:
    print(f"machine: {machine()}")
    print("times are per call: median and 95th percentile; ours/anchor compares the medians\n")
    runs = [module.run for module in BENCHMARKS]
    if k8s_spawns.storm_enabled():
        runs.append(k8s_spawns.run_storm)
    for run in runs:
        started = time.perf_counter()
        section = run()
        print(render(section))
        print(f"   ({time.perf_counter() - started:.1f} s)\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
