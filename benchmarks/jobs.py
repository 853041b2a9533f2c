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

Each round runs our job twice: cold (a new runner process, as before warm starts) and
warm (``JobManager.prewarm`` first, and the warm runner ready before the submission:
imports done and a kernel running, see ``jupyter_to_job.executors.warm_pool``), and the
first cell's output in the durable log is timed too. Where a cold start's time goes is
measured piece by piece: a new interpreter with the runner's imports, a kernel's start
until it answers and its shutdown (the rest is the manager's own work, submit to RUNNING,
and the cells).

Targets: warm, submit to final within 1.1x of papermill in-process and the first cell's
output in the log under 0.5 s (median); cold, no slower than before warm starts (2.0x
papermill in-process, issue 17), within 1.2x of papermill in a subprocess, and ahead of
jupyter-scheduler.

(b) A notebook printing 200,000 lines: lines per second from submission to the final
state with every line in the durable log (counted, in order), against papermill writing
the same output to a ``stdout_file`` with ``log_output=True`` in a subprocess (counted too).
The same notebook also runs through the KubernetesExecutor on the Kubernetes API
emulator, its pod a local process (``tests/support/k8s_job_pods.py``): the pod log streamed
with timestamps, deduplicated and copied into the durable log.

Two rates are given for each: end to end (submission to final, so it includes starting
the runner and the kernel, which warm starts are about, and the executor noticing the
end) and the capture rate, from the first to the last of the 200,000 lines in the
durable log (the log path itself, which the targets of 100,000 lines/s locally and
50,000 lines/s through a pod are about). The kernel itself runs ``print(i)`` at about
190,000 lines/s on this machine, which bounds both.

Then the runner of the same notebook is killed (SIGKILL) once 100,000 lines are in the
log: the lines in the log at the kill must all be kept, whole, once each and in order,
and the job must end FAILED with its log readable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from .report import Row, Section
from .timing import Timing

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from jupyter_to_job.manager import JobManager

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
KILL_AT_BYTES = 1_600_000  # about 100,000 lines of [cell 0] N
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}

SMALL_CELLS = (
    "print('loading data')",
    "for epoch in range(3):\n    print('epoch', epoch)",
    "print('done')",
)
BIG_CELLS = (f"for i in range({LOG_LINES}):\n    print(i)",)
ENDLESS_CELLS = ("import itertools\nfor i in itertools.count():\n    print(i)",)

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


async def _our_job(
    root: Path, notebook: Path, *, warm: bool = False
) -> tuple[float, float, float, str, Path]:
    """(submit → RUNNING, submit → first cell output, submit → final, job id, log file);
    ``warm``: with a warm runner ready for the job before it is submitted."""
    from jupyter_to_job.models import CreateJob, JobStatus

    async with _local_manager(root, warm=warm) as manager:
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


@contextlib.asynccontextmanager
async def _local_manager(root: Path, *, warm: bool = False) -> AsyncIterator[JobManager]:
    """A started JobManager with the local executor in ``root``; ``warm``: with a warm
    runner ready for the next job of "bench" before it is yielded. Shut down after."""
    from jupyter_to_job.manager import JobManager

    manager = JobManager(root_dir=str(root))
    await manager.start()
    try:
        if warm:
            assert manager.prewarm("bench") == 1 and manager.warm_pool is not None
            assert await manager.warm_pool.wait_ready("bench", None) == 1
        yield manager
    finally:
        await manager.shutdown()


def _ours(
    root: Path, notebook: Path, *, warm: bool = False
) -> tuple[float, float, float, str, Path]:
    return asyncio.run(_our_job(root, notebook, warm=warm))


RUNNER_IMPORTS = (
    "import sys; sys.modules.setdefault('rfc3987_syntax', None); "
    "from jupyter_to_job.warm_start import preimport; preimport()"
)


def _cold_start_pieces(rounds: int = 3) -> dict[str, Timing]:
    """What a cold start does before the first cell and after the last, timed alone: a new
    interpreter with the runner's imports, a kernel's start until it answers, its shutdown."""
    imports = []
    for _ in range(rounds):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", RUNNER_IMPORTS], check=True, timeout=120)
        imports.append(time.perf_counter() - start)

    async def kernel_times() -> tuple[list[float], list[float]]:
        from jupyter_client.manager import AsyncKernelManager

        starts, stops = [], []
        for _ in range(rounds):
            with tempfile.TemporaryDirectory(prefix="bench-kernel-") as sockets:
                manager = AsyncKernelManager(kernel_name=KERNELSPEC["name"])
                manager.transport, manager.ip = "ipc", os.path.join(sockets, "kernel")
                start = time.perf_counter()
                await manager.start_kernel()
                client = manager.client()
                client.start_channels()
                await client.wait_for_ready(timeout=60)
                starts.append(time.perf_counter() - start)
                client.stop_channels()
                start = time.perf_counter()
                await manager.shutdown_kernel(now=False)
                stops.append(time.perf_counter() - start)
        return starts, stops

    starts, stops = asyncio.run(kernel_times())
    return {
        "interpreter + runner imports": Timing(tuple(imports)),
        "kernel start until it answers": Timing(tuple(starts)),
        "kernel shutdown": Timing(tuple(stops)),
    }


