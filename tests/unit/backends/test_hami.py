"""Scenarios: HAMi caps memory and limits compute per container."""

from __future__ import annotations

from fractions import Fraction

import pytest

from gpuspawner.backends import UnsupportedShare, make_backend
from gpuspawner.policy.share import GPUShare

from .scenarios import A100_80GB, A100_80GB_MIB, QUARTER, WHOLE


@pytest.fixture
def backend():
    return make_backend("hami")


def test_given_a_quarter_gpu_with_10_gib_then_memory_is_capped_and_the_minimum_is_gpucores(
    backend,
):
    plan = backend.render(
        QUARTER, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="jupyter-alice"
    )

    assert plan.to_dict() == {
        "resource_limits": {
            "nvidia.com/gpu": "1",
            "nvidia.com/gpumem": "10240",
            "nvidia.com/gpucores": "25",
        },
        "resource_requests": {},
        "annotations": {
            "hami.io/gpu-scheduler-policy": "binpack",
            "nvidia.com/use-gputype": "NVIDIA A100-SXM4-80GB",
        },
        "labels": {},
        "node_selector": {},
        "tolerations": [],
        "scheduler_name": "hami-scheduler",
        # HAMi-core reports the 10 GiB cap as the GPU's total: no soft fractions on top.
        "environment": {
            "GPUSPAWNER_GPU_SHARE": "1/4 of an NVIDIA A100-SXM4-80GB, 10 GiB, compute 25-100%",
            "GPUSPAWNER_GPU_FRACTION": "1/4",
            "GPUSPAWNER_GPU_MEMORY_MIB": "10240",
            "GPUSPAWNER_GPU_COMPUTE_MAX_PCT": "100",
        },
        "runtime_class_name": None,
        "resource_claim_templates": [],
        "pod_resource_claims": [],
        "container_claims": [],
        "unhonoured": [
            "HAMi reserves no compute: the 25% minimum is a limit HAMi applies to every server "
            "on the GPU while they compete, and a long kernel that is already running is not "
            "interrupted.",
            "Compute above 25% (up to 100%) is available only while no other server on the same "
            "GPU is computing.",
        ],
    }


def test_given_one_whole_gpu_then_only_the_gpu_count_is_asked_for(backend):
    plan = backend.render(WHOLE, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="x")

    assert plan.to_dict() == {
        "resource_limits": {"nvidia.com/gpu": "1"},
        "resource_requests": {},
        "annotations": {
            "hami.io/gpu-scheduler-policy": "binpack",
            "nvidia.com/use-gputype": "NVIDIA A100-SXM4-80GB",
        },
        "labels": {},
        "node_selector": {},
        "tolerations": [],
        "scheduler_name": "hami-scheduler",
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


def test_given_a_fraction_only_on_a_known_gpu_then_memory_is_in_mib(backend):
    plan = backend.render(
        GPUShare(fraction=Fraction(1, 3)),
        gpu_model=A100_80GB,
        gpu_memory_mib=A100_80GB_MIB,
        name="x",
    )

    assert plan.resource_limits == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "27306",
        "nvidia.com/gpucores": "33",
    }
    assert plan.unhonoured == []


def test_given_a_fraction_only_on_an_unknown_gpu_then_memory_is_a_percentage(backend):
    share = GPUShare(fraction=Fraction(1, 3), models=("A100",))

    plan = backend.render(share, name="x")

    assert plan.resource_limits == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem-percentage": "33",
        "nvidia.com/gpucores": "33",
    }
    assert plan.annotations["nvidia.com/use-gputype"] == "A100"


def test_given_memory_as_percentage_then_fraction_only_shares_fit_any_model():
    backend = make_backend("hami", memory_as="percentage")

    plan = backend.render(
        GPUShare(fraction=Fraction(1, 4)),
        gpu_model=A100_80GB,
        gpu_memory_mib=A100_80GB_MIB,
        name="x",
    )

    assert plan.resource_limits == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem-percentage": "25",
        "nvidia.com/gpucores": "25",
    }


def test_given_the_force_policy_then_the_minimum_is_a_hard_cap_and_burst_is_lost():
    backend = make_backend("hami", core_policy="force")

    plan = backend.render(QUARTER, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="x")

    assert plan.unhonoured[1] == (
        "Compute cannot go above 25%: the cluster runs HAMi with "
        "GPU_CORE_UTILIZATION_POLICY=force, which makes 25% a hard cap even when the GPU is "
        "otherwise idle."
    )


def test_given_a_compute_maximum_below_100_then_it_is_not_enforced_under_the_default_policy(
    backend,
):
    share = GPUShare(memory_mib=8 * 1024, compute_min_pct=20, compute_max_pct=50)

    plan = backend.render(share, name="x")

    assert plan.unhonoured[1] == (
        "A compute maximum of 50% is not enforced: HAMi applies one compute limit per server "
        "(20%), and only while other servers compute, so a server alone on the GPU can use all "
        "of it."
    )


def test_given_a_priority_and_renamed_resources_then_they_are_used():
    backend = make_backend(
        "hami",
        priority=1,
        gpu_scheduler_policy=None,
        resource_names={"memory": "example.com/vgpu-memory", "cores": "example.com/vgpu-cores"},
    )

    plan = backend.render(QUARTER, name="x")

    assert plan.resource_limits == {
        "nvidia.com/gpu": "1",
        "example.com/vgpu-memory": "10240",
        "example.com/vgpu-cores": "25",
        "nvidia.com/priority": "1",
    }
    assert plan.annotations == {}


def test_given_more_memory_than_the_gpu_then_no_plan_is_made(backend):
    with pytest.raises(UnsupportedShare, match="more than the 80 GiB of NVIDIA A100-SXM4-80GB"):
        backend.render(
            GPUShare(memory_mib=90 * 1024),
            gpu_model=A100_80GB,
            gpu_memory_mib=A100_80GB_MIB,
            name="x",
        )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"gpu_scheduler_policy": "pack"}, "HAMi has no GPU scheduler policy pack"),
        ({"priority": 2}, "HAMi's priority is 0 \\(high\\) or 1 \\(low\\)"),
        ({"memory_as": "gib"}, "memory_as must be mib or percentage"),
        ({"core_policy": "disable"}, "core_policy must be default or force"),
    ],
)
def test_given_an_unknown_setting_value_then_the_configuration_is_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        make_backend("hami", **settings)
