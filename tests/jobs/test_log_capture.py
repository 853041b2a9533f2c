"""Scenarios for the job log as the runner writes it: fast, whole lines, nothing lost.

The runner writes one message of cell output at a time (not a line at a time) and
holds back only a line the cell has not ended. These scenarios check what a user
reading the log would notice: every line once, in order, whole, with its cell's
prefix, also when the runner or the kernel is killed in the middle of a stream.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from jupyter_to_job.logs import LogStore
from jupyter_to_job.models import CreateJob, JobStatus
from jupyter_to_job.runfiles import EXIT_FAILED
from jupyter_to_job.runner import JobLog, run_job
from tests.support import eventually
from tests.support.job_managers import ManagerFactory, finished

from ..support.notebooks import make_job_dir, notebook, read_status_json
from .conftest import HANG_GUARD, REPO

# A cell that prints numbered lines until it is killed.
ENDLESS = "import itertools\nfor i in itertools.count():\n    print(i)"
NUMBERED = re.compile(rb"\[cell 0\] (\d+)")


def numbered_lines(log: bytes) -> tuple[list[int], bytes]:
    """The numbers of the whole ``[cell 0] N`` lines, and what follows the last newline;
    fails on any other whole line that is not the runner's own."""
    end = log.rfind(b"\n") + 1
    numbers = []
    for line in log[:end].splitlines():
        if line.startswith(b"[job] "):
            continue
        match = NUMBERED.fullmatch(line)
        assert match is not None, f"a torn or unknown line in the log: {line[:80]!r}"
        numbers.append(int(match.group(1)))
    return numbers, log[end:]


async def test_a_message_of_many_lines_is_written_with_every_line_prefixed(
    tmp_path: Path,
) -> None:
    # Given the runner's log, in the runner's event loop
    path = tmp_path / "job.log"
    log = JobLog(path, max_bytes=1024 * 1024, partial_delay=3600)

    # When a cell's output arrives as one message of many lines, then an unfinished line
    log.cell(0, "".join(f"{n}\n" for n in range(1000)))
    log.cell(0, "loss 0.1")

    # Then each whole line carries the cell's prefix, and the unfinished one waits
    assert path.read_text().splitlines() == [f"[cell 0] {n}" for n in range(1000)]

    # When the cell ends its line, and another cell and the runner write
    log.cell(0, "2\nepoch 2 done\n")
    log.cell(1, "half a line")
    log.job("cell 1 failed")
    log.close()

    # Then the lines read as they were printed, each writer's on lines of its own
    assert path.read_text().splitlines()[1000:] == [
        "[cell 0] loss 0.12",
        "[cell 0] epoch 2 done",
        "[cell 1] half a line",
        "[job] cell 1 failed",
    ]


async def test_a_progress_bar_without_newline_shows_while_it_runs(tmp_path: Path) -> None:
    # Given the runner's log, in the runner's event loop
    path = tmp_path / "job.log"
    log = JobLog(path, max_bytes=1024 * 1024, partial_delay=0.05)

    # When a cell redraws a progress bar with carriage returns and no newline
    log.cell(0, "\r 10%|#         |\r 20%|##        |")

    # Then the bar reaches the log soon, though its line is not ended
    await eventually(lambda: path.read_bytes(), what="the progress bar in the log")
    assert path.read_bytes() == b"[cell 0] \r 10%|#         |\r 20%|##        |"

    # And the bar's end continues the same line
    log.cell(0, "\r100%|##########|\n")
    log.close()
    assert path.read_bytes().endswith(b"|\r100%|##########|\n")
    assert path.read_bytes().count(b"[cell 0]") == 1


def test_the_log_stops_at_its_size_limit_and_says_so(tmp_path: Path) -> None:
    # Given a log limited to 1 MiB
    path = tmp_path / "job.log"
    log = JobLog(path, max_bytes=1024 * 1024)

    # When a cell prints 3 MiB in 64 KiB messages
    line = "x" * 1023 + "\n"
    for _ in range(48):
        log.cell(0, line * 64)
    log.close()

    # Then the log holds at most the limit (and the sentence saying why it stopped)
    text = path.read_text()
    assert len(text.encode()) <= 1024 * 1024 + 200
    assert text.splitlines()[-1].startswith("[job] the log reached its limit of 1 MiB")
    assert all(line == "[cell 0] " + "x" * 1023 for line in text.splitlines()[:-1])


