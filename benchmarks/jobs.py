"""Jobs: running a small notebook as a job, and capturing a large log, against papermill.

(a) A three-cell notebook that prints, submitted through the JobManager with the
LocalExecutor and product defaults (a runner subprocess per job, a kernel, the
durable log, status and output files), timed from ``create()`` to RUNNING and to the
final state. Anchors, timed on the same notebook in the same run:

- ``papermill.execute_notebook`` in a new Python process: what our runner is, a
  subprocess executing the notebook, so like is compared with like;
- the same call in this (warm) process, for reference: no interpreter start or imports;
- jupyter-scheduler 2.12 local execution: ``Scheduler.create_job`` (its
  ``DefaultExecutionManager`` in a "spawn" process, nbconvert's ExecutePreprocessor)
  until the job's row says IN_PROGRESS and COMPLETED. It is installed with ``pip
  install --target build/bench/jupyter-scheduler`` (never into the project's virtualenv:
  it would register a server extension there) and run in a subprocess with that folder
  on PYTHONPATH; when that is impossible the anchor is reported unavailable, with why.

Targets: a job's total time within 1.2x of papermill in a subprocess, and ahead of
jupyter-scheduler.

(b) A notebook printing 200,000 lines: lines per second from submission to the final
state with every line in the durable log (counted, in order), against papermill writing
the same output to a ``stdout_file`` with ``log_output=True`` in a subprocess (counted too).
The same notebook also runs through the KubernetesExecutor on the Kubernetes API
emulator, its pod a local process (``tests/support/k8s_job_pods.py``): the pod log streamed
with timestamps, deduplicated and copied into the durable log.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from .report import Row, Section
from .timing import Timing

ROOT = Path(__file__).resolve().parents[1]
SCHEDULER_TARGET = ROOT / "build" / "bench" / "jupyter-scheduler"
SCHEDULER_REQUIREMENTS = (
    "jupyter-scheduler==2.12.1",
    "croniter~=1.4",
    "pytz<=2024.2",
    "fsspec>=2025.3.2",
)
ROUNDS = 4
LOG_LINES = 200_000
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}

SMALL_CELLS = (
    "print('loading data')",
    "for epoch in range(3):\n    print('epoch', epoch)",
    "print('done')",
)
BIG_CELLS = (f"for i in range({LOG_LINES}):\n    print(i)",)

PAPERMILL = textwrap.dedent(
    """\
    import sys, time
    import papermill
    kwargs = {}
    if len(sys.argv) > 3:
        kwargs = {"log_output": True, "stdout_file": open(sys.argv[3], "w")}
    papermill.execute_notebook(sys.argv[1], sys.argv[2], progress_bar=False, **kwargs)
    """
)

SCHEDULER_DRIVER = textwrap.dedent(
    """\
    import json, os, sys, time


    def main():
        from jupyter_scheduler.environments import StaticEnvironmentManager
        from jupyter_scheduler.models import CreateJob, Status
        from jupyter_scheduler.orm import Job, create_session, create_tables
        from jupyter_scheduler.scheduler import Scheduler

        root, runs = sys.argv[1], int(sys.argv[2])
        db_url = f"sqlite:///{root}/scheduler.sqlite"
        create_tables(db_url)
        scheduler = Scheduler(
            root_dir=root,
            environments_manager=StaticEnvironmentManager(),
            db_url=db_url,
            staging_path=os.path.join(root, "staging"),
        )
        sessions = create_session(db_url)
        results = []
        for _ in range(runs):
            start = time.perf_counter()
            job_id = scheduler.create_job(
                CreateJob(
                    input_uri="small.ipynb",
                    runtime_environment_name="bench",
                    name="bench",
                    output_formats=["ipynb"],
                )
            )
            running = None
            while True:
                with sessions() as session:
                    status = session.query(Job.status).filter(Job.job_id == job_id).scalar()
                if running is None and status != Status.STOPPED:
                    running = time.perf_counter() - start
                if status in (Status.COMPLETED, Status.FAILED):
                    break
                time.sleep(0.005)
            if status != Status.COMPLETED:
                raise SystemExit(f"the jupyter-scheduler job ended {status}")
            results.append((running, time.perf_counter() - start))
        print(json.dumps(results))


    if __name__ == "__main__":
        main()
    """
)


def _write_notebook(path: Path, cells: tuple[str, ...]) -> Path:
    nb = new_notebook(
        cells=[new_code_cell(source) for source in cells], metadata={"kernelspec": KERNELSPEC}
    )
    nbformat.write(nb, path)
    return path


# -- ours ---------------------------------------------------------------------------------


async def _our_job(root: Path, notebook: Path) -> tuple[float, float, float, str, Path]:
    """(submit → RUNNING, submit → first cell output, submit → final, job id, log file)."""
    from jupyter_to_job.manager import JobManager
    from jupyter_to_job.models import CreateJob, JobStatus

    manager = JobManager(root_dir=str(root))
    await manager.start()
    try:
        request = CreateJob(input_path=notebook.name, output_formats=["ipynb"])
        start = time.perf_counter()
        created = await manager.create("bench", request, source_root=notebook.parent)
        running = time.perf_counter() - start
        assert created.job.status is JobStatus.RUNNING, created.job.status_message
        job_id = created.job_id
        log = manager.log_store.path(job_id)
        first_output = None
        while True:
            job = manager.describe(job_id)
            if first_output is None and b"[cell 0] " in log.read_bytes()[:65536]:
                first_output = time.perf_counter() - start
            if job.status.is_final:
                break
            await asyncio.sleep(0.005)
        total = time.perf_counter() - start
        assert job.status is JobStatus.COMPLETED, job.status_message
        return running, first_output or total, total, job_id, log
    finally:
        await manager.shutdown()


def _ours(root: Path, notebook: Path) -> tuple[float, float, float, str, Path]:
    return asyncio.run(_our_job(root, notebook))


def _ours_on_kubernetes(workdir: Path, notebook: Path) -> tuple[float, Path]:
    """(submit → final, log file) of a job run by the KubernetesExecutor on the emulator."""
    from jupyter_to_job.manager import JobManager
    from jupyter_to_job.models import CreateJob, JobStatus
    from tests.support.k8s_emulator import EmulatedCluster
    from tests.support.k8s_job_pods import JOB_PODS, PodProcesses, k8s_job_config, kill_kernels

    async def job(kubeconfig: Path) -> tuple[float, Path]:
        manager = JobManager(root_dir=str(workdir / "root"), config=k8s_job_config(kubeconfig))
        await manager.start()
        try:
            request = CreateJob(input_path=notebook.name, output_formats=["ipynb"])
            start = time.perf_counter()
            created = await manager.create("bench", request, source_root=notebook.parent)
            done = await manager.wait(created.job_id, poll_interval=0.005)
            total = time.perf_counter() - start
            assert done.status is JobStatus.COMPLETED, done.status_message
            return total, manager.log_store.path(created.job_id)
        finally:
            await manager.shutdown()

    workdir.mkdir(parents=True, exist_ok=True)
    cluster = EmulatedCluster.start(workdir / "kubeconfig")
    try:
        cluster.add_gpu_nodes(1)
        pods = workdir / "pods"
        cluster.run_processes(PodProcesses(match=JOB_PODS, workdir=pods, cluster=cluster))
        return asyncio.run(job(cluster.kubeconfig))
    finally:
        kill_kernels(workdir / "pods")
        cluster.stop()


# -- anchors ------------------------------------------------------------------------------


def _papermill_subprocess(notebook: Path, out: Path, stdout_file: Path | None = None) -> float:
    command = [sys.executable, "-c", PAPERMILL, str(notebook), str(out)]
    if stdout_file is not None:
        command.append(str(stdout_file))
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    return time.perf_counter() - start


def _papermill_in_process(notebook: Path, out: Path) -> float:
    import papermill

    start = time.perf_counter()
    papermill.execute_notebook(str(notebook), str(out), progress_bar=False)
    return time.perf_counter() - start


def _scheduler_available() -> str | None:
    """None when jupyter-scheduler can be run, else why not (installing it if needed)."""
    if not (SCHEDULER_TARGET / "jupyter_scheduler").is_dir():
        install = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
            + ["--target", str(SCHEDULER_TARGET), *SCHEDULER_REQUIREMENTS],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if install.returncode != 0:
            lines = (install.stderr or install.stdout).strip().splitlines() or ["pip failed"]
            return f"pip install jupyter-scheduler failed: {lines[-1]}"
    check = subprocess.run(
        [sys.executable, "-c", "import jupyter_scheduler.executors"],
        env=_scheduler_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check.returncode != 0:
        return f"jupyter-scheduler does not import: {check.stderr.strip().splitlines()[-1]}"
    return None


def _scheduler_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(SCHEDULER_TARGET)}


def _scheduler_runs(workdir: Path, notebook: Path, runs: int) -> list[tuple[float, float]]:
    root = workdir / "scheduler"
    root.mkdir()
    (root / notebook.name).write_bytes(notebook.read_bytes())
    driver = workdir / "scheduler_driver.py"
    driver.write_text(SCHEDULER_DRIVER)
    result = subprocess.run(
        [sys.executable, str(driver), str(root), str(runs)],
        env=_scheduler_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return [tuple(pair) for pair in json.loads(result.stdout.strip().splitlines()[-1])]


# -- the benchmark ------------------------------------------------------------------------


def _count_lines(path: Path, prefix: bytes = b"") -> tuple[int, bool]:
    """Lines ``<prefix>N`` in ``path``, and whether they are exactly 0, 1, 2... in order."""
    expected = 0
    in_order = True
    for line in path.read_bytes().splitlines():
        if not line.startswith(prefix):
            continue
        body = line[len(prefix) :]
        if not body.isdigit():
            continue
        in_order = in_order and int(body) == expected
        expected += 1
    return expected, in_order


def _verdict(passed: bool) -> str:
    return "PASS" if passed else "FAIL"


def run() -> Section:
    section = Section(
        "jobs: a 3-cell notebook as a job, and a 200,000-line log",
        "papermill 2.7 (a subprocess, and in-process); jupyter-scheduler 2.12 local execution",
    )
    with tempfile.TemporaryDirectory(prefix="jupyter-to-job-bench-") as name:
        workdir = Path(name)
        small = _write_notebook(workdir / "small.ipynb", SMALL_CELLS)
        big = _write_notebook(workdir / "big.ipynb", BIG_CELLS)
        out = workdir / "out.ipynb"

        # Warm-up: imports, kernelspec lookups and the file cache, for ours and the anchors.
        _ours(workdir / "warm", small)
        _papermill_in_process(small, out)

        ours, first_output, running = [], [], []
        pm_subprocess, pm_in_process = [], []
        for round_ in range(ROUNDS):
            sub_running, sub_first, sub_total, _, _ = _ours(workdir / f"ours-{round_}", small)
            ours.append(sub_total)
            first_output.append(sub_first)
            running.append(sub_running)
            pm_subprocess.append(_papermill_subprocess(small, out))
            pm_in_process.append(_papermill_in_process(small, out))

        reason = _scheduler_available()
        scheduler: list[tuple[float, float]] = []
        if reason is None:
            try:
                # Every jupyter-scheduler job starts a new "spawn" process: nothing to warm.
                scheduler = _scheduler_runs(workdir, small, ROUNDS)
            except (subprocess.SubprocessError, ValueError) as error:
                reason = f"the jupyter-scheduler run failed: {error}"

        total = Timing(tuple(ours))
        versus_papermill = Row(
            "submit to final: vs papermill subprocess", total, Timing(tuple(pm_subprocess))
        )
        section.rows.append(versus_papermill)
        section.rows.append(
            Row("submit to final: vs papermill in-process", total, Timing(tuple(pm_in_process)))
        )
        if scheduler:
            versus_scheduler = Row(
                "submit to final: vs jupyter-scheduler",
                total,
                Timing(tuple(t for _, t in scheduler)),
            )
            section.rows.append(versus_scheduler)
            section.rows.append(
                Row(
                    "submit to running: vs jupyter-scheduler IN_PROGRESS",
                    Timing(tuple(running)),
                    Timing(tuple(r for r, _ in scheduler)),
                )
            )
        else:
            section.rows.append(Row("submit to running", Timing(tuple(running))))
        section.rows.append(
            Row("submit to first cell output in the log", Timing(tuple(first_output)))
        )

        # (b) the large log
        _, _, our_big, job_id, log = _ours(workdir / "big", big)
        our_lines, our_order = _count_lines(log, b"[cell 0] ")
        stdout_file = workdir / "papermill-stdout.txt"
        pm_big = _papermill_subprocess(big, workdir / "big-out.ipynb", stdout_file)
        pm_lines, pm_order = _count_lines(stdout_file)
        section.rows.append(
            Row(f"{LOG_LINES:,} lines: submit to final", Timing((our_big,)), Timing((pm_big,)))
        )
        k8s_big, k8s_log = _ours_on_kubernetes(workdir / "k8s", big)
        k8s_lines, k8s_order = _count_lines(k8s_log, b"[cell 0] ")
        section.rows.append(
            Row(
                f"{LOG_LINES:,} lines, KubernetesExecutor on the emulator",
                Timing((k8s_big,)),
                Timing((pm_big,)),
            )
        )

    ratio = versus_papermill.ratio or 0.0
    section.notes.append(
        f"target: total within 1.2x of papermill in a subprocess: {_verdict(ratio <= 1.2)} "
        f"({ratio:.2f}x)"
    )
    if scheduler:
        ratio = versus_scheduler.ratio or 0.0
        section.notes.append(
            f"target: ahead of jupyter-scheduler: {_verdict(ratio < 1.0)} ({ratio:.2f}x)"
        )
    else:
        section.notes.append(f"anchor unavailable: {reason}")
    section.notes.append(
        f"log capture: ours {our_lines / our_big:,.0f} lines/s into the durable log, "
        f"{our_lines:,} of {LOG_LINES:,} lines kept{'' if our_order else ' OUT OF ORDER'}; "
        f"papermill stdout_file {pm_lines / pm_big:,.0f} lines/s, {pm_lines:,} of "
        f"{LOG_LINES:,}{'' if pm_order else ' OUT OF ORDER'}: "
        f"{_verdict(our_lines == LOG_LINES and our_order)} (no line lost)"
    )
    section.notes.append(
        f"log capture through a pod (KubernetesExecutor, emulator): {k8s_lines / k8s_big:,.0f} "
        f"lines/s, {k8s_lines:,} of {LOG_LINES:,} lines kept"
        f"{'' if k8s_order else ' OUT OF ORDER'}: "
        f"{_verdict(k8s_lines == LOG_LINES and k8s_order)} (no line lost)"
    )
    section.notes.append(
        "ours: JobManager + LocalExecutor with product defaults (poll_interval 0.5 s); "
        "running = the RUNNING state, set when the runner process is launched"
    )
    return section