def _ours_on_kubernetes(workdir: Path, notebook: Path) -> tuple[float, float, float, Path]:
    """(submit → first cell line in the durable log, → last cell line there, → final, log
    file) of a job run by the KubernetesExecutor on the emulator."""
    from jupyter_to_job.manager import JobManager
    from tests.support.k8s_emulator import EmulatedCluster
    from tests.support.k8s_job_pods import JOB_PODS, PodProcesses, k8s_job_config, kill_kernels

    async def job(kubeconfig: Path) -> tuple[float, float, float, Path]:
        manager = JobManager(root_dir=str(workdir / "root"), config=k8s_job_config(kubeconfig))
        await manager.start()
        try:
            return await _submit_and_watch(manager, notebook)
        finally:
            await manager.shutdown()

    workdir.mkdir(parents=True, exist_ok=True)
    cluster = EmulatedCluster.start(workdir / "kubeconfig")
    try:
        cluster.add_gpu_nodes(1)
        pods = workdir / "pods"
        cluster.run_processes(PodProcesses(match=JOB_PODS, workdir=pods))
        return asyncio.run(job(cluster.kubeconfig))
    finally:
        kill_kernels(workdir / "pods")
        cluster.stop()


async def _submit_and_watch(
    manager: JobManager, notebook: Path
) -> tuple[float, float, float, Path]:
    """Submit the large-log ``notebook`` to a running ``manager``: (submit → first cell line
    in the durable log, → last cell line there, → final, log file)."""
    from jupyter_to_job.models import CreateJob, JobStatus

    request = CreateJob(input_path=notebook.name, output_formats=["ipynb"])
    start = time.perf_counter()
    created = await manager.create("bench", request, source_root=notebook.parent)
    log = manager.log_store.path(created.job_id)
    waiting = asyncio.ensure_future(manager.wait(created.job_id, poll_interval=0.005))
    first, last = await _watch_log(log, waiting, start)
    done = await waiting
    total = time.perf_counter() - start
    assert done.status is JobStatus.COMPLETED, done.status_message
    return first, last, total, log


async def _watch_log(log: Path, waiting: asyncio.Future, start: float) -> tuple[float, float]:
    """Seconds from ``start`` until the first and until the last of the ``LOG_LINES`` cell
    lines are in the durable ``log``, looking every 5 ms until ``waiting`` is done."""
    first = last = None
    ending = f"[cell 0] {LOG_LINES - 1}\n".encode()
    while last is None:
        finished = waiting.done()
        try:
            with log.open("rb") as stream:
                if first is None and b"[cell 0] " in stream.read(65536):
                    first = time.perf_counter() - start
                if first is not None:
                    stream.seek(max(0, os.fstat(stream.fileno()).st_size - 65536))
                    if ending in stream.read():
                        last = time.perf_counter() - start
        except FileNotFoundError:
            pass
        if finished and last is None:
            raise AssertionError(f"the job ended without its last line in {log}")
        await asyncio.sleep(0.005)
    assert first is not None
    return first, last


def _ours_big(
    root: Path, notebook: Path, *, warm: bool = False
) -> tuple[float, float, float, Path]:
    """(submit → first cell line in the durable log, → last cell line there, → final,
    log file) of the large-log notebook as a local job; ``warm``: with a warm runner
    ready for it before it is submitted."""

    async def job() -> tuple[float, float, float, Path]:
        async with _local_manager(root, warm=warm) as manager:
            return await _submit_and_watch(manager, notebook)

    return asyncio.run(job())


