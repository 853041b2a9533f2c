"""Scenario: the job service restarts while jobs run; nothing is lost and nothing runs twice."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil

from jupyter_to_job.models import CreateJob, JobStatus
from jupyter_to_job.runfiles import read_status
from tests.support import eventually
from tests.support.job_managers import ManagerFactory, finished

from ..support.notebooks import append_line, notebook, wait_for_file


def gone(pid: int | None) -> bool:
    """True once the process has exited (a zombie child of ours counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_a_restarted_service_adopts_live_jobs_and_fails_vanished_ones(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    root, runs = tmp_path / "root", tmp_path / "runs.txt"
    gates = {name: tmp_path / f"gate-{name}" for name in ("live", "vanishing", "done", "queued")}
    before = await make_manager(root=root, max_running_jobs=3)
    ids = {}
    for name in ("live", "vanishing", "done", "queued"):
        nb = notebook(append_line(runs, name), wait_for_file(gates[name]), "print('finished')")
        request = CreateJob(input_path=f"{name}.ipynb", output_formats=["ipynb"])
        ids[name] = (await before.create("alice", request, notebook=nb)).job_id
    for name in ("live", "vanishing", "done"):
        await eventually(
            lambda name=name: before.describe(ids[name]).current_cell == 1,
            what=f"{name} to wait at its gate",
        )
    assert before.describe(ids["queued"]).status is JobStatus.QUEUED

    # The service goes away; its jobs run on. Then, while it is down, one job's
    # processes die (a reboot, an OOM kill) and another finishes on its own.
    await before.shutdown()
    vanishing = read_status(before.job_files(ids["vanishing"]))
    assert vanishing is not None and vanishing.runner_pid and vanishing.kernel_pid
    os.killpg(vanishing.runner_pid, signal.SIGKILL)
    os.killpg(vanishing.kernel_pid, signal.SIGKILL)
    gates["done"].touch()
    await eventually(
        lambda: (
            (s := read_status(before.job_files(ids["done"]))) and s.final and gone(s.runner_pid)
        ),
        what="the unwatched job to finish",
    )

    after = await make_manager(root=root, max_running_jobs=3)
    report = after.reconcile_report

    assert report.adopted == [ids["live"]]
    assert report.ended == [ids["vanishing"], ids["done"]]
    lost = after.describe(ids["vanishing"])
    assert lost.status is JobStatus.FAILED
    assert lost.status_message is not None
    assert lost.status_message.startswith(
        "The job service restarted and the job's process was gone"
    )
    assert after.describe(ids["done"]).status is JobStatus.COMPLETED
    assert after.describe(ids["live"]).status is JobStatus.RUNNING
    # The queued job kept its place and starts now that a slot is free.
    await eventually(
        lambda: after.describe(ids["queued"]).current_cell == 1, what="the queued job to start"
    )

    gates["live"].touch()
    gates["queued"].touch()
    live = await finished(after, ids["live"])
    queued = await finished(after, ids["queued"])

    assert (live.status, queued.status) == (JobStatus.COMPLETED, JobStatus.COMPLETED)
    assert "finished" in after.read_log(ids["live"]).data
    assert sorted(runs.read_text().split()) == ["done", "live", "queued", "vanishing"]
