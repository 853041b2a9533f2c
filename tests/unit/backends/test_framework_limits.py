"""Scenarios: every GPU server gets the same share description and soft limits, locally or not."""

from __future__ import annotations

from fractions import Fraction

from gpuspawner.backends.framework_limits import (
    NO_GPU_ENVIRONMENT,
    framework_memory_limits,
    share_environment,
)
from gpuspawner.policy.capacity import Allocation
from gpuspawner.policy.local_share import local_share_environment
from gpuspawner.policy.share import GPUDevice, GPUShare

from .scenarios import A100_80GB, A100_80GB_MIB, QUARTER


def test_given_10_gib_of_an_80_gib_gpu_then_frameworks_get_an_eighth():
    assert framework_memory_limits(10 * 1024, A100_80GB_MIB) == {
        "GPUSPAWNER_TORCH_MEMORY_FRACTION": "0.125",
        "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.125",
        "XLA_CLIENT_MEM_FRACTION": "0.125",
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    }


def test_given_more_memory_than_visible_then_the_fraction_stops_at_one():
    assert framework_memory_limits(30 * 1024, 24 * 1024)["XLA_CLIENT_MEM_FRACTION"] == "1.000"


def test_given_a_slice_then_its_description_says_what_the_server_gets():
    env = share_environment(
        QUARTER,
        gpu_model=A100_80GB,
        gpu_memory_mib=A100_80GB_MIB,
        fraction=Fraction(1, 4),
        memory_mib=10 * 1024,
    )

    assert env == {
        "GPUSPAWNER_GPU_SHARE": "1/4 of an NVIDIA A100-SXM4-80GB, 10 GiB, compute 25-100%",
        "GPUSPAWNER_GPU_FRACTION": "1/4",
        "GPUSPAWNER_GPU_MEMORY_MIB": "10240",
        "GPUSPAWNER_GPU_COMPUTE_MAX_PCT": "100",
    }


def test_given_nothing_known_about_the_gpu_then_only_the_share_is_described():
    env = share_environment(
        GPUShare(memory_mib=6 * 1024),
        gpu_model=None,
        gpu_memory_mib=None,
        fraction=None,
        memory_mib=None,
    )

    assert env == {"GPUSPAWNER_GPU_SHARE": "a slice of a GPU, 6 GiB"}


def test_the_local_spawner_sets_the_same_variables_with_the_same_values():
    device = GPUDevice("GPU-aaaa", 0, A100_80GB, A100_80GB_MIB)
    allocation = Allocation(
        key="server:alice/",
        owner="alice",
        profile_id="ml101-gpu",
        course_id="ml101",
        device_ids=(device.id,),
        fraction=Fraction(1, 4),
        memory_mib=10 * 1024,
        compute_min_pct=25,
    )

    local = local_share_environment(QUARTER, allocation, [device], profile_id="ml101-gpu")
    shared = {
        **share_environment(
            QUARTER,
            gpu_model=A100_80GB,
            gpu_memory_mib=A100_80GB_MIB,
            fraction=allocation.fraction,
            memory_mib=allocation.memory_mib,
        ),
        **framework_memory_limits(allocation.memory_mib, A100_80GB_MIB),
    }

    assert {name: local[name] for name in shared} == shared
    no_gpu = local_share_environment(None, None, [], profile_id="cpu")
    assert {name: no_gpu[name] for name in NO_GPU_ENVIRONMENT} == dict(NO_GPU_ENVIRONMENT)