def _killed_runner(root: Path, notebook: Path) -> tuple[int, int, bool, bool, str]:
    """Kill the runner of ``notebook`` (SIGKILL) once 100,000 lines are in the log: (lines
    in the log at the kill, lines kept, kept lines whole and 0..N in order, the log ends on
    a whole line or the service's own, final status)."""
    from jupyter_to_job.manager import JobManager
    from jupyter_to_job.models import CreateJob

    async def job() -> tuple[int, int, bool, bool, str]:
        manager = JobManager(root_dir=str(root))
        await manager.start()
        try:
            request = CreateJob(input_path=notebook.name, output_formats=["ipynb"])
            created = await manager.create("bench", request, source_root=notebook.parent)
            log = manager.log_store.path(created.job_id)
            while log.stat().st_size < KILL_AT_BYTES:
                await asyncio.sleep(0.005)
            row = manager.store.get(created.job_id)
            assert row is not None and row.pid is not None
            at_kill = log.read_bytes()
            os.kill(row.pid, signal.SIGKILL)
            done = await manager.wait(created.job_id, poll_interval=0.05)
            kept = log.read_bytes()
            before, _ = _count_lines_bytes(at_kill, b"[cell 0] ")
            lines, in_order = _count_lines_bytes(kept, b"[cell 0] ")
            whole = all(
                line.startswith(b"[job] ") or line[len(b"[cell 0] ") :].isdigit()
                for line in kept.splitlines()
            )
            return before, lines, in_order and whole, kept.endswith(b"\n"), done.status.value
        finally:
            await manager.shutdown()

    return asyncio.run(job())


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
    return _count_lines_bytes(path.read_bytes(), prefix)


def _count_lines_bytes(data: bytes, prefix: bytes = b"") -> tuple[int, bool]:
    """Lines ``<prefix>N`` in ``data``, and whether they are exactly 0, 1, 2... in order."""
    expected = 0
    in_order = True
    for line in data.splitlines():
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


COLD_BEFORE = 2.0
"""Submit to final over papermill in-process before warm starts (issue 17, ``make bench``)."""


