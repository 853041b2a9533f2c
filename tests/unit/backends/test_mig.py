"""Scenarios: GPUs partitioned with MIG; a share becomes the smallest slice that holds it."""

from __future__ import annotations

from fractions import Fraction

import pytest

from gpuspawner.backends import UnsupportedShare, make_backend
from gpuspawner.policy.mig_profiles import UnknownMIGModel, find_mig_model, mig_model
from gpuspawner.policy.share import GPUShare

from .scenarios import (
    A100_40GB,
    A100_40GB_MIB,
    A100_80GB,
    A100_80GB_MIB,
    H100_80GB,
    H100_80GB_MIB,
    QUARTER,
    RTX_4090,
    RTX_4090_MIB,
    WHOLE,
)


@pytest.fixture
def mixed():
    return make_backend("mig", strategy="mixed")


def test_given_a_quarter_gpu_on_an_a100_80gb_then_a_2g_20gb_slice_of_that_model(mixed):
    # 1/4 of the compute needs 2 of 7 slices; 10 GiB fits 2g.20gb.
    plan = mixed.render(
        QUARTER, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="jupyter-alice"
    )

    assert plan.to_dict() == {
        "resource_limits": {"nvidia.com/mig-2g.20gb": "1"},
        "resource_requests": {},
        "annotations": {},
        "labels": {},
        "node_selector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        "tolerations": [],
        "scheduler_name": None,
        "environment": {
            "GPUSPAWNER_GPU_SHARE": "1/4 of an NVIDIA A100-SXM4-80GB, 10 GiB, compute 25-100%",
            "GPUSPAWNER_GPU_FRACTION": "2/7",
            "GPUSPAWNER_GPU_MEMORY_MIB": "20480",
            "GPUSPAWNER_GPU_COMPUTE_MAX_PCT": "100",
            "GPUSPAWNER_GPU_MIG_PROFILE": "2g.20gb",
        },
        "runtime_class_name": None,
        "resource_claim_templates": [],
        "pod_resource_claims": [],
        "container_claims": [],
        "unhonoured": [
            "Compute is fixed at 2/7 (29%) of the GPU by the 2g.20gb MIG slice: it cannot burst "
            "to 100%."
        ],
    }


def test_given_a_quarter_gpu_on_an_h100_80gb_then_the_same_slice_pinned_to_the_h100(mixed):
    plan = mixed.render(
        QUARTER, gpu_model=H100_80GB, gpu_memory_mib=H100_80GB_MIB, name="jupyter-alice"
    )

    assert plan.to_dict() == {
        "resource_limits": {"nvidia.com/mig-2g.20gb": "1"},
        "resource_requests": {},
        "annotations": {},
        "labels": {},
        "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "tolerations": [],
        "scheduler_name": None,
        "environment": {
            "GPUSPAWNER_GPU_SHARE": "1/4 of an NVIDIA H100 80GB HBM3, 10 GiB, compute 25-100%",
            "GPUSPAWNER_GPU_FRACTION": "2/7",
            "GPUSPAWNER_GPU_MEMORY_MIB": "20480",
            "GPUSPAWNER_GPU_COMPUTE_MAX_PCT": "100",
            "GPUSPAWNER_GPU_MIG_PROFILE": "2g.20gb",
        },
        "runtime_class_name": None,
        "resource_claim_templates": [],
        "pod_resource_claims": [],
        "container_claims": [],
        "unhonoured": [
            "Compute is fixed at 2/7 (29%) of the GPU by the 2g.20gb MIG slice: it cannot burst "
            "to 100%."
        ],
    }


def test_given_strategy_single_then_the_slice_is_nvidia_gpu_on_nodes_labelled_with_it():
    backend = make_backend("mig", strategy="single")

    plan = backend.render(QUARTER, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="x")

    assert plan.resource_limits == {"nvidia.com/gpu": "1"}
    assert plan.node_selector == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-2g.20gb"}


def test_given_one_whole_gpu_then_it_is_asked_for_on_the_models_unpartitioned_label(mixed):
    plan = mixed.render(WHOLE, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="x")

    assert plan.to_dict() == {
        "resource_limits": {"nvidia.com/gpu": "1"},
        "resource_requests": {},
        "annotations": {},
        "labels": {},
        "node_selector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        "tolerations": [],
        "scheduler_name": None,
        "environment": {
            "GPUSPAWNER_GPU_SHARE": "1 whole NVIDIA A100-SXM4-80GB, 80 GiB",
            "GPUSPAWNER_GPU_FRACTION": "1/1",
            "GPUSPAWNER_GPU_MEMORY_MIB": "81920",
        },
        "runtime_class_name": None,
        "resource_claim_templates": [],
        "pod_resource_claims": [],
        "container_claims": [],
        "unhonoured": [],
    }


