"""Scenarios: the hub and the job service share one record of who holds which GPU slice."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
from fractions import Fraction
from pathlib import Path

import pytest

from gpuspawner.core.ledger import AllocationLedger, ProcessHolder
from gpuspawner.policy import Allocation, GPUDevice, GPUShare, Refusal

DEVICES = [GPUDevice("g0", 0, "RTX 4090", 24576), GPUDevice("g1", 1, "RTX 4090", 24576)]
QUARTER = GPUShare(fraction=Fraction(1, 4))
WHOLE_GPU = GPUShare(count=1)


def _claim_many(path: str, prefix: str, count: int, holder: ProcessHolder) -> int:
    ledger = AllocationLedger(path)
    granted = 0
    for number in range(count):
        try:
            with ledger.transaction(DEVICES, holder=holder) as pool:
                pool.allocate(
                    f"{prefix}:{number}",
                    owner=prefix,
                    profile_id="p",
                    course_id=None,
                    share=QUARTER,
                )
            granted += 1
        except Refusal:
            pass
    return granted


def test_two_processes_allocating_at_once_never_double_book(tmp_path):
    # Given a ledger over two GPUs, each taking four quarter slices
    path = str(tmp_path / "allocations.json")
    # When the "hub" and the "job service" each try to take 10 slices at the same time
    # (held by this test's process, as running servers would hold them)
    holder = ProcessHolder.this_process()
    with multiprocessing.get_context("spawn").Pool(2) as workers:
        granted = workers.starmap(
            _claim_many, [(path, "server", 10, holder), (path, "job", 10, holder)]
        )
    # Then exactly the 8 slices that exist were given out, and no GPU holds more than 1
    assert sum(granted) == 8
    pool = AllocationLedger(path).snapshot(DEVICES)
    assert len(pool.allocations) == 8
    for usage in pool.usage().values():
        assert usage.fraction == 1


def test_a_released_slice_is_free_for_the_other_process(tmp_path):
    ledger = AllocationLedger(tmp_path / "allocations.json")
    with ledger.transaction(DEVICES) as pool:
        pool.allocate(
            "server:ana/", owner="ana", profile_id="p", course_id=None, share=GPUShare(count=2)
        )
    other = AllocationLedger(tmp_path / "allocations.json")
    with other.transaction(DEVICES) as pool:
        assert pool.how_many_fit(QUARTER) == 0
        pool.release("server:ana/")
    assert ledger.snapshot(DEVICES).how_many_fit(QUARTER) == 8


# -- holders: a slice lives as long as the process that holds it ------------------------


def _book_whole_gpus(path: str, *keys: str) -> None:
    """A "hub" that books a whole GPU for each key, then dies before the servers start."""
    for key in keys:
        with AllocationLedger(path).transaction(DEVICES) as pool:
            pool.allocate(key, owner="ana", profile_id="p", course_id=None, share=WHOLE_GPU)


def _book_and_hand_over(path: str, key: str, pid: int) -> None:
    """A "hub" that books a whole GPU, starts the server ``pid``, hands the slice over, dies."""
    ledger = AllocationLedger(path)
    with ledger.transaction(DEVICES) as pool:
        allocation = pool.allocate(
            key, owner="ana", profile_id="p", course_id=None, share=WHOLE_GPU
        )
    holder = ProcessHolder.of_pid(pid)
    assert holder is not None
    ledger.hold(DEVICES, allocation, holder)


def _in_a_process_that_then_exits(target, *args) -> None:
    process = multiprocessing.get_context("spawn").Process(target=target, args=args)
    process.start()
    process.join()
    assert process.exitcode == 0


def test_a_booking_whose_booker_died_before_the_server_started_is_released(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="gpuspawner.core.ledger")
    # Given a hub that booked both GPUs and was killed before either server started
    path = str(tmp_path / "allocations.json")
    _in_a_process_that_then_exits(_book_whole_gpus, path, "server:ana/", "server:ben/")
    ledger = AllocationLedger(path)
    # Then nobody sees the phantom bookings: the spawn page shows two free GPUs
    assert ledger.snapshot(DEVICES).how_many_fit(WHOLE_GPU) == 2
    # And the next decision books the same GPUs again, and says why they were free
    with ledger.transaction(DEVICES) as pool:
        pool.allocate("server:ana/", owner="ana", profile_id="p", course_id=None, share=WHOLE_GPU)
        pool.allocate("job:1", owner="ben", profile_id="p", course_id=None, share=WHOLE_GPU)
    assert "Freed the GPU slice of server:ana/" in caplog.text
    assert "Freed the GPU slice of server:ben/" in caplog.text
    recorded = json.loads(Path(path).read_text())
    assert recorded["version"] == 2
    assert [a["key"] for a in recorded["allocations"]] == ["job:1", "server:ana/"]
    assert {a["holder"]["pid"] for a in recorded["allocations"]} == {os.getpid()}


def test_a_running_servers_slice_outlives_its_hub_and_ends_with_the_server(
    tmp_path, server_process
):
    # Given a hub that booked a GPU, started the server, handed the slice to it, and died
    path = str(tmp_path / "allocations.json")
    _in_a_process_that_then_exits(_book_and_hand_over, path, "server:ana/", server_process.pid)
    ledger = AllocationLedger(path)
    # Then the slice is still taken: a whole-GPU request fits only on the other GPU
    with ledger.transaction(DEVICES) as pool:
        assert pool.how_many_fit(WHOLE_GPU) == 1
    assert ledger.holders()["server:ana/"] == ProcessHolder.of_pid(server_process.pid)
    # When the server's process ends (not yet reaped: a zombie is gone too)
    server_process.kill()
    os.waitid(os.P_PID, server_process.pid, os.WEXITED | os.WNOWAIT)
    # Then its slice is free again
    with ledger.transaction(DEVICES) as pool:
        assert pool.how_many_fit(WHOLE_GPU) == 2
    assert json.loads(Path(path).read_text())["allocations"] == []


def test_a_reused_pid_does_not_keep_a_slice(tmp_path):
    # Given a slice whose holder's pid now belongs to another process (here: this one,
    # which started later than the recorded holder)
    ledger = AllocationLedger(tmp_path / "allocations.json")
    me = ProcessHolder.this_process()
    impostor = ProcessHolder(me.pid, me.start_time - 3600)
    with ledger.transaction(DEVICES, holder=impostor) as pool:
        pool.allocate("server:ana/", owner="ana", profile_id="p", course_id=None, share=WHOLE_GPU)
    # Then the slice is free
    assert ledger.snapshot(DEVICES).how_many_fit(WHOLE_GPU) == 2
    assert ProcessHolder.this_process().is_alive()
    assert not impostor.is_alive()


def test_holding_a_slice_that_went_missing_records_it_again(tmp_path, server_process):
    # Given a running job whose slice is no longer in the ledger (it was moved aside)
    ledger = AllocationLedger(tmp_path / "allocations.json")
    with ledger.transaction(DEVICES) as pool:
        allocation = pool.allocate(
            "job:7", owner="rhea", profile_id="p", course_id=None, share=WHOLE_GPU
        )
        pool.release("job:7")
    # When its runner is recorded as the holder
    holder = ProcessHolder.of_pid(server_process.pid)
    assert holder is not None
    assert ledger.hold(DEVICES, allocation, holder) == []
    # Then the slice is taken again, by the runner
    assert ledger.holders() == {"job:7": holder}
    assert ledger.snapshot(DEVICES).allocations["job:7"] == allocation


def _version_1_entry(key: str, device: str) -> dict:
    return {
        "key": key,
        "owner": "ana",
        "profile_id": "p",
        "course_id": None,
        "device_ids": [device],
        "fraction": "1/1",
        "memory_mib": 24576,
        "compute_min_pct": 0,
        "session_end": None,
    }


def test_a_version_1_ledger_is_read_and_its_slices_kept_until_held(tmp_path, server_process):
    # Given the ledger an earlier version wrote: no holders
    path = tmp_path / "allocations.json"
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "allocations": [
                    _version_1_entry("server:ana/", "g0"),
                    _version_1_entry("job:1", "g1"),
                ],
            }
        )
    )
    ledger = AllocationLedger(path)
    # Then both slices are taken, by holders unknown
    assert ledger.snapshot(DEVICES).how_many_fit(WHOLE_GPU) == 0
    assert ledger.holders() == {"server:ana/": None, "job:1": None}
    # When the restarted hub finds ana's server running, and the job has ended
    allocation = Allocation.from_dict(_version_1_entry("server:ana/", "g0"))
    holder = ProcessHolder.of_pid(server_process.pid)
    assert holder is not None
    ledger.hold(DEVICES, allocation, holder)
    with ledger.transaction(DEVICES) as pool:
        pool.release("job:1")
    # Then the file is version 2 with ana's server as the holder of its slice
    recorded = json.loads(path.read_text())
    assert recorded["version"] == 2
    assert [(a["key"], a["holder"]["pid"]) for a in recorded["allocations"]] == [
        ("server:ana/", server_process.pid)
    ]


def test_a_ledger_from_a_newer_version_is_refused_with_what_to_do(tmp_path):
    path = tmp_path / "allocations.json"
    path.write_text(json.dumps({"version": 99, "allocations": []}))
    with pytest.raises(RuntimeError, match="upgrade the hub and the job service together"):
        AllocationLedger(path).snapshot(DEVICES)
