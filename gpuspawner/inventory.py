"""Where the GPU inventory comes from: NVML on a real machine, configuration otherwise."""

from __future__ import annotations

import logging

from .policy.share import GPUDevice
from .policy.units import parse_size_mib

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
                )
            )
        return devices
    finally:
        pynvml.nvmlShutdown()


def _short_model(name: str) -> str:
    """``NVIDIA GeForce RTX 4090`` reads better as ``RTX 4090``; keep data-centre names."""
    for prefix in ("NVIDIA GeForce ", "NVIDIA "):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def simulated_gpus(specs: list[dict]) -> list[GPUDevice]:
    """Devices from configuration, each labelled simulated.

    ``specs`` is a list like ``[{"model": "RTX 4090", "memory": "24GiB"}]``; an
    optional ``count`` repeats an entry.
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
                )
            )
    return devices
