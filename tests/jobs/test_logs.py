"""Scenarios for the durable log store: paging, tails, following, safe names."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from jupyter_to_job.logs import LogStore

JOB = "0f0e8a52-4b1c-4a57-9d8e-6a3c3b1f0b11"


@pytest.fixture
def logs(tmp_path: Path) -> LogStore:
    return LogStore(root=str(tmp_path / "logs"), follow_interval=0.01)


def test_a_log_is_paged_by_byte_offsets_on_whole_characters(logs: LogStore) -> None:
    logs.append(JOB, "[cell 0] température: 21°C\n[cell 1] ok\n")

    first = logs.read(JOB, 0, limit=22)  # the limit falls inside "é"... or "°"
    rest = logs.read(JOB, first.next_offset)

    assert first.data + rest.data == "[cell 0] température: 21°C\n[cell 1] ok\n"
    assert "\ufffd" not in first.data + rest.data
    assert rest.next_offset == rest.size == logs.size(JOB)


def test_a_job_line_never_joins_a_half_written_progress_line(logs: LogStore) -> None:
    logs.append(JOB, "[cell 2] progress 50%")
    logs.append_line(JOB, "[job] stop requested")
    logs.append_line(JOB, "[job] stopped")

    assert logs.read(JOB).data == ("[cell 2] progress 50%\n[job] stop requested\n[job] stopped\n")


def test_reading_past_the_end_or_a_missing_log_gives_nothing(logs: LogStore) -> None:
    assert logs.read(JOB).data == ""
    logs.append(JOB, "line\n")
    assert logs.read(JOB, 1000).data == ""


def test_tail_gives_the_last_lines(logs: LogStore) -> None:
    logs.append(JOB, "".join(f"line {i}\n" for i in range(10)))

    tail = logs.tail(JOB, 3)

    assert tail.data == "line 7\nline 8\nline 9\n"
    assert logs.read(JOB, tail.offset).data == tail.data
    assert logs.tail(JOB, 50).data.count("\n") == 10


def test_tail_of_a_huge_log_starts_on_a_line(logs: LogStore) -> None:
    logs.read_limit = 64
    logs.append(JOB, "".join(f"line number {i}\n" for i in range(100)))

    tail = logs.tail(JOB, 1000)

    assert tail.data.startswith("line number")
    assert tail.data.endswith("line number 99\n")


async def test_follow_yields_new_data_until_the_job_is_final(logs: LogStore) -> None:
    logs.append(JOB, "[job] started\n")
    final = False

    async def write_more() -> None:
        nonlocal final
        for i in range(3):
            await asyncio.sleep(0.02)
            logs.append(JOB, f"[cell 0] step {i}\n")
        logs.append(JOB, "[job] completed\n")
        final = True

    writer = asyncio.ensure_future(write_more())
    seen = [piece.data async for piece in logs.follow(JOB, is_final=lambda: final)]
    await writer

    assert "".join(seen) == logs.read(JOB).data
    assert "".join(seen).endswith("[job] completed\n")


async def test_a_follower_reads_each_byte_of_a_growing_log_once(logs: LogStore) -> None:
    # Given a job writing 20,000 lines in 400 appends while its log is followed,
    # with reads of at most 64 KiB
    logs.create(JOB)
    final = False

    async def write() -> None:
        nonlocal final
        for batch in range(400):
            logs.append(JOB, "".join(f"[cell 0] {batch * 50 + n}\n" for n in range(50)))
            await asyncio.sleep(0)
        final = True

    writer = asyncio.ensure_future(write())
    pieces = [p async for p in logs.follow(JOB, is_final=lambda: final, limit=65536)]
    await writer

    # Then each read starts where the last one ended, and together they are the log,
    # read once: no read went back to the start
    assert [p.offset for p in pieces[1:]] == [p.next_offset for p in pieces[:-1]]
    assert pieces[0].offset == 0 and pieces[-1].next_offset == logs.size(JOB)
    assert "".join(p.data for p in pieces).splitlines() == [f"[cell 0] {n}" for n in range(20_000)]


@pytest.mark.parametrize("bad", ["../secrets", "a/b", "", ".hidden", "x" * 65])
def test_job_ids_that_are_not_plain_names_are_refused(logs: LogStore, bad: str) -> None:
    with pytest.raises(ValueError, match="not a job id"):
        logs.path(bad)
