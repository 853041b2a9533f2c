"""Scenarios: the environment that gives a local server its GPU share (literal expectations)."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction

from gpuspawner.policy import CapacityPool, GPUDevice, GPUShare
from gpuspawner.policy.local_share import local_share_environment

END = datetime(2026, 11, 23, 11, 10, tzinfo=UTC)
CLASS_END = datetime(2026, 11, 23, 11, 0, tzinfo=UTC)
GPU = GPUDevice("GPU-1234", 1, "RTX 4090", 24576)


def allocate(share: GPUShare):
    pool = CapacityPool([GPUDevice("GPU-0000", 0, "RTX 4090", 24576), GPU])
    pool.allocate(
        "server:held/", owner="x", profile_id="p", course_id=None, share=GPUShare(count=1)
    )
    return pool.allocate(
        "server:ana/", owner="ana", profile_id="ml101", course_id="ml101", share=share
    ), pool.devices


def test_a_quarter_gpu_with_memory_and_soft_framework_limits():
    share = GPUShare(
        fraction=Fraction(1, 4), memory_mib=6144, compute_min_pct=25, compute_max_pct=100
    )
    allocation, devices = allocate(share)
    env = local_share_environment(
        share, allocation, devices, profile_id="ml101", session_end=END, class_end=CLASS_END
    )
    assert env == {
        "GPUSPAWNER_PROFILE": "ml101",
        "GPUSPAWNER_SESSION_END": "2026-11-23T11:10:00+00:00",
        "GPUSPAWNER_CLASS_END": "2026-11-23T11:00:00+00:00",
        "CUDA_VISIBLE_DEVICES": "GPU-1234",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "GPUSPAWNER_GPU_DEVICES": "GPU-1234",
        "GPUSPAWNER_GPU_SHARE": "1/4 of an RTX 4090, 6 GiB, compute 25-100%",
        "GPUSPAWNER_GPU_FRACTION": "1/4",
        "GPUSPAWNER_GPU_MEMORY_MIB": "6144",
        "GPUSPAWNER_GPU_COMPUTE_MAX_PCT": "100",
        "GPUSPAWNER_TORCH_MEMORY_FRACTION": "0.250",
        "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.250",
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    }


def test_with_hami_core_the_cap_is_enforced_and_not_shrunk_twice():
    share = GPUShare(fraction=Fraction(1, 4), memory_mib=6144, compute_max_pct=50)
    allocation, devices = allocate(share)
    env = local_share_environment(
        share, allocation, devices, profile_id="ml101", hami_core_library="/opt/hami/libvgpu.so"
    )
    assert env["LD_PRELOAD"] == "/opt/hami/libvgpu.so"
    assert env["CUDA_DEVICE_MEMORY_LIMIT"] == "6144m"
    assert env["CUDA_DEVICE_SM_LIMIT"] == "50"
    assert "GPUSPAWNER_TORCH_MEMORY_FRACTION" not in env
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in env
    assert env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"


def test_a_whole_gpu_gets_the_device_and_no_soft_limits():
    share = GPUShare(count=1)
    allocation, devices = allocate(share)
    env = local_share_environment(share, allocation, devices, profile_id="vision")
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-1234"
    assert env["GPUSPAWNER_GPU_SHARE"] == "1 whole RTX 4090, 24 GiB"
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in env


def test_a_server_without_a_gpu_sees_none():
    assert local_share_environment(None, None, [GPU], profile_id="cpu") == {
        "GPUSPAWNER_PROFILE": "cpu",
        "CUDA_VISIBLE_DEVICES": "",
        "NVIDIA_VISIBLE_DEVICES": "void",
        "GPUSPAWNER_GPU_SHARE": "No GPU",
    }
