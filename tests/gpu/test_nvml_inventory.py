"""On a real GPU: the inventory the hub reads from NVML (model, memory, driver, CUDA) is the
one the driver reports, checked against nvidia-smi where it is installed."""

from __future__ import annotations

import re
import shutil
import subprocess

from gpuspawner.policy import GPUDevice


def test_nvml_gives_each_gpus_uuid_model_memory_driver_and_cuda(gpus: list[GPUDevice]):
    import pynvml  # nvidia-ml-py: present wherever the gpus fixture found a GPU

    # When the hub discovers this machine's GPUs (the gpus fixture: discover_nvml_gpus)
    # Then each is named by its UUID, numbered as NVML numbers it, with its model and memory
    pynvml.nvmlInit()
    try:
        for gpu in gpus:
            handle = pynvml.nvmlDeviceGetHandleByUUID(gpu.id)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else name
            assert gpu.id.startswith("GPU-"), gpu
            assert pynvml.nvmlDeviceGetIndex(handle) == gpu.index
            assert name.endswith(gpu.model), (name, gpu)
            assert gpu.memory_mib == pynvml.nvmlDeviceGetMemoryInfo(handle).total // 2**20
            assert not gpu.simulated
    finally:
        pynvml.nvmlShutdown()
    # And the driver's version and the CUDA version it supports, as environments need them
    for gpu in gpus:
        assert gpu.driver is not None and re.fullmatch(r"\d+\.\d+(\.\d+)*", gpu.driver), gpu
        assert gpu.cuda is not None and re.fullmatch(r"\d+\.\d+", gpu.cuda), gpu


def test_the_inventory_agrees_with_nvidia_smi(gpus: list[GPUDevice]):
    smi = shutil.which("nvidia-smi")
    if smi is None:
        import pytest

        pytest.skip("nvidia-smi is not installed: the inventory was checked against NVML only")
    rows = subprocess.run(
        [
            smi,
            "--query-gpu=index,uuid,memory.total,driver_version",
            "--format=csv,noheader,nounits",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    reported = {}
    for row in rows:
        index, uuid, memory, driver = (part.strip() for part in row.split(","))
        reported[uuid] = (int(index), int(memory), driver)
    assert {gpu.id: (gpu.index, gpu.memory_mib, gpu.driver) for gpu in gpus} == reported
    header = subprocess.run([smi], capture_output=True, text=True, check=True).stdout
    cuda = re.search(r"CUDA Version:\s*(\d+\.\d+)", header)
    assert cuda is not None and cuda.group(1) == gpus[0].cuda, header[:400]
