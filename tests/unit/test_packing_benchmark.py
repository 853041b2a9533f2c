"""The packing benchmark's generator, placements and limit, on a tiny fleet (issue 17).

The benchmark's percentages are only worth reading if its placements never put more on a
GPU than it has, every request is accounted for, and the physical limit is really above
every placement; these scenarios check that on a fleet small enough to be crowded.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from benchmarks.packing import (
    HOURS,
    WEEK_START,
    FirstFit,
    Held,
    MIGCheck,
    Ours,
    Request,
    Term,
    WholeGPU,
    fleet,
    generate_term,
    losses,
    packing,
    physical_limit,
    run_term,
    simulate,
)
from gpuspawner.policy import GPUShare, UserIdentity
from gpuspawner.policy.catalog_loading import load_catalog

TINY_FLEET = (
    {"model": "RTX A5000", "memory": "24GiB", "count": 2},
    {"model": "A100-SXM4-80GB", "memory": "80GiB", "count": 1, "mig": True},
)


def tiny_term(seed: int = 7) -> Term:
    return generate_term(seed, courses=5, class_size=(6, 14), researchers=2, jobs=12)


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory):
    """A small term placed on three GPUs by the admission, first-fit and whole GPUs."""
    term = tiny_term()
    devices = fleet(TINY_FLEET)
    limit, outcomes = run_term(term, devices, tmp_path_factory.mktemp("term"))
    return term, devices, limit, outcomes


def test_the_same_seed_generates_the_same_term_and_another_seed_another() -> None:
    first, again, other = tiny_term(7), tiny_term(7), tiny_term(8)

    assert first.requests == again.requests
    assert first.catalog_data == again.catalog_data
    assert first.requests != other.requests


def test_the_term_mixes_fractions_memory_only_shares_whole_gpus_and_jobs() -> None:
    shares = [r.share for r in tiny_term().requests]

    assert {s.fraction for s in shares if s.fraction is not None} == {
        Fraction(1, 8),
        Fraction(1, 4),
        Fraction(1, 2),
    }
    assert any(s.fraction is None and s.memory_mib for s in shares)
    assert any(s.is_whole for s in shares)
    assert any(r.job for r in tiny_term().requests)


def test_no_placement_puts_more_on_a_gpu_than_its_time_or_memory(crowded) -> None:
    _, _, _, outcomes = crowded

    for out in outcomes:
        assert out.max_device_fraction <= 1, out.name
        assert out.max_device_memory_ratio <= 1, out.name
    # The fleet is crowded: some placement fills a GPU to the brim.
    assert max(out.max_device_fraction for out in outcomes) == 1


def test_every_server_and_job_is_started_refused_or_still_queued(crowded) -> None:
    term, _, _, outcomes = crowded
    servers = sum(1 for r in term.requests if not r.job)
    jobs = sum(1 for r in term.requests if r.job)

    for out in outcomes:
        assert out.servers == servers and out.jobs == jobs, out.name
        # a refused server is started by a later retry or never
        assert out.served_on_retry <= out.refused, out.name
        never_started = out.refused - out.served_on_retry
        assert out.servers_started + never_started == servers, out.name
        assert out.jobs_started + out.jobs_never_started == jobs, out.name
        assert out.refused_fitting <= out.refused and out.jobs_queued_fitting <= out.jobs_queued
    # Three GPUs are too few for this term: whole GPUs refuse students.
    assert outcomes[2].refused > 0


def test_the_physical_limit_is_above_every_placement_hour_by_hour(crowded) -> None:
    _, _, limit, outcomes = crowded

    for out in outcomes:
        for hour in range(HOURS):
            assert out.time_hours[hour] <= limit.hour_time[hour]
            assert out.memory_hours[hour] <= limit.hour_memory[hour]
            assert out.server_time[hour] <= limit.servers_time[hour]
        assert sum(out.time_hours) <= limit.time
        assert sum(out.memory_hours) <= limit.memory
        share = packing(out, limit)
        assert 0 < share.time_mig <= share.time <= 1
        assert 0 < share.memory_mig <= share.memory <= 1


def test_with_room_for_everyone_the_admission_reaches_the_limit_and_whole_gpus_do_not(
    tmp_path: Path,
) -> None:
    # Given a small term on a fleet far larger than it needs (no A100, so no MIG)
    term = generate_term(3, courses=3, class_size=(4, 6), researchers=1, jobs=4)
    devices = fleet([{"model": "H100 80GB HBM3", "memory": "80GiB", "count": 40}])
    (tmp_path / "term.yaml").write_text(yaml.safe_dump(term.catalog_data))
    catalog = load_catalog(tmp_path / "term.yaml")

    # When it is placed by the admission and by whole GPUs
    limit = physical_limit(term, devices)
    ours = simulate(term, Ours(devices, catalog))
    whole = simulate(term, WholeGPU(devices))

    # Then the admission runs everything the limit runs, refusing no one
    assert not limit.congested_hours
    assert ours.refused == 0 and ours.jobs_queued == 0
    assert packing(ours, limit).time == 1 and packing(ours, limit).memory == 1
    # while whole GPUs serve the same starts but hold more GPU memory for them
    assert whole.refused == 0
    assert packing(whole, limit).time == 1
    assert whole.held_memory_hours > ours.held_memory_hours


def test_four_quarter_shares_booked_on_an_a100_leave_one_without_a_mig_slice() -> None:
    # Given an A100 80 GB split with MIG, on which the pool booked four 1/4 shares (a full GPU)
    devices = fleet([{"model": "A100-SXM4-80GB", "memory": "80GiB", "count": 1, "mig": True}])
    quarter = GPUShare(fraction=Fraction(1, 4))
    booked = [
        (
            Request(f"server:s{n}/", UserIdentity(f"s{n}", frozenset()), "lab", quarter, 0, 1),
            Held((devices[0].id,), Fraction(1, 4), 20 * 1024),
        )
        for n in range(4)
    ]
    check = MIGCheck()

    # When the MIG back end gives each its profile
    stranded = check.stranded(booked, {d.id: d for d in devices})

    # Then each is a 2g.20gb, three fit the 7 compute slices and the last one booked does not
    assert check.profile(quarter, devices[0]).name == "2g.20gb"
    assert stranded == {"server:s3/"}
    assert check.stranded(booked[:3], {d.id: d for d in devices}) == set()


def test_first_fit_fills_gpus_in_order_and_refuses_when_none_has_room() -> None:
    devices = fleet([{"model": "RTX A5000", "memory": "24GiB", "count": 2}])
    first_fit = FirstFit(devices)
    half = GPUShare(fraction=Fraction(1, 2))
    now = WEEK_START

    placed = [
        first_fit.place(
            Request(f"server:s{n}/", UserIdentity(f"s{n}", frozenset()), "lab", half, 0, 1),
            now,
            [],
        )
        for n in range(5)
    ]

    assert [p.device_ids for p in placed[:4]] == [("sim-0",), ("sim-0",), ("sim-1",), ("sim-1",)]
    assert placed[4] == "full"


def test_the_admission_strands_no_share_on_the_mig_a100_and_first_fit_does(crowded) -> None:
    # Given the crowded term placed on two RTX A5000s and an A100 split into MIG slices
    _, _, _, (ours, first_fit, _) = crowded

    # Then every share the admission started has its MIG slice, while first-fit, booking
    # fractions there as on any card, admitted some whose slice does not exist
    assert ours.stranded_keys == set()
    assert first_fit.stranded_keys


def test_the_losses_in_fitting_hours_are_explained_by_refusals(crowded) -> None:
    # Given the crowded term's placements and its limit
    _, devices, limit, (ours, first_fit, _) = crowded

    for out in (ours, first_fit):
        # When the servers' losses in the fitting hours are split by cause
        found = losses(out, limit, devices)

        # Then each hour's loss is what the refused servers would have run there, plus
        # the shares stranded by MIG (none for the admission)
        assert found
        for lost in found:
            assert lost.hour in limit.fitting_hours
            explained = lost.crowded[0] + lost.fitting[0]
            assert explained <= lost.time
            if out is ours:
                assert explained == lost.time
                assert lost.crowded[1] + lost.fitting[1] == lost.memory


def test_a_refused_server_asks_again_every_hour_until_its_owner_would_have_left() -> None:
    # Given one GPU, held by a researcher in hours 0-1, and two more who want it whole from
    # hour 1: one until hour 4, the other only for hour 1
    devices = fleet([{"model": "RTX A5000", "memory": "24GiB", "count": 1}])
    whole = GPUShare(fraction=Fraction(1))

    def researcher(name: str, arrive: int, leave: int) -> Request:
        return Request(
            f"server:{name}/", UserIdentity(name, frozenset()), "res", whole, arrive, leave
        )

    term = Term({}, [researcher("r0", 0, 2), researcher("r1", 1, 4), researcher("r2", 1, 2)])

    # When the term is placed first-fit
    out = simulate(term, FirstFit(devices))

    # Then both are refused at hour 1; r1 asks again at hour 2 and runs until it leaves,
    # while r2, gone by then, never starts
    assert out.refused == 2 and out.served_on_retry == 1
    assert out.servers_started == 2
    assert [r.started for r in out.refused_servers] == [2, None]
    assert out.server_time[:5] == [1, 1, 1, 1, 0]