def _start_runner(files, log: Path) -> subprocess.Popen:  # type: ignore[no-untyped-def]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "jupyter_to_job.runner", "--job-dir", str(files.directory)]
        + ["--log-file", str(log)],
        env=env,
        start_new_session=True,
    )


def _kill_kernel(files) -> None:  # type: ignore[no-untyped-def]
    kernel = read_status_json(files).get("kernel_pid")
    if kernel:
        try:
            os.killpg(kernel, signal.SIGKILL)
        except ProcessLookupError:
            pass


async def test_a_runner_killed_mid_stream_leaves_every_line_it_wrote_whole(
    tmp_path: Path,
) -> None:
    # Given a runner whose cell prints numbered lines as fast as it can, into the
    # service's log store
    store = LogStore(root=str(tmp_path / "logs"))
    files = make_job_dir(tmp_path / "job", notebook(ENDLESS))
    runner = _start_runner(files, store.create("killed"))
    try:
        # When the runner is killed (SIGKILL: no chance to flush) with 100,000 lines out
        await eventually(lambda: store.size("killed") > 1_600_000, what="100,000 lines in the log")
        os.killpg(runner.pid, signal.SIGKILL)
        await asyncio.wait_for(asyncio.to_thread(runner.wait), HANG_GUARD)
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()
        _kill_kernel(files)
    kept = store.path("killed").read_bytes()

    # Then the log holds lines 0..N, each once, in order, every one whole; at most
    # an unfinished last line, and that holds the next number, whole
    numbers, unfinished = numbered_lines(kept)
    assert len(numbers) >= 100_000
    assert numbers == list(range(len(numbers)))
    assert unfinished in (b"", f"[cell 0] {len(numbers)}".encode())

    # And the service can still read and add to it: its line starts a line of its own
    store.append_line("killed", "[job] the runner process was killed")
    tail = store.tail("killed", lines=2).data.splitlines()
    assert tail[-1] == "[job] the runner process was killed"
    assert NUMBERED.fullmatch(tail[0].encode())


async def test_a_kernel_killed_mid_stream_leaves_every_line_it_sent(tmp_path: Path) -> None:
    # Given a job whose cell prints numbered lines as fast as it can
    files = make_job_dir(tmp_path / "job", notebook(ENDLESS))
    log = files.directory / "job.log"
    job = asyncio.ensure_future(asyncio.wait_for(run_job(files.directory), HANG_GUARD))
    try:
        # When its kernel is killed with 50,000 lines out
        await eventually(
            lambda: log.exists() and log.stat().st_size > 800_000,
            what="50,000 lines in the log",
        )
        _kill_kernel(files)
        exit_code = await job
    finally:
        if not job.done():
            _kill_kernel(files)
            await job

    # Then the job failed with a dead kernel, and the log holds lines 0..N, each once,
    # in order, whole, followed by the runner's own account
    assert exit_code == EXIT_FAILED
    kept = log.read_bytes()
    numbers, unfinished = numbered_lines(kept)
    assert unfinished == b""
    assert len(numbers) >= 50_000
    assert numbers == list(range(len(numbers)))
    assert kept.splitlines()[-1].startswith(b"[job] failed: The kernel died while running")


async def test_a_local_job_whose_runner_is_killed_keeps_its_log_whole(
    make_manager: ManagerFactory,
) -> None:
    # Given a local job printing numbered lines as fast as it can
    manager = await make_manager()
    created = await manager.create(
        "alice", CreateJob(input_path="endless.ipynb"), notebook=notebook(ENDLESS)
    )
    job_id = created.job_id
    await eventually(
        lambda: manager.log_store.size(job_id) > 800_000, what="50,000 lines in the log"
    )

    # When its runner process is killed outright
    row = manager.store.get(job_id)
    assert row is not None and row.pid is not None
    at_kill = manager.log_store.path(job_id).read_bytes()
    os.kill(row.pid, signal.SIGKILL)
    job = await finished(manager, job_id)

    # Then the job failed, and its log keeps every line it had at the kill, each once,
    # in order and whole, and reads on to the service's account of the end
    assert job.status is JobStatus.FAILED
    everything = manager.log_store.path(job_id).read_bytes()
    numbers, unfinished = numbered_lines(everything)
    assert unfinished == b""
    assert numbers == list(range(len(numbers)))
    assert len(numbers) >= len(numbered_lines(at_kill)[0])
    assert manager.log_store.tail(job_id, lines=1).data.startswith("[job] ")
