"""Where the GPU inventory comes from: NVML on a real machine, configuration otherwise."""

from __future__ import annotations

import logging
from typing import Any

from ..policy.share import GPUDevice
from ..policy.units import parse_size_mib

log = logging.getLogger(__name__)


def discover_nvml_gpus() -> list[GPUDevice]:
    """The GPUs NVML reports, or an empty list when there is no driver or no GPU."""
    try:
        import pynvml  # type: ignore[import-untyped]  # nvidia-ml-py
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        log.info("NVML is not available (%s); no real GPUs discovered", error)
        return []
    try:
        driver, cuda = _nvml_versions(pynvml)
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total
            devices.append(
                GPUDevice(
                    id=uuid.decode() if isinstance(uuid, bytes) else uuid,
                    index=index,
                    model=_short_model(name.decode() if isinstance(name, bytes) else name),
                    memory_mib=int(memory // 1024**2),
                    driver=driver,
                    cuda=cuda,
                )
            )
        return devices
    finally:
        pynvml.nvmlShutdown()


def _nvml_versions(pynvml: Any) -> tuple[str | None, str | None]:
    """The driver's version and the CUDA version it supports (``12040`` is ``"12.4"``), for
    environments' requirements; None for what NVML does not tell."""
    try:
        raw = pynvml.nvmlSystemGetDriverVersion()
        driver = raw.decode() if isinstance(raw, bytes) else str(raw)
    except pynvml.NVMLError:
        driver = None
    try:
        number = int(pynvml.nvmlSystemGetCudaDriverVersion())
        cuda = f"{number // 1000}.{number % 1000 // 10}"
    except (pynvml.NVMLError, ValueError, TypeError):
        cuda = None
    return driver, cuda


def _short_model(name: str) -> str:
    """``NVIDIA GeForce RTX 4090`` reads better as ``RTX 4090``; keep data-centre names."""
    for prefix in ("NVIDIA GeForce ", "NVIDIA "):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def simulated_gpus(specs: list[dict]) -> list[GPUDevice]:
    """Devices from configuration, each labelled simulated.

    ``specs`` is a list like ``[{"model": "RTX 4090", "memory": "24GiB"}]``; an
    optional ``count`` repeats an entry, optional ``driver`` and ``cuda`` give the versions
    environments' requirements are checked against (``{"cuda": "12.2"}``).
    """
    devices: list[GPUDevice] = []
    for number, spec in enumerate(specs):
        if not isinstance(spec, dict) or "model" not in spec or "memory" not in spec:
            raise ValueError(
                f"simulated GPU #{number + 1} must be a dict with model and memory, "
                f"such as {{'model': 'RTX 4090', 'memory': '24GiB'}}; got {spec!r}"
            )
        for _ in range(int(spec.get("count", 1))):
            index = len(devices)
            devices.append(
                GPUDevice(
                    id=f"sim-{index}",
                    index=index,
                    model=str(spec["model"]),
                    memory_mib=parse_size_mib(spec["memory"]),
                    simulated=True,
                    driver=str(spec["driver"]) if spec.get("driver") is not None else None,
                    cuda=str(spec["cuda"]) if spec.get("cuda") is not None else None,
                )
            )
    return devices
