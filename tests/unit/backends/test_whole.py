"""Scenarios: a cluster that only gives out whole GPUs."""

from __future__ import annotations

from fractions import Fraction

import pytest

from gpuspawner.backends import UnsupportedShare, make_backend
from gpuspawner.policy.share import GPUShare

from .scenarios import A100_80GB, A100_80GB_MIB, QUARTER, WHOLE


def test_given_one_whole_gpu_then_the_pod_asks_for_one_on_the_chosen_model():
    plan = make_backend("whole").render(
        WHOLE, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="jupyter-alice"
    )

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


def test_given_a_quarter_gpu_then_it_is_refused_with_what_to_do_instead():
    backend = make_backend("whole")

    with pytest.raises(UnsupportedShare) as error:
        backend.render(QUARTER, gpu_model=A100_80GB, gpu_memory_mib=A100_80GB_MIB, name="x")

    message = (
        "This cluster gives out whole GPUs only, so the share 1/4 of a GPU, 10 GiB, compute "
        "25-100% cannot be given. Change the profile to a whole GPU (count: 1), or configure "
        "a sharing backend such as time-slicing, MIG or HAMi."
    )
    assert error.value.message == message
    assert backend.check(QUARTER, {A100_80GB: A100_80GB_MIB}) == [message]


def test_given_memory_only_then_it_is_a_slice_and_refused_too():
    share = GPUShare(memory_mib=80 * 1024)

    assert make_backend("whole").models_for(share, {A100_80GB: A100_80GB_MIB}) == []


def test_given_two_gpus_and_a_renamed_resource_then_the_pod_asks_for_two_of_that_resource():
    backend = make_backend("whole", resource_names={"gpu": "nvidia.com/gpu.exclusive"})

    plan = backend.render(GPUShare(count=2), name="x")

    assert plan.resource_limits == {"nvidia.com/gpu.exclusive": "2"}
    assert plan.node_selector == {}
    assert plan.environment == {
        "GPUSPAWNER_GPU_SHARE": "2 whole GPUs",
        "GPUSPAWNER_GPU_FRACTION": "1/1",
    }


def test_given_a_model_limit_but_no_chosen_model_then_the_plan_says_it_is_not_applied():
    share = GPUShare(fraction=Fraction(1), models=("A100",))

    plan = make_backend("whole").render(share, name="x")

    assert plan.node_selector == {}
    assert plan.unhonoured == [
        "The GPU model limit (A100) is not applied: no GPU model was chosen for this server, so "
        "it may start on any GPU model. List the cluster's GPU models in the hub configuration."
    ]


def test_given_gfd_labels_turned_off_then_no_node_selector_is_set():
    backend = make_backend("whole", gfd_labels=False)

    plan = backend.render(
        GPUShare(count=1, models=("A100",)),
        gpu_model=A100_80GB,
        gpu_memory_mib=A100_80GB_MIB,
        name="x",
    )

    assert plan.node_selector == {}
    assert plan.unhonoured == [
        "The GPU model limit (A100) is not applied: node selection by GPU Feature Discovery "
        "labels is turned off, so the server may start on any GPU model."
    ]
