"""What each GPU is doing now (utilisation, memory, temperature) and who holds its slices.

On one machine readings come from NVML (:class:`NVMLTelemetry`) or, in demos and tests,
from a JSON file a test writes (:class:`SimulatedTelemetry`); on Kubernetes the DCGM
exporter publishes them and Prometheus joins them to holders (see
``hub_config/monitoring/``). :func:`holders_of` joins readings to the allocations of the
capacity pool, for metrics and for GPU-aware reclaim.

Pure apart from reading NVML or the file: imports neither JupyterHub nor Kubernetes.

The simulated readings file::

    {"devices": [{"uuid": "sim-0", "index": 0, "utilization_pct": 35.0,
                  "memory_used_mib": 4096, "memory_total_mib": 24576,
                  "temperature_c": 61.0}]}
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Literal, Protocol

from .policy.capacity import Allocation, CapacityPool

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeviceReading:
    """One GPU at one instant."""

    uuid: str
    """The device id the capacity pool uses: NVML's UUID, or ``sim-N`` for simulated GPUs."""
    index: int
    utilization_pct: float
    memory_used_mib: int
    memory_total_mib: int
    temperature_c: float


@dataclass(frozen=True)
class Holder:
    """Who holds a slice of one device: a server or a job, with its user and course."""

    key: str
    """The allocation key: ``server:<user>/<server name>`` or ``job:<id>``."""
    user: str
    course_id: str | None
    """The course, or None for research allocations and standing profiles."""
    profile_id: str
    """The profile, research allocation or job flavor id."""
    kind: Literal["server", "job"]
    name: str
    """The server's name ("" for the default server) or the job's id."""
    fraction: Fraction

    @classmethod
    def of(cls, allocation: Allocation) -> Holder:
        kind, _, rest = allocation.key.partition(":")
        if kind == "job":
            name = rest
        else:
            kind = "server"
            name = rest.split("/", 1)[1] if "/" in rest else ""
        return cls(
            key=allocation.key,
            user=allocation.owner,
            course_id=allocation.course_id,
            profile_id=allocation.profile_id,
            kind="job" if kind == "job" else "server",
            name=name,
            fraction=allocation.fraction,
        )


class DeviceTelemetry(Protocol):
    """A source of readings, one per GPU of this machine."""

    def read(self) -> list[DeviceReading]: ...


class NVMLTelemetry:
    """Readings from NVML (nvidia-ml-py); no driver or no GPU gives none (logged once)."""

    def __init__(self) -> None:
        self._told = False

    def _tell_once(self, message: str, *args: object) -> None:
        if not self._told:
            self._told = True
            log.info(message, *args)

    def read(self) -> list[DeviceReading]:
        try:
            import pynvml  # type: ignore[import-untyped]  # nvidia-ml-py
        except ImportError:
            self._tell_once("nvidia-ml-py is not installed; no GPU telemetry")
            return []
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as error:
            self._tell_once("NVML is not available (%s); no GPU telemetry", error)
            return []
        try:
            readings = []
            for index in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                uuid = pynvml.nvmlDeviceGetUUID(handle)
                memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
                readings.append(
                    DeviceReading(
                        uuid=uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                        index=index,
                        utilization_pct=float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu),
                        memory_used_mib=int(memory.used // 1024**2),
                        memory_total_mib=int(memory.total // 1024**2),
                        temperature_c=float(
                            pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
                        ),
                    )
                )
            return readings
        except pynvml.NVMLError as error:
            log.warning("Reading GPU telemetry from NVML failed: %s", error)
            return []
        finally:
            pynvml.nvmlShutdown()


class SimulatedTelemetry:
    """Readings from a JSON file written by tests and demos (see the module docstring).

    A missing file means no readings; a malformed one is logged (once per change of the
    problem) and gives no readings, so a typo never takes the hub down.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._last_error: str | None = None

    def read(self) -> list[DeviceReading]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        except OSError as error:
            self._error(f"cannot be read ({error})")
            return []
        try:
            readings = parse_readings(json.loads(text))
        except (ValueError, TypeError, KeyError) as error:
            self._error(f"is not valid ({error})")
            return []
        self._last_error = None
        return readings

    def _error(self, problem: str) -> None:
        if problem != self._last_error:
            self._last_error = problem
            log.error(
                "The simulated GPU readings file %s %s; fix it as "
                '{"devices": [{"uuid": "sim-0", "index": 0, "utilization_pct": 0, '
                '"memory_used_mib": 0, "memory_total_mib": 24576, "temperature_c": 40}]}. '
                "No GPU readings until then.",
                self.path,
                problem,
            )


def parse_readings(data: object) -> list[DeviceReading]:
    """Readings from the simulated file's parsed JSON; raises ValueError when malformed."""
    if not isinstance(data, Mapping) or not isinstance(data.get("devices"), list):
        raise ValueError('expected an object with a "devices" list')
    readings = []
    for number, item in enumerate(data["devices"]):
        if not isinstance(item, Mapping):
            raise ValueError(f"device #{number + 1} is not an object")
        try:
            readings.append(
                DeviceReading(
                    uuid=str(item["uuid"]),
                    index=int(item["index"]),
                    utilization_pct=float(item["utilization_pct"]),
                    memory_used_mib=int(item["memory_used_mib"]),
                    memory_total_mib=int(item["memory_total_mib"]),
                    temperature_c=float(item["temperature_c"]),
                )
            )
        except KeyError as missing:
            raise ValueError(f"device #{number + 1} has no {missing}") from None
    return readings


def write_readings(path: str | Path, readings: Iterable[DeviceReading]) -> None:
    """Write ``readings`` as the simulated file (atomically: a reader never sees half)."""
    path = Path(path)
    payload = {"devices": [reading.__dict__ for reading in readings]}
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(payload, indent=1))
    temporary.replace(path)


def telemetry_from_config(simulated_path: str | None) -> DeviceTelemetry:
    """The simulated readings file when a path is given, NVML otherwise."""
    if simulated_path:
        return SimulatedTelemetry(simulated_path)
    return NVMLTelemetry()


def holders_of(
    readings: Sequence[DeviceReading], allocations: CapacityPool | Iterable[Allocation]
) -> dict[str, list[Holder]]:
    """For each reading (by ``uuid``), the servers and jobs holding slices of its device.

    Allocations name devices by the pool's device id, which is the reading's ``uuid``.
    Given a pool, a reading whose uuid is no device of the pool is matched by index
    instead (simulated readings may number GPUs without knowing their ids). A device
    nobody holds maps to an empty list.
    """
    if isinstance(allocations, CapacityPool):
        pool_ids = {device.id for device in allocations.devices}
        by_index = {device.index: device.id for device in allocations.devices}
        held = list(allocations.allocations.values())
    else:
        pool_ids, by_index, held = set(), {}, list(allocations)
    by_device: dict[str, list[Holder]] = {}
    for allocation in sorted(held, key=lambda a: a.key):
        for device_id in allocation.device_ids:
            by_device.setdefault(device_id, []).append(Holder.of(allocation))
    result: dict[str, list[Holder]] = {}
    for reading in readings:
        device_id = reading.uuid
        if device_id not in pool_ids and reading.index in by_index and pool_ids:
            device_id = by_index[reading.index]
        result[reading.uuid] = list(by_device.get(device_id, []))
    return result
