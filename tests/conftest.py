"""Suite-wide test settings: tests marked ``gpu`` run only where NVML sees a GPU."""

from __future__ import annotations

import pytest

# The Kubernetes cluster fixtures (k8s_cluster, k8s_controls, kubespawner_env, ...)
# are used beyond tests/k8s, e.g. by real-hub scenarios with GPUSpawner.
pytest_plugins = ["tests.support.k8s_cluster"]


def _nvidia_gpu_count() -> int:
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
    except Exception:  # no driver, no library, or no device: all mean "no GPU here"
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    finally:
        pynvml.nvmlShutdown()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items and _nvidia_gpu_count() == 0:
        skip = pytest.mark.skip(reason="needs a real NVIDIA GPU (NVML found none)")
        for item in gpu_items:
            item.add_marker(skip)