@pytest.mark.parametrize(
    ("share", "gpu_model", "memory_mib", "profile"),
    [
        (GPUShare(memory_mib=10 * 1024), A100_80GB, A100_80GB_MIB, "1g.10gb"),
        (GPUShare(memory_mib=12 * 1024), A100_80GB, A100_80GB_MIB, "1g.20gb"),
        (GPUShare(fraction=Fraction(1, 4)), A100_80GB, A100_80GB_MIB, "2g.20gb"),
        (GPUShare(fraction=Fraction(1, 2)), A100_80GB, A100_80GB_MIB, "4g.40gb"),
        (GPUShare(memory_mib=5 * 1024), A100_40GB, A100_40GB_MIB, "1g.5gb"),
        (GPUShare(memory_mib=6 * 1024, compute_min_pct=20), A100_40GB, A100_40GB_MIB, "2g.10gb"),
        # The A30 has 4 compute slices: a quarter is one slice.
        (GPUShare(fraction=Fraction(1, 4)), "NVIDIA A30", 24576, "1g.6gb"),
        (QUARTER, "NVIDIA A30", 24576, "2g.12gb"),
        (QUARTER, "NVIDIA H100 NVL", 95830, "2g.24gb"),
        (QUARTER, "NVIDIA H200", 143771, "2g.35gb"),
        (GPUShare(memory_mib=18 * 1024), "NVIDIA H200 NVL", 143771, "1g.18gb"),
    ],
)
def test_the_smallest_slice_that_holds_the_share_is_chosen(
    mixed, share, gpu_model, memory_mib, profile
):
    plan = mixed.render(share, gpu_model=gpu_model, gpu_memory_mib=memory_mib, name="x")

    assert plan.environment["GPUSPAWNER_GPU_MIG_PROFILE"] == profile
    assert plan.resource_limits == {f"nvidia.com/mig-{profile}": "1"}


def test_given_a_gpu_without_mig_then_check_says_the_profile_needs_another_model(mixed):
    share = GPUShare(fraction=Fraction(1, 4), models=("RTX 4090",))

    assert mixed.check(share, {RTX_4090: RTX_4090_MIB, A100_80GB: A100_80GB_MIB}) == [
        "The share 1/4 of an RTX 4090 needs a MIG slice, but the NVIDIA GeForce RTX 4090 cannot "
        "be split into MIG slices. Give the profile a whole GPU, or limit it to a MIG-capable "
        "model such as an A100, H100 or H200."
    ]


def test_given_a_t4_then_no_plan_is_made(mixed):
    with pytest.raises(UnsupportedShare, match="the Tesla T4 cannot be split into MIG slices"):
        mixed.render(QUARTER, gpu_model="Tesla T4", gpu_memory_mib=15360, name="x")


def test_given_more_memory_than_any_configured_slice_then_check_names_the_largest():
    backend = make_backend("mig", profiles=["1g.10gb", "2g.20gb"])
    share = GPUShare(memory_mib=30 * 1024, compute_min_pct=20)

    assert backend.check(share, {A100_80GB: A100_80GB_MIB}) == [
        "No MIG slice of the NVIDIA A100-SXM4-80GB holds the share a slice of a GPU, 30 GiB, "
        "compute 20-100%: it needs 30 GiB and 20% of the compute, and the largest slice of those "
        "configured, 2g.20gb, has 20 GiB and 2/7 of the compute. Lower the share, or give a "
        "whole GPU."
    ]


def test_given_more_memory_than_the_gpu_then_check_refuses_it(mixed):
    share = GPUShare(memory_mib=100 * 1024)

    assert mixed.check(share, {A100_80GB: A100_80GB_MIB}) == [
        "The share a slice of a GPU, 100 GiB asks for 100 GiB of GPU memory, more than the "
        "80 GiB of NVIDIA A100-SXM4-80GB. Lower the memory, or limit the profile to a GPU model "
        "with more memory."
    ]


def test_given_a_configured_profile_the_clusters_model_lacks_then_configuration_check_says_so():
    backend = make_backend("mig", profiles=["1g.5gb", "3g.40gb"])

    assert backend.check_configuration({A100_80GB: A100_80GB_MIB, RTX_4090: RTX_4090_MIB}) == [
        "The MIG profile 1g.5gb is not a slice of any MIG-capable GPU model on this cluster "
        "(NVIDIA A100-SXM4-80GB offers 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb). "
        "Remove it from the MIG profiles, or fix its name."
    ]


