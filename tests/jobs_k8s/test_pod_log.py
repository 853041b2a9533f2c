"""Copying a pod's log exactly once, and reading the runner's report out of it (pure parts)."""

from __future__ import annotations

from jupyter_to_job.executors.pod_log import PodLogCursor, RunProgress, timestamp_key
from jupyter_to_job.executors.pod_status import pending_reason
from jupyter_to_job.models import JobErrorInfo, JobStatus
from jupyter_to_job.runfiles import (
    STATUS_MARKER,
    RunnerStatus,
    compact_status,
    parse_compact_status,
)

T1 = "2026-03-23T10:00:01.5Z"
T2 = "2026-03-23T10:00:01.52Z"  # later than T1, though it sorts before it as text
T3 = "2026-03-23T10:00:02.000000001Z"


def log(*lines: tuple[str, str]) -> bytes:
    return "".join(f"{stamp} {text}\n" for stamp, text in lines).encode()


def test_timestamps_compare_in_time_order_whatever_their_digits() -> None:
    assert T2 < T1 and timestamp_key(T1) < timestamp_key(T2) < timestamp_key(T3)
    assert timestamp_key("2026-03-23T10:00:01Z") < timestamp_key(T1)


def test_a_stream_read_again_after_a_break_yields_only_new_lines() -> None:
    # Given a stream that broke after two of three lines sharing one timestamp
    cursor = PodLogCursor()
    cursor.follow("pod-1")
    first = cursor.reading()
    assert first.feed(log((T1, "a"), (T1, "b"))[:-1]) == b"a\n"  # "b" is not whole yet
    assert first.feed(b"\n") == b"b\n"

    # When the log is read again from that second (sinceTime), with more written since
    again = cursor.reading()
    lines = again.feed(log((T1, "a"), (T1, "b"), (T1, "c"), (T2, "d"), (T3, "e")))

    # Then only the lines not copied before come out, in order
    assert lines == b"c\nd\ne\n"
    assert cursor.since_time() == "2026-03-23T10:00:02Z"
    assert cursor.copied_bytes == len("abcde") * 2


def test_a_last_line_without_newline_is_kept_when_the_container_has_ended() -> None:
    cursor = PodLogCursor()
    reading = cursor.reading()
    assert reading.feed(f"{T1} done\n{T2} no newline".encode()) == b"done\n"
    assert reading.finish() == b"no newline\n"
    assert cursor.reading().feed(log((T1, "done"), (T2, "no newline"))) == b""


def test_a_new_pod_starts_a_new_log() -> None:
    cursor = PodLogCursor()
    cursor.follow("pod-1")
    cursor.reading().feed(log((T2, "first try")))
    cursor.follow("pod-2")
    assert cursor.reading().feed(log((T1, "second try"))) == b"second try\n"


def test_the_cursor_survives_a_restart_as_json() -> None:
    cursor = PodLogCursor()
    cursor.follow("pod-1")
    cursor.reading().feed(log((T1, "a"), (T1, "b")))

    restored = PodLogCursor.from_dict(cursor.to_dict())

    assert restored.reading().feed(log((T1, "a"), (T1, "b"), (T2, "c"))) == b"c\n"
    assert PodLogCursor.from_dict(None) == PodLogCursor()


def test_progress_and_the_final_status_are_read_from_the_runners_lines() -> None:
    progress = RunProgress("job-1")
    final = RunnerStatus(
        job_id="job-1",
        state=JobStatus.FAILED,
        cells_total=3,
        cells_completed=1,
        exit_code=1,
        error=JobErrorInfo(cell_index=1, ename="ValueError", evalue="bad", traceback="long..."),
    )

    shown = [
        line
        for line in [
            "[job] starting kernel 'python3': 3 code cells to run\n",
            "[job] cell 0 started (1 of 3)\n",
            "[cell 0] [job] cell 9 started (9 of 9)\n",  # a notebook's print proves nothing
            "[job] cell 1 started (2 of 3)\n",
            STATUS_MARKER + compact_status(final) + "\n",
        ]
        if progress.observe(line)
    ]

    assert len(shown) == 4  # the final-status line is kept out of the log
    assert progress.final is not None and progress.final.error is not None
    assert (progress.cells_completed, progress.cells_total, progress.current_cell) == (1, 3, 1)
    assert progress.status().error == JobErrorInfo(cell_index=1, ename="ValueError", evalue="bad")


