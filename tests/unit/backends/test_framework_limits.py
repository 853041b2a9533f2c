"""Scenarios: every GPU server gets the same share description and soft limits, locally or not."""

from __future__ import annotations

from fractions import Fraction

import pytest

from gpuspawner.backends import BACKENDS, make_backend
from gpuspawner.backends.framework_limits import (
    JAX_MEMORY_FRACTION_NAMES,
    NO_GPU_ENVIRONMENT,
    framework_memory_limits,
    share_environment,
)
from gpuspawner.policy.capacity import Allocation
from gpuspawner.policy.local_share import local_share_environment
from gpuspawner.policy.share import GPUDevice, GPUShare

from .scenarios import A100_80GB, A100_80GB_MIB, QUARTER

BACKEND_SETTINGS = {"time-slicing": {"replicas": 4}, "mps": {"replicas": 4}}


def test_given_10_gib_of_an_80_gib_gpu_then_frameworks_get_an_eighth():
    assert framework_memory_limits(10 * 1024, A100_80GB_MIB) == {
        "GPUSPAWNER_TORCH_MEMORY_FRACTION": "0.125",
        "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.125",
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    }


def test_given_more_memory_than_visible_then_the_fraction_stops_at_one():
    assert (
        framework_memory_limits(30 * 1024, 24 * 1024)["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "1.000"
    )


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


# Current JAX refuses XLA_CLIENT_MEM_FRACTION beside XLA_PYTHON_CLIENT_MEM_FRACTION by falling
# back to the CPU, silently: a share must never set both.
SHARES = {
    "a quarter": QUARTER,
    "memory only": GPUShare(memory_mib=10 * 1024),
    "a whole GPU": GPUShare(count=1),
    "two whole GPUs": GPUShare(count=2),
}


def jax_fraction_names(environment) -> list[str]:
    return [name for name in JAX_MEMORY_FRACTION_NAMES if name in environment]


@pytest.mark.parametrize("backend_name", list(BACKENDS))
@pytest.mark.parametrize("share_name", list(SHARES))
@pytest.mark.parametrize("workload", ["server", "job"])
def test_no_kubernetes_back_end_gives_jax_two_memory_fraction_names(
    backend_name, share_name, workload
):
    backend = make_backend(backend_name, **BACKEND_SETTINGS.get(backend_name, {}))
    share = SHARES[share_name]
    if backend.check(share, {A100_80GB: A100_80GB_MIB}):
        pytest.skip(f"{backend_name} does not offer {share_name}")

    plan = backend.render(
        share,
        gpu_model=A100_80GB,
        gpu_memory_mib=A100_80GB_MIB,
        name="jupyter-alice",
        workload=workload,
        course="ml101",
    )

    assert len(jax_fraction_names(plan.environment)) <= 1, plan.environment


@pytest.mark.parametrize("hami_core", [None, "/opt/hami/libvgpu.so"])
@pytest.mark.parametrize("share_name", list(SHARES))
def test_no_local_share_gives_jax_two_memory_fraction_names(share_name, hami_core):
    share = SHARES[share_name]
    devices = [GPUDevice(f"GPU-{i}", i, A100_80GB, A100_80GB_MIB) for i in range(2)]
    allocation = Allocation(
        key="server:alice/",
        owner="alice",
        profile_id="p",
        course_id=None,
        device_ids=tuple(d.id for d in devices[: share.count or 1]),
        fraction=share.fraction or Fraction(share.count or 1),
        memory_mib=share.memory_mib or A100_80GB_MIB,
        compute_min_pct=0,
    )

    env = local_share_environment(
        share, allocation, devices, profile_id="p", hami_core_library=hami_core
    )

    assert len(jax_fraction_names(env)) <= 1, env


def test_a_quarter_gives_jax_its_fraction_under_the_name_every_jax_reads():
    assert jax_fraction_names(framework_memory_limits(20 * 1024, A100_80GB_MIB)) == [
        "XLA_PYTHON_CLIENT_MEM_FRACTION"
    ]
