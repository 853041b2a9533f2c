"""What each GPU is doing now (utilisation, memory, temperature), and each process on it.

Design notes: docs/design/core.md, "gpuspawner.core.telemetry".
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, Protocol

from ..policy.capacity import Allocation, CapacityPool

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProcessReading:
    """One process (or, on Kubernetes, one pod) using a GPU, at one instant."""

    pid: int | None
    """As NVML reports it: possibly a pid of another PID namespace. None for a pod."""
    utilization_pct: float | None
    """The highest SM utilisation NVML sampled for it since the last reading (0 when it
    ran no kernel then); None when unknown."""
    memory_used_mib: int | None
    """GPU memory it holds; None when the driver does not say."""
    holder: str | None = None
    """The allocation key of the server or job it belongs to, once attributed."""
    unattributed: str | None = None
    """Why it belongs to no known holder (a sentence), when attribution failed."""
    device_wide: str | None = None
    """Set when the number is the whole GPU's rather than this holder's (an exporter that
    gives every pod of a time-shared GPU the GPU's numbers): why, in a sentence."""


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
    processes: tuple[ProcessReading, ...] | None = None
    """The processes on the GPU; None when per-process readings are not available (then
    only the device-wide numbers are known), empty when none runs."""
    no_processes_because: str | None = None
    """When ``processes`` is None: why, in a sentence (NVML's answer, say)."""


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
    """Readings from NVML (nvidia-ml-py); no driver or no GPU gives none (logged once).

    Each reading lists the compute processes on its GPU with their memory and their SM
    utilisation since the previous reading (NVML keeps recent samples per process; the
    highest one counts, so a short burst of work is not missed between two readings).
    """

    def __init__(self) -> None:
        self._told = False
        self._last_sample: dict[str, int] = {}
        """Per GPU, the timestamp (µs) of the newest process sample already read."""

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
                uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
                memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
                processes, because = self._processes(pynvml, handle, uuid)
                readings.append(
                    DeviceReading(
                        uuid=uuid,
                        index=index,
                        utilization_pct=float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu),
                        memory_used_mib=int(memory.used // 1024**2),
                        memory_total_mib=int(memory.total // 1024**2),
                        temperature_c=float(
                            pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
                        ),
                        processes=processes,
                        no_processes_because=because,
                    )
                )
            return readings
        except pynvml.NVMLError as error:
            log.warning("Reading GPU telemetry from NVML failed: %s", error)
            return []
        finally:
            pynvml.nvmlShutdown()

    def _processes(
        self, pynvml: Any, handle: Any, uuid: str
    ) -> tuple[tuple[ProcessReading, ...] | None, str | None]:
        """The compute processes on one GPU, or None and why NVML could not say."""
        try:
            running = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except pynvml.NVMLError as error:
            return None, f"NVML does not list the processes on this GPU ({error})"
        try:
            samples = pynvml.nvmlDeviceGetProcessUtilization(handle, self._last_sample.get(uuid, 0))
        except pynvml.NVMLError as error:
            # NOT_FOUND: no process ran a kernel since the last reading (so each is at 0).
            # Some builds answer SUCCESS with no samples through the same path.
            if getattr(error, "value", None) not in (
                pynvml.NVML_ERROR_NOT_FOUND,
                pynvml.NVML_SUCCESS,
            ):
                return None, f"NVML gives no per-process utilisation on this GPU ({error})"
            samples = []
        return process_readings(running, samples, self._last_sample, uuid), None


def process_readings(
    running: Iterable[Any], samples: Iterable[Any], last_sample: dict[str, int], uuid: str
) -> tuple[ProcessReading, ...]:
    """NVML's running processes (``pid``, ``usedGpuMemory`` in bytes or None) joined to its
    utilisation samples (``pid``, ``timeStamp`` in µs, ``smUtil`` in percent): the highest
    sample of each process, 0 for a process without one. Records the newest timestamp in
    ``last_sample[uuid]``, so the next reading asks only for newer samples."""
    highest: dict[int, float] = {}
    for sample in samples:
        pid = int(sample.pid)
        highest[pid] = max(highest.get(pid, 0.0), float(sample.smUtil))
        last_sample[uuid] = max(last_sample.get(uuid, 0), int(sample.timeStamp))
    found: dict[int, ProcessReading] = {}
    for process in running:
        pid = int(process.pid)
        used = process.usedGpuMemory
        memory = None if used is None else int(used // 1024**2)
        previous = found.get(pid)  # one process may hold several contexts on one GPU
        if previous is not None and previous.memory_used_mib is not None and memory is not None:
            memory += previous.memory_used_mib
        found[pid] = ProcessReading(pid, highest.get(pid, 0.0), memory)
    return tuple(found[pid] for pid in sorted(found))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


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
                    processes=_parse_processes(item.get("processes"), number),
                )
            )
        except KeyError as missing:
            raise ValueError(f"device #{number + 1} has no {missing}") from None
    return readings


def _parse_processes(items: object, device: int) -> tuple[ProcessReading, ...] | None:
    if items is None:
        return None
    if not isinstance(items, list):
        raise ValueError(f'device #{device + 1}: "processes" must be a list')
    found = []
    for number, item in enumerate(items):
        where = f"device #{device + 1}, process #{number + 1}"
        if not isinstance(item, Mapping) or ("pid" in item) == ("holder" in item):
            raise ValueError(
                f'{where} must be an object with either a "pid" or a "holder" '
                '(an allocation key such as "server:ana/")'
            )
        found.append(
            ProcessReading(
                pid=int(item["pid"]) if "pid" in item else None,
                utilization_pct=_float(item.get("utilization_pct")),
                memory_used_mib=_int(item.get("memory_used_mib")),
                holder=str(item["holder"]) if "holder" in item else None,
            )
        )
    return tuple(found)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def write_readings(path: str | Path, readings: Iterable[DeviceReading]) -> None:
    """Write ``readings`` as the simulated file (atomically: a reader never sees half)."""
    path = Path(path)
    devices = []
    for reading in readings:
        item: dict[str, Any] = {
            "uuid": reading.uuid,
            "index": reading.index,
            "utilization_pct": reading.utilization_pct,
            "memory_used_mib": reading.memory_used_mib,
            "memory_total_mib": reading.memory_total_mib,
            "temperature_c": reading.temperature_c,
        }
        if reading.processes is not None:
            item["processes"] = [
                {
                    **({"pid": p.pid} if p.holder is None else {"holder": p.holder}),
                    "utilization_pct": p.utilization_pct,
                    "memory_used_mib": p.memory_used_mib,
                }
                for p in reading.processes
            ]
        devices.append(item)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps({"devices": devices}, indent=1))
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