def test_given_configured_profiles_then_only_those_slices_are_chosen():
    backend = make_backend("mig", profiles=["1g.20gb", "3g.40gb"])

    plan = backend.render(QUARTER, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="x")

    assert plan.resource_limits == {"nvidia.com/mig-3g.40gb": "1"}
    assert backend.check(QUARTER, {A100_40GB: A100_40GB_MIB}) == [
        "None of the MIG slices this cluster is partitioned into (1g.20gb, 3g.40gb) exists on "
        "the NVIDIA A100-PCIE-40GB, which offers 1g.5gb, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, "
        "7g.40gb. Fix the MIG profiles, or limit the profile to another GPU model."
    ]


def test_given_a_misspelt_profile_then_the_backend_refuses_the_configuration():
    with pytest.raises(ValueError, match="'1g.10GB ' is not a MIG profile"):
        make_backend("mig", profiles=["1g.10GB "])


def test_given_a_renamed_mig_resource_then_the_slice_uses_that_name(mixed):
    backend = make_backend("mig", resource_names={"mig": "example.com/mig-{profile}"})

    plan = backend.render(QUARTER, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="x")

    assert plan.resource_limits == {"example.com/mig-2g.20gb": "1"}


def test_given_a_compute_maximum_below_the_slice_then_it_is_reported_as_not_applied(mixed):
    share = GPUShare(memory_mib=20 * 1024, compute_min_pct=20, compute_max_pct=20)

    plan = mixed.render(share, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="x")

    assert plan.unhonoured == [
        "A compute maximum of 20% is not applied: the 2g.20gb MIG slice always has 2/7 (29%) of "
        "the GPU's compute."
    ]


def test_given_no_chosen_gpu_model_then_a_slice_cannot_be_chosen(mixed):
    with pytest.raises(UnsupportedShare, match="MIG slices differ between GPU models"):
        mixed.render(QUARTER, name="x")


def test_given_strategy_single_then_a_whole_gpu_needs_a_chosen_model():
    with pytest.raises(UnsupportedShare, match="needs a chosen GPU model"):
        make_backend("mig", strategy="single").render(WHOLE, name="x")


def test_given_strategy_single_without_gfd_labels_then_the_configuration_is_refused():
    with pytest.raises(ValueError, match="MIG strategy single needs GPU Feature Discovery"):
        make_backend("mig", strategy="single", gfd_labels=False)


def test_given_an_admins_own_mig_model_then_it_is_used_before_the_table():
    b200 = mig_model("B200 180GB", ("B200",), 180, ("1g.23gb", "1g.45gb", "2g.45gb", "7g.180gb"))
    backend = make_backend("mig", models=[b200])

    plan = backend.render(QUARTER, gpu_model="NVIDIA B200", gpu_memory_mib=183359, name="x")

    assert plan.resource_limits == {"nvidia.com/mig-2g.45gb": "1"}


class TestRecognisingModels:
    @pytest.mark.parametrize(
        ("gpu_model", "memory_mib", "mig_name"),
        [
            ("NVIDIA A100-SXM4-80GB", None, "A100 80GB"),
            ("NVIDIA A100 80GB PCIe", None, "A100 80GB"),
            ("NVIDIA A100-PCIE-40GB", None, "A100 40GB"),
            ("NVIDIA A100-SXM4-40GB", None, "A100 40GB"),
            ("A100", 40960, "A100 40GB"),
            ("NVIDIA A30", None, "A30 24GB"),
            ("NVIDIA H100 80GB HBM3", None, "H100 80GB"),
            ("NVIDIA H100 PCIe", None, "H100 80GB"),
            ("NVIDIA H100 NVL", None, "H100 NVL 94GB"),
            ("NVIDIA H200", None, "H200 141GB"),
            ("NVIDIA H200 NVL", None, "H200 141GB"),
        ],
    )
    def test_gpu_names_map_to_their_mig_model(self, gpu_model, memory_mib, mig_name):
        assert find_mig_model(gpu_model, memory_mib).name == mig_name

    @pytest.mark.parametrize(
        "gpu_model", ["NVIDIA GeForce RTX 4090", "Tesla T4", "NVIDIA A10", "NVIDIA L40S"]
    )
    def test_gpus_without_mig_are_not_mig_models(self, gpu_model):
        with pytest.raises(UnknownMIGModel):
            find_mig_model(gpu_model, None)

    def test_an_a100_of_unknown_size_is_ambiguous(self):
        with pytest.raises(UnknownMIGModel, match="whether it is the A100 40GB or A100 80GB"):
            find_mig_model("A100", None)