def test_a_log_read_again_after_many_breaks_has_every_line_once_in_order() -> None:
    # Given a pod log of 20,000 lines, runs of 7 sharing a timestamp (as fast prints
    # do when the clock is coarse), trailing zeros dropped as the kubelet does, where
    # each line says its number
    def stamp(n: int) -> str:
        fraction = f"{n % 1000 // 7:03d}".rstrip("0")
        return f"2026-03-23T10:00:{n // 1000:02d}" + (f".{fraction}Z" if fraction else "Z")

    stamps = [stamp(n) for n in range(20_000)]
    whole = log(*((stamp, f"[cell 0] {n}") for n, stamp in enumerate(stamps)))
    cursor = PodLogCursor()
    cursor.follow("pod-1")
    copied = []

    # When the stream breaks every 6,007 bytes, mid-line, and each new read starts
    # where the API server starts it: at the whole second of the cursor's last line
    delivered = 0
    while delivered < len(whole):
        since = cursor.since_time()
        start = 0 if since is None else whole.index(since.removesuffix("Z").encode())
        piece = whole[start : delivered + 6_007]
        reading = cursor.reading()
        for at in range(0, len(piece), 1_000):  # the response arrives in chunks
            copied.append(reading.feed(piece[at : at + 1_000]))
        delivered = start + len(piece)
    copied.append(reading.finish())

    # Then every line is copied exactly once, in order, without its timestamp
    lines = b"".join(copied).decode().splitlines()
    assert lines == [f"[cell 0] {n}" for n in range(20_000)]
    assert cursor.copied_bytes == len(b"".join(copied))


def test_the_runners_lines_are_read_out_of_a_block_of_cell_output() -> None:
    # Given a block of pod log lines: cell output, progress and the final status
    progress = RunProgress("job-1")
    final = RunnerStatus(job_id="job-1", state=JobStatus.COMPLETED, cells_total=2, exit_code=0)
    block = (
        "[job] starting kernel 'python3': 2 code cells to run\n"
        "[job] cell 0 started (1 of 2)\n"
        + "".join(f"[cell 0] {n}\n" for n in range(1000))
        + "[cell 0] [job] cell 7 started (7 of 9)\n"
        "[job] cell 1 started (2 of 2)\n"
        "[cell 1] done\n"
        f"{STATUS_MARKER}{compact_status(final)}\n"
    ).encode()

    # When the block is observed at once
    kept = progress.observe_lines(block)

    # Then the log keeps everything but the final-status line, and progress is known
    assert kept == block[: block.index(STATUS_MARKER.encode())]
    assert (progress.current_cell, progress.cells_completed, progress.cells_total) == (1, 1, 2)
    assert progress.final is not None and progress.final.state is JobStatus.COMPLETED


def test_the_compact_status_fits_a_termination_message_and_reads_back() -> None:
    huge = RunnerStatus(
        job_id="job-1",
        state=JobStatus.FAILED,
        message="Cell 4 raised ValueError: " + "é" * 5000,
        error=JobErrorInfo(cell_index=4, ename="ValueError", evalue="é" * 5000, traceback="x"),
        exit_code=1,
        cells_total=9,
        cells_completed=4,
    )

    text = compact_status(huge)

    assert len(text.encode()) <= 2000
    back = parse_compact_status(text)
    assert back is not None and back.error is not None
    assert (back.state, back.exit_code, back.cells_completed, back.error.cell_index) == (
        JobStatus.FAILED,
        1,
        4,
        4,
    )
    # The kubelet's FallbackToLogsOnError gives the log's tail instead of the message
    tail = f"[cell 4] ValueError\n[job] failed: ...\n{STATUS_MARKER}{text}\n"
    assert parse_compact_status(tail) == back
    assert parse_compact_status("[cell 0] Killed\n") is None


def test_a_pending_pod_says_why() -> None:
    unschedulable = {
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
                }
            ]
        }
    }
    bad_image = {
        "status": {
            "containerStatuses": [
                {
                    "name": "notebook",
                    "state": {"waiting": {"reason": "ImagePullBackOff", "message": "not found"}},
                }
            ]
        }
    }
    pulling = {"status": {"containerStatuses": [{"name": "notebook", "state": {"waiting": {}}}]}}

    assert pending_reason(unschedulable) == (
        "unschedulable",
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
    )
    assert pending_reason(bad_image) == ("start", "ImagePullBackOff: not found")
    assert pending_reason(pulling) is None
