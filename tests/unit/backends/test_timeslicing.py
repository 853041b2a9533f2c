"""Scenarios: the device plugin time-slices every GPU into 4 slots, with no isolation."""

from __future__ import annotations

from fractions import Fraction

import pytest

from gpuspawner.backends import UnsupportedShare, make_backend
from gpuspawner.policy.share import GPUShare

from .scenarios import A100_80GB, A100_80GB_MIB, QUARTER, RTX_4090, RTX_4090_MIB, WHOLE


@pytest.fixture
def backend():
    return make_backend("time-slicing", replicas=4)


def test_given_a_quarter_gpu_with_10_gib_then_one_slot_and_soft_memory_limits(backend):
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
            "nvidia.com/gpu.sharing-strategy": "time-slicing",
            "nvidia.com/gpu.replicas": "4",
        },
        "tolerations": [],
        "scheduler_name": None,
        "environment": {
            "GPUSPAWNER_GPU_SHARE": "1/4 of an NVIDIA A100-SXM4-80GB, 10 GiB, compute 25-100%",
            "GPUSPAWNER_GPU_FRACTION": "1/4",
            "GPUSPAWNER_GPU_MEMORY_MIB": "10240",
            "GPUSPAWNER_GPU_COMPUTE_MAX_PCT": "100",
            "GPUSPAWNER_TORCH_MEMORY_FRACTION": "0.125",
            "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.125",
            "TF_FORCE_GPU_ALLOW_GROWTH": "true",
        },
        "runtime_class_name": None,
        "resource_claim_templates": [],
        "pod_resource_claims": [],
        "container_claims": [],
        "unhonoured": [
            "GPU memory is not isolated by time-slicing: the 10 GiB limit is applied only "
            "through PyTorch, JAX and TensorFlow settings, which a notebook can change.",
            "A compute minimum of 25% is not guaranteed by time-slicing: every process on the "
            "GPU gets an equal turn, however many servers share it.",
        ],
    }


def test_given_one_whole_gpu_then_it_is_asked_for_on_a_node_that_does_not_share(backend):
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


def test_given_renamed_slots_then_the_shared_resource_is_asked_for_without_the_shared_suffix():
    backend = make_backend(
        "time-slicing", replicas=4, resource_names={"shared": "nvidia.com/gpu.shared"}
    )

    plan = backend.render(QUARTER, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="x")

    assert plan.resource_limits == {"nvidia.com/gpu.shared": "1"}
    assert plan.node_selector["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"


def test_given_an_eighth_then_it_is_rounded_up_to_a_slot_with_a_note(backend):
    share = GPUShare(fraction=Fraction(1, 8))

    plan = backend.render(share, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="x")

    assert plan.environment["GPUSPAWNER_GPU_FRACTION"] == "1/4"
    assert plan.environment["GPUSPAWNER_GPU_MEMORY_MIB"] == "20480"
    assert plan.environment["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.250"
    assert plan.unhonoured[0] == (
        "The share of 1/8 of a GPU is rounded up to one time-slicing slot, 1/4 of the GPU: the "
        "cluster splits every GPU into 4 slots."
    )


def test_given_half_a_gpu_then_it_is_refused_because_a_server_gets_one_slot(backend):
    with pytest.raises(UnsupportedShare) as error:
        backend.render(GPUShare(fraction=Fraction(1, 2)), name="x")

    assert error.value.message == (
        "Time-slicing splits every GPU into 4 slots of 1/4, and a server gets one slot, so the "
        "share 1/2 of a GPU cannot be given. Lower the share to 1/4 of a GPU, give a whole GPU, "
        "or configure fewer replicas."
    )


def test_given_more_memory_than_a_slot_has_then_check_refuses_it_on_that_model(backend):
    assert backend.check(QUARTER, {RTX_4090: RTX_4090_MIB}) == [
        "Time-slicing splits every GPU into 4 slots, so a slot of NVIDIA GeForce RTX 4090 has "
        "6.0 GiB of its memory, and the share 1/4 of a GPU, 10 GiB, compute 25-100% asks for "
        "10 GiB. Lower the memory to 6.0 GiB or less, give a whole GPU, or configure fewer "
        "replicas."
    ]


def test_given_more_memory_than_the_gpu_has_then_check_refuses_it(backend):
    share = GPUShare(memory_mib=100 * 1024)

    assert backend.check(share, {A100_80GB: A100_80GB_MIB}) == [
        "The share a slice of a GPU, 100 GiB asks for 100 GiB of GPU memory, more than the "
        "80 GiB of NVIDIA A100-SXM4-80GB. Lower the memory, or limit the profile to a GPU model "
        "with more memory."
    ]


def test_given_an_unknown_gpu_memory_then_no_soft_limit_is_set_and_that_is_said(backend):
    plan = backend.render(GPUShare(fraction=Fraction(1, 4), compute_max_pct=50), name="x")

    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in plan.environment
    assert plan.unhonoured == [
        "GPU memory is not isolated by time-slicing, and no memory limit is set for PyTorch, "
        "JAX or TensorFlow because the GPU's memory size is unknown.",
        "A compute maximum of 50% is not enforced by time-slicing: a server alone on the GPU can "
        "use all of it.",
    ]


def test_given_one_replica_then_the_backend_refuses_the_configuration():
    with pytest.raises(ValueError, match="Time-slicing needs replicas of 2 or more"):
        make_backend("time-slicing", replicas=1)


def test_given_no_gfd_labels_then_a_whole_gpu_is_not_guaranteed_and_that_is_said():
    backend = make_backend("time-slicing", replicas=4, gfd_labels=False)

    plan = backend.render(WHOLE, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="x")

    assert plan.node_selector == {}
    assert plan.unhonoured == [
        "A whole GPU is not guaranteed: time-slicing slots are also called nvidia.com/gpu, and "
        "without GPU Feature Discovery labels the server cannot be kept off shared nodes."
    ]
