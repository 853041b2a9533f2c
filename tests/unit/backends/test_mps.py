"""Scenarios: the device plugin runs MPS with 4 slots per GPU, each with fixed caps."""

from __future__ import annotations

import pytest

from gpuspawner.backends import UnsupportedShare, make_backend
from gpuspawner.policy.share import GPUShare

from .scenarios import A100_80GB, A100_80GB_MIB, QUARTER, WHOLE


@pytest.fixture
def backend():
    return make_backend("mps", replicas=4)


def test_given_a_quarter_gpu_with_10_gib_then_one_slot_with_its_fixed_caps(backend):
    plan = backend.render(
        QUARTER, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="jupyter-alice"
    )

    assert plan.to_dict() == {
        "resource_limits": {"nvidia.com/gpu": "1"},
        "resource_requests": {},
        "annotations": {},
        "labels": {},
        "node_selector": {
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-SHARED",
            "nvidia.com/gpu.sharing-strategy": "mps",
            "nvidia.com/gpu.replicas": "4",
        },
        "tolerations": [],
        "scheduler_name": None,
        "environment": {
            "GPUSPAWNER_GPU_SHARE": "1/4 of an NVIDIA A100-SXM4-80GB, 10 GiB, compute 25-100%",
            "GPUSPAWNER_GPU_FRACTION": "1/4",
            # The slot's hard cap, 80 GiB / 4, is what the server has.
            "GPUSPAWNER_GPU_MEMORY_MIB": "20480",
            "GPUSPAWNER_GPU_COMPUTE_MAX_PCT": "100",
            "GPUSPAWNER_TORCH_MEMORY_FRACTION": "0.250",
            "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.250",
            "TF_FORCE_GPU_ALLOW_GROWTH": "true",
        },
        "runtime_class_name": None,
        "resource_claim_templates": [],
        "pod_resource_claims": [],
        "container_claims": [],
        "unhonoured": [
            "MPS sets aside no compute for a server: the 25% minimum holds only because every "
            "server on the GPU is capped at 25% of its threads.",
            "Compute cannot burst above 25%: MPS caps every server on this GPU at 25% of its "
            "threads, even when the GPU is otherwise idle, so the 100% maximum is never reached.",
        ],
    }


def test_given_one_whole_gpu_then_it_is_asked_for_on_a_node_without_mps(backend):
    plan = backend.render(WHOLE, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="x")

    assert plan.to_dict() == {
        "resource_limits": {"nvidia.com/gpu": "1"},
        "resource_requests": {},
        "annotations": {},
        "labels": {},
        "node_selector": {
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
            "nvidia.com/gpu.sharing-strategy": "none",
        },
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


def test_given_a_compute_minimum_above_the_slot_cap_then_it_is_refused(backend):
    share = GPUShare(memory_mib=8 * 1024, compute_min_pct=50)

    assert backend.check(share, {A100_80GB: A100_80GB_MIB}) == [
        "MPS caps every server at 25% of the GPU's compute (4 slots per GPU), so the share a "
        "slice of a GPU, 8 GiB, compute 50-100% with a compute minimum of 50% can never be "
        "given. Lower the minimum to 25% or less, give a whole GPU, or configure fewer replicas."
    ]


def test_given_more_memory_than_the_slot_cap_then_it_is_refused(backend):
    with pytest.raises(UnsupportedShare, match="a slot of NVIDIA A100-SXM4-80GB has 20 GiB"):
        backend.render(
            GPUShare(memory_mib=30 * 1024),
            gpu_model=A100_80GB,
            gpu_memory_mib=A100_80GB_MIB,
            name="x",
        )


def test_given_a_compute_maximum_below_the_cap_then_it_is_reported_as_not_applied(backend):
    share = GPUShare(memory_mib=8 * 1024, compute_max_pct=10)

    plan = backend.render(share, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="x")

    assert plan.unhonoured == [
        "A compute maximum of 10% is not applied: MPS gives every server on this GPU the same "
        "25% of its threads."
    ]


def test_given_renamed_slots_then_the_renamed_resource_is_asked_for():
    backend = make_backend("mps", replicas=2, resource_names={"shared": "nvidia.com/gpu.shared"})

    plan = backend.render(QUARTER, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="x")

    assert plan.resource_limits == {"nvidia.com/gpu.shared": "1"}
    assert plan.node_selector["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert plan.unhonoured[0].startswith("The share of 1/4 of a GPU is rounded up to one MPS slot")