def _start_notes(
    versus: dict[tuple[str, str], Row],
    warm_first_output: Timing,
    pieces: dict[str, Timing],
    running: list[float],
    scheduler_missing: str | None,
) -> list[str]:
    """The targets of part (a), with verdicts, and where a cold start's time goes."""
    ratio = {key: row.ratio or 0.0 for key, row in versus.items()}
    median = {piece: timing.median for piece, timing in pieces.items()}
    notes = [
        "target: warm, submit to final within 1.1x of papermill in-process: "
        f"{_verdict(ratio['warm', 'papermill in-process'] <= 1.1)} "
        f"({ratio['warm', 'papermill in-process']:.2f}x)",
        "target: warm, first cell output in the log under 0.5 s (median): "
        f"{_verdict(warm_first_output.median < 0.5)} ({warm_first_output.median:.2f} s)",
        f"target: cold no slower than before warm starts ({COLD_BEFORE:.1f}x papermill "
        f"in-process): {_verdict(ratio['cold', 'papermill in-process'] <= COLD_BEFORE)} "
        f"({ratio['cold', 'papermill in-process']:.2f}x)",
        "target: cold, total within 1.2x of papermill in a subprocess: "
        f"{_verdict(ratio['cold', 'papermill subprocess'] <= 1.2)} "
        f"({ratio['cold', 'papermill subprocess']:.2f}x)",
    ]
    if scheduler_missing is None:
        notes.append(
            "target: cold, ahead of jupyter-scheduler: "
            f"{_verdict(ratio['cold', 'jupyter-scheduler'] < 1.0)} "
            f"({ratio['cold', 'jupyter-scheduler']:.2f}x)"
        )
    else:
        notes.append(f"anchor unavailable: {scheduler_missing}")
    notes.append(
        "where a cold start's time goes (medians, each timed alone): the manager's own work "
        f"(snapshot, store, files, launch; submit to RUNNING) {statistics.median(running):.2f} s, "
        f"a new interpreter with the runner's imports {median['interpreter + runner imports']:.2f} s, "
        f"the kernel's start until it answers {median['kernel start until it answers']:.2f} s, "
        f"its shutdown after the last cell {median['kernel shutdown']:.2f} s; before warm starts "
        "the runner's end was seen at the next poll (poll_interval 0.5 s: 0.25 s on average), "
        "now through a pidfd as it happens. A warm start does the imports and the kernel's "
        "start before the submission"
    )
    return notes


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

        pieces = _cold_start_pieces()
        cold, cold_first, running, warm, warm_first = [], [], [], [], []
        pm_subprocess, pm_in_process = [], []
        for round_ in range(ROUNDS):
            sub_running, sub_first, sub_total, _, _ = _ours(workdir / f"cold-{round_}", small)
            cold.append(sub_total)
            cold_first.append(sub_first)
            running.append(sub_running)
            _, sub_first, sub_total, _, _ = _ours(workdir / f"warm-{round_}", small, warm=True)
            warm.append(sub_total)
            warm_first.append(sub_first)
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

        anchors = {
            "papermill subprocess": Timing(tuple(pm_subprocess)),
            "papermill in-process": Timing(tuple(pm_in_process)),
        }
        if scheduler:
            anchors["jupyter-scheduler"] = Timing(tuple(t for _, t in scheduler))
        versus: dict[tuple[str, str], Row] = {}
        for start_kind, samples in (("cold", cold), ("warm", warm)):
            for anchor, timing in anchors.items():
                row = Row(
                    f"{start_kind}: submit to final: vs {anchor}", Timing(tuple(samples)), timing
                )
                versus[start_kind, anchor] = row
                section.rows.append(row)
        if scheduler:
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
            Row("cold: submit to first cell output in the log", Timing(tuple(cold_first)))
        )
        warm_first_output = Timing(tuple(warm_first))
        section.rows.append(Row("warm: submit to first cell output in the log", warm_first_output))
        for piece, timing in pieces.items():
            section.rows.append(Row(f"cold start, alone: {piece}", timing))

        # (b) the large log
        our_first, our_last, our_big, log = _ours_big(workdir / "big", big)
        our_lines, our_order = _count_lines(log, b"[cell 0] ")
        _, _, warm_big, warm_log = _ours_big(workdir / "big-warm", big, warm=True)
        warm_lines, warm_order = _count_lines(warm_log, b"[cell 0] ")
        stdout_file = workdir / "papermill-stdout.txt"
        pm_big = _papermill_subprocess(big, workdir / "big-out.ipynb", stdout_file)
        pm_lines, pm_order = _count_lines(stdout_file)
        section.rows.append(
            Row(f"{LOG_LINES:,} lines: submit to final", Timing((our_big,)), Timing((pm_big,)))
        )
        section.rows.append(
            Row(
                f"{LOG_LINES:,} lines, warm start: submit to final",
                Timing((warm_big,)),
                Timing((pm_big,)),
            )
        )
        k8s_first, k8s_last, k8s_big, k8s_log = _ours_on_kubernetes(workdir / "k8s", big)
        k8s_lines, k8s_order = _count_lines(k8s_log, b"[cell 0] ")
        section.rows.append(
            Row(
                f"{LOG_LINES:,} lines, KubernetesExecutor on the emulator",
                Timing((k8s_big,)),
                Timing((pm_big,)),
            )
        )
        endless = _write_notebook(workdir / "endless.ipynb", ENDLESS_CELLS)
        at_kill, after_kill, kill_whole, kill_ends_whole, kill_status = _killed_runner(
            workdir / "killed", endless
        )

    section.notes.extend(_start_notes(versus, warm_first_output, pieces, running, reason))
    our_rate, k8s_rate = our_lines / (our_last - our_first), k8s_lines / (k8s_last - k8s_first)
    section.notes.append(
        f"log capture: ours {our_rate:,.0f} lines/s from the first to the last line in the "
        f"durable log ({our_lines / our_big:,.0f} lines/s from submission to final; with a "
        f"warm start {warm_lines / warm_big:,.0f} lines/s, {warm_lines:,} kept"
        f"{'' if warm_order else ' OUT OF ORDER'}), {our_lines:,} of "
        f"{LOG_LINES:,} lines kept{'' if our_order else ' OUT OF ORDER'}; papermill "
        f"stdout_file {pm_lines / pm_big:,.0f} lines/s from its start, {pm_lines:,} of "
        f"{LOG_LINES:,}{'' if pm_order else ' OUT OF ORDER'}"
    )
    section.notes.append(
        "target: log capture at least 100,000 lines/s locally, no line lost: "
        f"{_verdict(our_rate >= 100_000 and our_lines == LOG_LINES and our_order)} "
        f"({our_rate:,.0f} lines/s)"
    )
    section.notes.append(
        f"log capture through a pod (KubernetesExecutor, emulator): {k8s_rate:,.0f} lines/s "
        f"from the first to the last line in the durable log ({k8s_lines / k8s_big:,.0f} "
        f"lines/s from submission to final), {k8s_lines:,} of {LOG_LINES:,} lines kept"
        f"{'' if k8s_order else ' OUT OF ORDER'}"
    )
    section.notes.append(
        "target: log capture at least 50,000 lines/s through a pod, no line lost: "
        f"{_verdict(k8s_rate >= 50_000 and k8s_lines == LOG_LINES and k8s_order)} "
        f"({k8s_rate:,.0f} lines/s)"
    )
    section.notes.append(
        f"runner killed (SIGKILL) mid-stream: {after_kill:,} lines kept of the {at_kill:,} in "
        f"the log at the kill, {'all whole, 0..N in order' if kill_whole else 'TORN OR OUT OF ORDER'}"
        f"{'' if kill_ends_whole else ', the log ends mid-line'}, job {kill_status}: "
        f"{_verdict(after_kill >= at_kill and kill_whole and kill_status == 'FAILED')} "
        "(all lines written before the kill are kept)"
    )
    section.notes.append(
        "ours: JobManager + LocalExecutor with product defaults (poll_interval 0.5 s, the "
        "runner's end seen through a pidfd); running = the RUNNING state, set when the runner "
        "process is launched or a warm one takes the job"
    )
    return section
