"""Scenarios: an admin picks a sharing backend by name, and a profile without a GPU sees none."""

from __future__ import annotations

from fractions import Fraction

import pytest

from gpuspawner.backends import (
    BACKENDS,
    PodGPUPlan,
    UnsupportedShare,
    cpu_only_plan,
    make_backend,
)
from gpuspawner.policy.share import GPUShare

from .scenarios import A100_80GB, A100_80GB_MIB, QUARTER, RTX_4090, RTX_4090_MIB, WHOLE

SETTINGS = {"time-slicing": {"replicas": 4}, "mps": {"replicas": 4}}

NO_GPU = {
    "resource_limits": {},
    "resource_requests": {},
    "annotations": {},
    "labels": {},
    "node_selector": {},
    "tolerations": [],
    "scheduler_name": None,
    "environment": {
        "NVIDIA_VISIBLE_DEVICES": "void",
        "CUDA_VISIBLE_DEVICES": "",
        "GPUSPAWNER_GPU_SHARE": "No GPU",
    },
    "runtime_class_name": None,
    "resource_claim_templates": [],
    "pod_resource_claims": [],
    "container_claims": [],
    "unhonoured": [],
}


def test_every_backend_is_registered_under_its_own_name():
    assert list(BACKENDS) == [
        "whole",
        "time-slicing",
        "mps",
        "mig",
        "hami",
        "volcano",
        "dra",
        "kai",
    ]
    for name, backend_class in BACKENDS.items():
        assert backend_class.name == name
        assert make_backend(name, **SETTINGS.get(name, {})).name == name


def test_given_an_unknown_backend_name_then_the_error_lists_the_valid_ones():
    with pytest.raises(ValueError) as error:
        make_backend("timeslicing")

    assert str(error.value) == (
        "There is no GPU sharing backend called 'timeslicing'; choose one of whole, "
        "time-slicing, mps, mig, hami, volcano, dra, kai."
    )


def test_given_a_misspelt_setting_then_the_error_names_the_backend():
    with pytest.raises(ValueError, match="The time-slicing sharing backend cannot use"):
        make_backend("time-slicing", replica=4)


def test_given_a_resource_the_backend_does_not_use_then_the_error_lists_those_it_does():
    with pytest.raises(ValueError) as error:
        make_backend("hami", resource_names={"gpumem": "nvidia.com/gpumem"})

    assert str(error.value) == (
        "The hami sharing backend has no resource called gpumem; the resources it uses are: "
        "cores, gpu, memory, memory_percentage, priority."
    )


@pytest.mark.parametrize("name", list(BACKENDS))
def test_given_a_profile_without_a_gpu_then_every_backend_hides_all_gpus(name):
    backend = make_backend(name, **SETTINGS.get(name, {}))

    assert backend.cpu_only_plan().to_dict() == NO_GPU
    assert cpu_only_plan().to_dict() == NO_GPU


def test_given_tolerations_and_a_runtime_class_then_every_gpu_plan_carries_them():
    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    backend = make_backend("whole", tolerations=[toleration], runtime_class_name="nvidia")

    plan = backend.render(WHOLE, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="x")

    assert plan.tolerations == [toleration]
    assert plan.runtime_class_name == "nvidia"
    assert backend.cpu_only_plan() == PodGPUPlan(environment=NO_GPU["environment"])


def test_given_a_model_the_share_does_not_accept_then_no_plan_is_made():
    share = GPUShare(count=1, models=("H100",))

    with pytest.raises(UnsupportedShare) as error:
        make_backend("whole").render(share, gpu_model=A100_80GB, name="x")

    assert error.value.message == (
        "The share 1 whole H100 asks for H100, so it cannot be given on the NVIDIA "
        "A100-SXM4-80GB. Choose the GPU model with models_for()."
    )


class TestStartupCheck:
    def test_given_a_share_for_a_model_the_cluster_lacks_then_check_says_so(self):
        backend = make_backend("time-slicing", replicas=4)
        share = GPUShare(fraction=Fraction(1, 4), models=("H100",))

        assert backend.check(share, {A100_80GB: A100_80GB_MIB}) == [
            "The share 1/4 of an H100 asks for H100, but this cluster's GPU models are "
            "NVIDIA A100-SXM4-80GB. Fix the model, or add the GPU model to the hub's list of "
            "cluster GPUs."
        ]

    def test_given_a_share_that_fits_one_model_then_check_passes_and_names_that_model(self):
        backend = make_backend("time-slicing", replicas=4)
        cluster = {RTX_4090: RTX_4090_MIB, A100_80GB: A100_80GB_MIB}

        assert backend.check(QUARTER, cluster) == []
        # 10 GiB is more than a quarter of an RTX 4090 (6 GiB).
        assert backend.models_for(QUARTER, cluster) == [A100_80GB]

    def test_given_a_share_that_fits_no_model_then_every_model_gives_its_reason(self):
        backend = make_backend("time-slicing", replicas=4)

        errors = backend.check(QUARTER, {RTX_4090: RTX_4090_MIB})

        assert len(errors) == 1
        assert errors[0].startswith(
            "Time-slicing splits every GPU into 4 slots, so a slot of NVIDIA GeForce RTX 4090 "
            "has 6.0 GiB of its memory"
        )

    def test_given_no_known_gpu_models_then_only_model_independent_problems_are_errors(self):
        assert make_backend("whole").check(WHOLE, {}) == []
        assert len(make_backend("whole").check(QUARTER, {})) == 1
