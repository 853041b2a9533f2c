"""Scenarios: the hub and the job service share one record of who holds which GPU slice."""

from __future__ import annotations

import multiprocessing
from fractions import Fraction

from gpuspawner.ledger import AllocationLedger
from gpuspawner.policy import GPUDevice, GPUShare, Refusal

DEVICES = [GPUDevice("g0", 0, "RTX 4090", 24576), GPUDevice("g1", 1, "RTX 4090", 24576)]
QUARTER = GPUShare(fraction=Fraction(1, 4))


def _claim_many(path: str, prefix: str, count: int) -> int:
    ledger = AllocationLedger(path)
    granted = 0
    for number in range(count):
        try:
            with ledger.transaction(DEVICES) as pool:
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
    with multiprocessing.get_context("spawn").Pool(2) as workers:
        granted = workers.starmap(_claim_many, [(path, "server", 10), (path, "job", 10)])
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
