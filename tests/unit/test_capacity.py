"""Scenarios: servers and jobs share GPUs; the pool never gives one slice to two of them."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from gpuspawner.policy import Allocation, CapacityPool, GPUDevice, GPUShare, Refusal
from gpuspawner.policy.capacity import Reservation

from .conftest import at

GIB = 1024


def rtx(index: int) -> GPUDevice:
    return GPUDevice(f"GPU-{index}", index, "NVIDIA GeForce RTX 4090", 24 * GIB)


A100 = GPUDevice("GPU-a100", 2, "NVIDIA A100-SXM4-80GB", 80 * GIB)
QUARTER = GPUShare(fraction=Fraction(1, 4))
HALF = GPUShare(fraction=Fraction(1, 2))
WHOLE = GPUShare(count=1)


def allocate(pool: CapacityPool, key: str, share: GPUShare, **options) -> Allocation:
    options.setdefault("owner", key)
    options.setdefault("profile_id", "p")
    options.setdefault("course_id", None)
    return pool.allocate(f"server:{key}/", share=share, **options)


def refusal(pool: CapacityPool, key: str, share: GPUShare, **options) -> Refusal:
    with pytest.raises(Refusal) as error:
        allocate(pool, key, share, **options)
    return error.value


def test_given_two_slices_on_one_gpu_then_they_do_not_overlap_and_a_third_is_refused():
    pool = CapacityPool([rtx(0)])

    alice = allocate(pool, "alice", HALF)
    bob = allocate(pool, "bob", HALF)
    carol = refusal(pool, "carol", HALF)

    assert alice.device_ids == bob.device_ids == ("GPU-0",)
    assert alice.fraction + bob.fraction == 1
    assert carol.code == "full"
    assert carol.message.startswith(
        "All GPUs are taken right now: 1 of 1 GPU is shared by 2 running servers and jobs"
    )
    assert "no room for 1/2 of a GPU" in carol.message


def test_given_a_fraction_with_more_memory_than_its_share_then_memory_limits_the_tenants():
    pool = CapacityPool([rtx(0)])
    share = GPUShare(fraction=Fraction(1, 4), memory_mib=10 * GIB)

    allocate(pool, "alice", share)
    allocate(pool, "bob", share)

    # Half of the GPU's time is free, but only 4 GiB of its memory.
    assert refusal(pool, "carol", share).code == "full"


def test_given_a_model_the_hub_does_not_have_then_the_refusal_names_what_it_has():
    pool = CapacityPool([rtx(0), rtx(1)])

    problem = refusal(pool, "alice", GPUShare(fraction=Fraction(1, 2), models=("H100",)))

    assert problem.code == "no-such-gpu"
    assert problem.message.startswith(
        "This profile needs an H100 GPU, but this hub has NVIDIA GeForce RTX 4090."
    )


def test_given_more_memory_than_any_gpu_has_then_it_is_too_large():
    pool = CapacityPool([rtx(0)])

    problem = refusal(pool, "alice", GPUShare(memory_mib=30 * GIB))

    assert problem.code == "too-large"
    assert "asks for 30 GiB of GPU memory, but the largest GPU here has 24 GiB" in problem.message


def test_given_more_whole_gpus_than_the_hub_has_then_it_is_too_large():
    problem = refusal(CapacityPool([rtx(0), rtx(1)]), "alice", GPUShare(count=3))

    assert problem.code == "too-large"
    assert "asks for 3 whole GPUs, but this hub has only 2" in problem.message


def test_given_a_slice_on_each_gpu_then_a_whole_gpu_request_is_refused():
    pool = CapacityPool([rtx(0), rtx(1)])
    pool.allocations["server:x/"] = Allocation(
        "server:x/", "x", "p", None, ("GPU-0",), Fraction(1, 4), 6 * GIB, 0
    )
    pool.allocations["server:y/"] = Allocation(
        "server:y/", "y", "p", None, ("GPU-1",), Fraction(1, 4), 6 * GIB, 0
    )

    # Three quarters of each GPU are free, but a whole-GPU server needs an empty one.
    assert refusal(pool, "rita", WHOLE).code == "full"


def test_given_a_whole_gpu_request_then_it_takes_an_empty_device_entirely():
    pool = CapacityPool([rtx(0), rtx(1)])
    allocate(pool, "alice", QUARTER)

    whole = allocate(pool, "rita", WHOLE)

    assert whole.device_ids == ("GPU-1",)
    assert (whole.fraction, whole.memory_mib, whole.compute_min_pct) == (1, 24 * GIB, 100)
    assert refusal(pool, "bob", WHOLE).code == "full"
    assert allocate(pool, "bob", HALF).device_ids == ("GPU-0",)


def test_given_two_whole_gpus_then_both_devices_are_held():
    pool = CapacityPool([rtx(0), rtx(1)])

    assert allocate(pool, "rita", GPUShare(count=2)).device_ids == ("GPU-0", "GPU-1")


def test_given_slices_then_best_fit_packs_them_and_leaves_a_whole_gpu_free():
    pool = CapacityPool([rtx(0), rtx(1)])

    placed = [allocate(pool, name, QUARTER).device_ids for name in ("a", "b", "c")]
    placed.append(allocate(pool, "d", QUARTER).device_ids)

    assert placed == [("GPU-0",)] * 4
    assert allocate(pool, "rita", WHOLE).device_ids == ("GPU-1",)


def test_given_gpus_of_different_sizes_then_memory_slices_go_where_they_cost_least():
    pool = CapacityPool([A100, rtx(0)])
    # 12 GiB is half of the 4090's time but less than a sixth of the A100's
    alice = allocate(pool, "alice", GPUShare(memory_mib=12 * GIB))

    bob = allocate(pool, "bob", GPUShare(memory_mib=12 * GIB))

    assert alice.device_ids == bob.device_ids == ("GPU-a100",)
    assert alice.fraction == Fraction(15, 100)
    # and the 4090 stays free for a whole-GPU request
    assert pool.how_many_fit(GPUShare(count=1)) == 1


def test_given_a_course_reservation_then_others_cannot_use_the_reserved_seats():
    pool = CapacityPool([rtx(0)])
    reservation = Reservation(
        "ml101", "Machine Learning 101", 3, QUARTER, at("2024-03-18 12:00"), until_text="12:00"
    )

    problem = refusal(pool, "rita", HALF, reservations=(reservation,))
    student = allocate(pool, "alice", QUARTER, course_id="ml101", reservations=(reservation,))

    assert problem.code == "reserved"
    assert problem.message.startswith(
        "The free GPU capacity is reserved for Machine Learning 101 until 12:00."
    )
    assert student.device_ids == ("GPU-0",)
    assert pool.how_many_fit(QUARTER, (reservation,)) == 1
    assert pool.how_many_fit(QUARTER, (reservation,), course_id="ml101") == 3


def test_given_a_duplicate_key_then_the_second_allocation_is_refused():
    pool = CapacityPool([rtx(0)])
    allocate(pool, "alice", QUARTER)

    assert refusal(pool, "alice", QUARTER).code == "duplicate"


class TestRestart:
    def test_given_allocations_in_state_when_the_hub_restarts_then_they_are_kept(self):
        before = CapacityPool([rtx(0), rtx(1)])
        saved = [
            allocate(before, n, HALF, session_end=at("2024-03-18 12:10")).to_dict()
            for n in ("a", "b", "c")
        ]

        after = CapacityPool([rtx(0), rtx(1)])
        warnings = [w for data in saved for w in after.restore(Allocation.from_dict(data))]

        assert warnings == []
        assert after.allocations == before.allocations
        assert after.allocations["server:a/"].session_end == at("2024-03-18 12:10")

    def test_given_restored_allocations_then_a_new_start_never_double_books(self):
        pool = CapacityPool([rtx(0), rtx(1)])
        for name, device in (("a", "GPU-0"), ("b", "GPU-0"), ("c", "GPU-1")):
            pool.restore(
                Allocation(
                    f"server:{name}/", name, "p", None, (device,), Fraction(1, 2), 12 * GIB, 0
                )
            )

        assert allocate(pool, "d", HALF).device_ids == ("GPU-1",)
        assert refusal(pool, "e", HALF).code == "full"

    def test_given_state_that_no_longer_fits_then_it_is_kept_with_a_warning(self):
        pool = CapacityPool([rtx(0)])
        pool.restore(Allocation("server:a/", "a", "p", None, ("GPU-0",), Fraction(3, 4), 0, 0))

        warnings = pool.restore(
            Allocation("server:b/", "b", "p", None, ("GPU-0",), Fraction(1, 2), 0, 0)
        )

        assert warnings == ["server:b/ overcommits GPU 0 (NVIDIA GeForce RTX 4090, 24 GiB)"]
        assert "server:b/" in pool.allocations

    def test_given_a_gpu_that_disappeared_then_restore_warns(self):
        pool = CapacityPool([rtx(0)])

        warnings = pool.restore(
            Allocation("server:a/", "a", "p", None, ("GPU-9",), Fraction(1, 2), 0, 0)
        )

        assert warnings == ["server:a/ holds unknown GPUs GPU-9"]

    def test_given_the_same_state_twice_then_the_second_restore_changes_nothing(self):
        pool = CapacityPool([rtx(0)])
        allocation = Allocation("server:a/", "a", "p", None, ("GPU-0",), Fraction(1, 2), 0, 0)

        assert pool.restore(allocation) == []
        assert pool.restore(allocation) == []
        moved = Allocation("server:a/", "a", "p", None, ("GPU-1",), Fraction(1, 2), 0, 0)
        assert pool.restore(moved) == [
            "server:a/ was already recorded with other devices; kept the first"
        ]
        assert pool.allocations["server:a/"] == allocation


def assert_never_overbooked(pool: CapacityPool) -> None:
    for device in pool.devices:
        holders = [a for a in pool.allocations.values() if device.id in a.device_ids]
        assert sum((a.fraction for a in holders), Fraction(0)) <= 1, device.label
        assert sum(a.memory_mib for a in holders) <= device.memory_mib, device.label
        assert sum(a.compute_min_pct for a in holders) <= 100, device.label
        if any(a.fraction == 1 for a in holders):
            assert len(holders) == 1, f"{device.label} shared with a whole-GPU server"


def test_given_many_random_starts_stops_and_restarts_then_no_gpu_is_ever_overbooked():
    rng = random.Random(20240318)
    devices = [rtx(0), rtx(1), A100]
    shares = [
        QUARTER,
        HALF,
        GPUShare(fraction=Fraction(1, 3)),
        GPUShare(memory_mib=6 * GIB),
        GPUShare(memory_mib=20 * GIB),
        GPUShare(fraction=Fraction(1, 8), memory_mib=10 * GIB, compute_min_pct=30),
        GPUShare(fraction=Fraction(1, 4), models=("A100",)),
        WHOLE,
        GPUShare(count=2),
    ]
    pool = CapacityPool(devices)
    granted = refused = 0
    for _ in range(3000):
        action = rng.random()
        if action < 0.55:
            try:
                allocate(pool, f"user{rng.randrange(60)}", rng.choice(shares))
                granted += 1
            except Refusal as problem:
                assert problem.code in ("full", "duplicate")
                refused += 1
        elif action < 0.97 and pool.allocations:
            pool.release(rng.choice(sorted(pool.allocations)))
        else:
            # The hub restarts and reads every allocation back from spawner state.
            saved = [a.to_dict() for a in pool.allocations.values()]
            pool = CapacityPool(devices)
            for data in saved:
                assert pool.restore(Allocation.from_dict(data)) == []
        assert_never_overbooked(pool)
    assert granted > 500 and refused > 100  # the loop exercised both outcomes


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_seats_left_counts_what_placing_one_by_one_would_place(seed):
    # Given GPUs partly taken by slices of several sizes
    rng = random.Random(seed)
    pool = CapacityPool([rtx(i) for i in range(4)])
    shares = [
        GPUShare(fraction=Fraction(1, 4)),
        GPUShare(fraction=Fraction(1, 3), memory_mib=4096),
        GPUShare(memory_mib=6144, compute_min_pct=30),
    ]
    for number in range(6):
        try:
            allocate(pool, f"server:u{number}/", rng.choice(shares))
        except Refusal:
            pass
    for share in shares + [GPUShare(count=1)]:
        # When the page asks how many more fit
        counted = pool.how_many_fit(share)
        # Then it is exactly how many admits succeed on a copy of the pool
        copy = CapacityPool(pool.devices)
        for allocation in pool.allocations.values():
            copy.restore(allocation)
        placed = 0
        while True:
            try:
                copy.allocate(
                    f"server:extra{placed}/", owner="x", profile_id="p", course_id=None, share=share
                )
            except Refusal:
                break
            placed += 1
        assert counted == placed, share


def test_running_totals_always_equal_a_fresh_count_of_the_allocations():
    # Given many admissions and releases in a random order
    rng = random.Random(7)
    pool = CapacityPool([rtx(i) for i in range(3)])
    shares = [GPUShare(fraction=Fraction(1, 4)), GPUShare(memory_mib=8192), GPUShare(count=1)]
    for step in range(600):
        if pool.allocations and rng.random() < 0.4:
            pool.release(rng.choice(sorted(pool.allocations)))
        else:
            try:
                allocate(pool, f"server:u{step}/", rng.choice(shares))
            except Refusal:
                pass
        # Then the pool's totals are what a fresh pool holding the same allocations counts
        fresh = CapacityPool(pool.devices)
        for allocation in pool.allocations.values():
            fresh.restore(allocation)
        assert {k: (u.fraction, u.memory_mib, len(u.holders)) for k, u in pool.usage().items()} == {
            k: (u.fraction, u.memory_mib, len(u.holders)) for k, u in fresh.usage().items()
        }
