"""Scenarios: what a GPU share asks of a device, and how the hub says it in words."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from gpuspawner.policy.share import GPUDevice, GPUShare, SliceDemand

RTX_4090 = GPUDevice("GPU-aaaa", 0, "NVIDIA GeForce RTX 4090", 24 * 1024)
A100_80 = GPUDevice("GPU-bbbb", 1, "NVIDIA A100-SXM4-80GB", 80 * 1024)
T4 = GPUDevice("sim-0", 0, "Tesla T4", 16 * 1024, simulated=True)


class TestFractionAndMemoryRule:
    def test_given_a_quarter_without_memory_then_memory_scales_with_each_device(self):
        quarter = GPUShare(fraction=Fraction(1, 4))

        assert quarter.demand_on(RTX_4090) == SliceDemand(Fraction(1, 4), 6 * 1024, 0)
        assert quarter.demand_on(A100_80) == SliceDemand(Fraction(1, 4), 20 * 1024, 0)

    def test_given_memory_only_then_the_fraction_is_memory_over_device_memory(self):
        six_gib = GPUShare(memory_mib=6 * 1024)

        assert six_gib.demand_on(RTX_4090).fraction == Fraction(1, 4)
        assert six_gib.demand_on(RTX_4090).memory_mib == 6 * 1024
        # 6/80 = 7.5%: rounded up to a hundredth so memory-only slices never over-subscribe.
        assert six_gib.demand_on(A100_80).fraction == Fraction(8, 100)
        assert six_gib.demand_on(A100_80).memory_mib == 6 * 1024

    def test_given_memory_that_does_not_divide_evenly_then_the_fraction_rounds_up(self):
        ten_gib = GPUShare(memory_mib=10 * 1024)

        assert ten_gib.demand_on(RTX_4090).fraction == Fraction(42, 100)

    def test_given_fraction_and_memory_then_both_are_honoured_on_every_device(self):
        share = GPUShare(fraction=Fraction(1, 4), memory_mib=10 * 1024)

        assert share.demand_on(A100_80) == SliceDemand(Fraction(1, 4), 10 * 1024, 0)
        assert share.demand_on(RTX_4090) == SliceDemand(Fraction(1, 4), 10 * 1024, 0)

    def test_given_more_memory_than_the_device_has_then_the_fraction_is_capped_at_one(self):
        share = GPUShare(memory_mib=30 * 1024)

        assert share.demand_on(RTX_4090).fraction == 1
        assert share.demand_on(RTX_4090).memory_mib == 30 * 1024

    def test_given_a_compute_minimum_then_the_demand_carries_it(self):
        share = GPUShare(fraction=Fraction(1, 2), compute_min_pct=30, compute_max_pct=60)

        assert share.demand_on(T4).compute_min_pct == 30


class TestWholeGPUs:
    def test_given_a_fraction_of_exactly_one_then_it_is_a_whole_gpu(self):
        share = GPUShare(fraction=Fraction(1))

        assert share.is_whole
        assert share.count == 1
        assert share.fraction is None

    def test_given_a_fraction_of_one_with_memory_then_it_stays_a_slice(self):
        share = GPUShare(fraction=Fraction(1), memory_mib=8 * 1024)

        assert not share.is_whole

    def test_given_a_whole_gpu_then_it_takes_all_of_the_device(self):
        assert GPUShare(count=1).demand_on(A100_80) == SliceDemand(Fraction(1), 80 * 1024, 100)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "needs a count of whole GPUs, a fraction, or memory"),
        ({"count": -1}, "cannot be negative"),
        ({"count": 1, "fraction": Fraction(1, 2)}, "either a count of whole GPUs or a fraction"),
        ({"count": 2, "memory_mib": 1024}, "not both"),
        ({"fraction": Fraction(3, 2)}, "greater than 0 and at most 1"),
        ({"fraction": Fraction(0)}, "greater than 0 and at most 1"),
        ({"memory_mib": 0}, "memory must be greater than zero"),
        ({"fraction": Fraction(1, 4), "compute_min_pct": 120}, "compute_min must be a percentage"),
        ({"fraction": Fraction(1, 4), "compute_max_pct": -1}, "compute_max must be a percentage"),
        (
            {"fraction": Fraction(1, 4), "compute_min_pct": 60, "compute_max_pct": 40},
            "compute minimum cannot be larger than the compute maximum",
        ),
        ({"fraction": Fraction(1, 4), "compute_max_pct": 0}, "would leave the GPU unusable"),
    ],
)
def test_given_an_impossible_share_then_construction_explains_why(arguments, message):
    with pytest.raises(ValueError, match=message):
        GPUShare(**arguments)


class TestDescribe:
    def test_given_a_quarter_on_a_known_device_then_it_names_the_card_and_memory(self):
        share = GPUShare(fraction=Fraction(1, 4))

        assert share.describe("RTX 4090", 24 * 1024) == "1/4 of an RTX 4090, 6 GiB"

    def test_given_one_whole_gpu_then_it_says_whole(self):
        assert GPUShare(count=1).describe("A100") == "1 whole A100"

    def test_given_several_whole_gpus_then_the_plural_reads_naturally(self):
        assert GPUShare(count=2).describe("A100") == "2 whole A100 GPUs"
        assert GPUShare(count=2).describe() == "2 whole GPUs"
        assert GPUShare(count=1).describe("A100", 80 * 1024) == "1 whole A100, 80 GiB"
        assert GPUShare(count=2).describe("A100", 80 * 1024) == "2 whole A100 GPUs, 80 GiB each"

    def test_given_no_device_then_the_share_is_described_from_the_catalog_alone(self):
        share = GPUShare(fraction=Fraction(1, 4), memory_mib=6 * 1024)

        assert share.describe() == "1/4 of a GPU, 6 GiB"

    def test_given_allowed_models_then_they_are_named(self):
        share = GPUShare(fraction=Fraction(1, 2), models=("A100", "H100"))

        assert share.describe() == "1/2 of an A100 or H100"

    def test_given_memory_only_then_it_is_a_slice_of_the_card(self):
        assert GPUShare(memory_mib=6 * 1024).describe("T4") == "a slice of a T4, 6 GiB"

    def test_given_compute_bounds_then_they_are_mentioned(self):
        share = GPUShare(fraction=Fraction(1, 4), compute_min_pct=25)

        assert share.describe() == "1/4 of a GPU, compute 25-100%"

    @pytest.mark.parametrize(
        ("model", "article"),
        [("H100", "an"), ("L4", "an"), ("T4", "a"), ("A100", "an"), ("Tesla T4", "a")],
    )
    def test_given_a_model_name_then_the_article_matches_how_it_is_said(self, model, article):
        assert GPUShare(fraction=Fraction(1, 2)).describe(model) == f"1/2 of {article} {model}"


class TestSerialisation:
    def test_given_a_slice_then_to_dict_is_plain_json(self):
        share = GPUShare(
            fraction=Fraction(1, 3), memory_mib=4096, compute_max_pct=50, models=("T4",)
        )

        assert share.to_dict() == {
            "fraction": "1/3",
            "memory_mib": 4096,
            "compute_min_pct": None,
            "compute_max_pct": 50,
            "models": ["T4"],
            "count": 0,
        }

    @pytest.mark.parametrize(
        "share",
        [
            GPUShare(fraction=Fraction(1, 4)),
            GPUShare(fraction=Fraction(1, 3), memory_mib=4096, compute_min_pct=10),
            GPUShare(memory_mib=6 * 1024, models=("A100", "H100")),
            GPUShare(count=2, models=("A100",)),
            GPUShare(fraction=Fraction(1), memory_mib=1024, compute_max_pct=100),
        ],
    )
    def test_given_any_share_when_stored_as_json_and_read_back_then_it_is_equal(self, share):
        stored = json.loads(json.dumps(share.to_dict()))

        assert GPUShare.from_dict(stored) == share


class TestDevices:
    def test_given_a_simulated_device_then_its_label_says_so(self):
        assert T4.label == "GPU 0 (Tesla T4, 16 GiB, simulated)"
        assert RTX_4090.label == "GPU 0 (NVIDIA GeForce RTX 4090, 24 GiB)"

    def test_given_model_names_then_matching_is_a_case_insensitive_part(self):
        assert A100_80.matches_model(("a100",))
        assert A100_80.matches_model(())
        assert not A100_80.matches_model(("H100", "T4"))
