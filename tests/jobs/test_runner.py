"""Scenarios for the in-job runner, on real python3 kernels.

Most run the runner in this process (``run_job``); the stop scenario runs it as
the executor does, ``python -m jupyter_to_job.runner``, and sends it SIGTERM.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from jupyter_to_job.runfiles import EXIT_COMPLETED, EXIT_FAILED, EXIT_INVALID_JOB, EXIT_STOPPED
from jupyter_to_job.runner import run_job
from tests.support import eventually

from ..support.notebooks import (
    make_job_dir,
    notebook,
    read_output,
    read_status_json,
    stream_text,
    wait_for_file,
)
from .conftest import HANG_GUARD, REPO


async def run(files, log: Path | None = None) -> int:  # type: ignore[no-untyped-def]
    return await asyncio.wait_for(run_job(files.directory, log_file=log), HANG_GUARD)


def log_lines(files) -> list[str]:  # type: ignore[no-untyped-def]
    return (files.directory / "job.log").read_text().splitlines()


async def test_parameters_are_injected_after_the_parameters_cell(tmp_path: Path) -> None:
    nb = notebook(
        ("learning_rate = 0.1\nrun_name = 'default'\nlayers = [1]", ["parameters"]),
        "print(learning_rate, run_name, sum(layers))",
    )
    files = make_job_dir(
        tmp_path / "job",
        nb,
        parameters={"learning_rate": 0.5, "run_name": "run-7", "layers": [1, 2, 3]},
    )

    assert await run(files) == EXIT_COMPLETED

    executed = read_output(files)
    assert executed.cells[1].metadata.tags == ["injected-parameters"]
    assert "learning_rate = 0.5" in executed.cells[1].source
    assert stream_text(executed.cells[2]) == "0.5 run-7 6\n"
    assert executed.metadata.papermill.parameters["run_name"] == "run-7"


async def test_log_holds_every_cells_output_in_order_with_progress(tmp_path: Path) -> None:
    nb = notebook(
        "print('loading data')\nprint('rows: 3')",
        ("# Training", ["markdown"]),
        "import sys\nfor epoch in range(3):\n    print(f'epoch {epoch}')\nprint('warning!', file=sys.stderr)",
        "21 * 2",
    )
    files = make_job_dir(tmp_path / "job", nb, output_formats=["ipynb", "html"])

    assert await run(files) == EXIT_COMPLETED

    output_lines = [line for line in log_lines(files) if line.startswith("[cell")]
    assert output_lines == [
        "[cell 0] loading data",
        "[cell 0] rows: 3",
        "[cell 2] epoch 0",
        "[cell 2] epoch 1",
        "[cell 2] epoch 2",
        "[cell 2] warning!",
        "[cell 3] 42",
    ]
    status = read_status_json(files)
    assert status["state"] == "COMPLETED"
    assert (status["cells_completed"], status["cells_total"], status["current_cell"]) == (
        3,
        3,
        None,
    )
    assert status["exit_code"] == 0
    assert "All 3 code cells ran." in status["message"]
    assert "epoch 2" in files.output("html").read_text()


async def test_progress_and_output_are_saved_while_a_cell_still_runs(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    nb = notebook("print('step one done')", wait_for_file(gate), "print('step three')")
    files = make_job_dir(tmp_path / "job", nb)

    job = asyncio.ensure_future(run(files))
    try:
        status = await eventually(
            lambda: (s := _status(files)) and s["current_cell"] == 1 and s,
            what="the runner to reach cell 1",
        )
        assert (status["cells_completed"], status["cells_total"]) == (1, 3)
        # The first cell's output is already in the saved notebook.
        assert stream_text(read_output(files).cells[0]) == "step one done\n"
    finally:
        gate.touch()
    assert await job == EXIT_COMPLETED
    assert read_status_json(files)["cells_completed"] == 3


def _status(files) -> dict | None:  # type: ignore[no-untyped-def]
    try:
        return read_status_json(files)
    except (OSError, ValueError):
        return None


async def test_an_error_in_cell_3_is_reported_with_its_index_name_and_traceback(
    tmp_path: Path,
) -> None:
    nb = notebook(
        "x = 1",
        "print('cell one')",
        "values = []",
        "def check(v):\n    raise ValueError(f'bad input: {v}')\ncheck(7)",
        "print('never runs')",
    )
    files = make_job_dir(tmp_path / "job", nb)

    assert await run(files) == EXIT_FAILED

    status = read_status_json(files)
    assert status["state"] == "FAILED"
    # (the fourth code cell, counted from 1 as people do; the index is the notebook's)
    assert status["message"] == "Cell 4 raised ValueError: bad input: 7"
    error = status["error"]
    assert (error["cell_index"], error["ename"], error["evalue"]) == (
        3,
        "ValueError",
        "bad input: 7",
    )
    assert "check(7)" in error["traceback"] and "\x1b[" not in error["traceback"]
    assert status["cells_completed"] == 3
    executed = read_output(files)
    assert executed.cells[4].execution_count is None
    assert "[cell 3] ValueError: bad input: 7" in log_lines(files)


async def test_a_cell_past_its_timeout_fails_the_job(tmp_path: Path) -> None:
    nb = notebook("print('quick')", "import time\ntime.sleep(600)", "print('never')")
    files = make_job_dir(tmp_path / "job", nb, cell_timeout_seconds=1)

    assert await run(files) == EXIT_FAILED

    status = read_status_json(files)
    assert status["error"]["ename"] == "CellTimeoutError"
    assert status["error"]["cell_index"] == 1
    assert "cell timeout of 1 s" in status["message"]
    assert stream_text(read_output(files).cells[0]) == "quick\n"


async def test_a_killed_kernel_is_reported_as_a_dead_kernel(tmp_path: Path) -> None:
    nb = notebook(
        "print('before the crash')",
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
        "print('never')",
    )
    files = make_job_dir(tmp_path / "job", nb)

    assert await run(files) == EXIT_FAILED

    status = read_status_json(files)
    assert status["error"]["ename"] == "DeadKernelError"
    assert status["error"]["evalue"] == "the kernel died (out of memory?)"
    assert status["error"]["cell_index"] == 1
    assert status["message"].startswith("The kernel died while running cell 2 (out of memory?)")
    executed = read_output(files)
    assert stream_text(executed.cells[0]) == "before the crash\n"
    assert executed.cells[1].outputs[-1].ename == "DeadKernelError"


async def test_sigterm_stops_after_the_current_cell_and_keeps_what_ran(tmp_path: Path) -> None:
    gate = tmp_path / "never-opened"
    nb = notebook("print('first cell ran')", wait_for_file(gate), "print('never')")
    files = make_job_dir(tmp_path / "job", nb)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    runner = subprocess.Popen(
        [sys.executable, "-m", "jupyter_to_job.runner", "--job-dir", str(files.directory)],
        env=env,
        start_new_session=True,
    )
    try:
        await eventually(
            lambda: (s := _status(files)) and s["current_cell"] == 1, what="cell 1 to start"
        )
        runner.send_signal(signal.SIGTERM)
        exit_code = await asyncio.wait_for(asyncio.to_thread(runner.wait), HANG_GUARD)
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()

    assert exit_code == EXIT_STOPPED
    status = read_status_json(files)
    assert status["state"] == "STOPPED"
    assert status["message"].startswith("Stopped (SIGTERM) after 1 of 3 code cells")
    executed = read_output(files)
    assert stream_text(executed.cells[0]) == "first cell ran\n"
    assert executed.cells[2].execution_count is None
    assert any("stop requested (SIGTERM)" in line for line in log_lines(files))


async def test_a_notebook_that_exits_early_completes(tmp_path: Path) -> None:
    nb = notebook("print('enough')", "raise SystemExit(0)", "print('skipped')")
    files = make_job_dir(tmp_path / "job", nb)

    assert await run(files) == EXIT_COMPLETED
    assert "ended itself in cell 2" in read_status_json(files)["message"]


async def test_a_missing_kernel_fails_before_anything_runs(tmp_path: Path) -> None:
    files = make_job_dir(tmp_path / "job", notebook("print(1)"), kernel_name="julia-9.9")

    assert await run(files) == EXIT_INVALID_JOB

    status = read_status_json(files)
    assert status["state"] == "FAILED"
    assert "'julia-9.9' is not installed" in status["message"]
    assert "python3" in status["message"]


async def test_the_injected_parameters_cell_is_named_and_not_counted_as_a_users_cell(
    tmp_path: Path,
) -> None:
    # Given a notebook of two code cells, run with parameters (papermill adds a third)
    nb = notebook(("size = 1", ["parameters"]), "print(size * 2)")
    files = make_job_dir(tmp_path / "job", nb, parameters={"size": 21})

    assert await run(files) == EXIT_COMPLETED

    # Then the job counts the user's two cells only, and the log names the parameters cell
    status = read_status_json(files)
    assert (status["cells_completed"], status["cells_total"]) == (2, 2)
    assert status["message"] == "All 2 code cells ran."
    lines = log_lines(files)
    assert "[job] setting parameters (cell 1, injected-parameters)" in lines
    assert "[job] cell 2 started (2 of 2)" in lines
    assert stream_text(read_output(files).cells[2]) == "42\n"


async def test_a_one_cell_notebook_says_its_one_cell_ran(tmp_path: Path) -> None:
    files = make_job_dir(tmp_path / "job", notebook("print('done')"))

    assert await run(files) == EXIT_COMPLETED

    assert read_status_json(files)["message"] == "The one code cell ran."
