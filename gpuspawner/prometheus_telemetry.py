"""GPU use per pod on Kubernetes, read from the Prometheus the admins run.

Design notes: docs/design/hub.md, "gpuspawner.prometheus_telemetry".
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .core.telemetry import DeviceReading, ProcessReading

log = logging.getLogger(__name__)

QUERY_TIMEOUT = 10.0

HAMI_UTILIZATION = (
    "hami_container_device_utilization_ratio",
    "Device_utilization_desc_of_container",
)
HAMI_MEMORY = ("hami_vgpu_memory_used_bytes", "vGPU_device_memory_usage_in_bytes")
DCGM_UTILIZATION = "DCGM_FI_DEV_GPU_UTIL"
DCGM_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
DCGM_MEMORY = "DCGM_FI_DEV_FB_USED"
ALLOCATION_INFO = "gpuspawner_allocation_info"
SERIES = (*HAMI_UTILIZATION, *HAMI_MEMORY, DCGM_UTILIZATION, DCGM_ACTIVE, DCGM_MEMORY)
"""Every metric read, with the hub's allocation info: one instant query each."""

Sample = Mapping[str, Any]
"""One element of an instant query's result: ``{"metric": {labels}, "value": [t, "v"]}``."""


def holder_key(labels: Mapping[str, str]) -> str | None:
    """The allocation key a ``gpuspawner_allocation_info`` series names."""
    kind, user, name = labels.get("kind"), labels.get("user"), labels.get("name", "")
    if kind == "job" and name:
        return f"job:{name}"
    if kind == "server" and user:
        return f"server:{user}/{name}"
    return None


def _pod(labels: Mapping[str, str]) -> tuple[str, str]:
    """The workload's (namespace, pod) of an exporter's series, whichever names it uses."""
    namespace = labels.get("namespace") or labels.get("podnamespace") or ""
    pod = labels.get("pod") or labels.get("podname") or ""
    return namespace, pod


def _value(sample: Sample) -> float:
    return float(sample["value"][1])


@dataclass
class _Device:
    """One exporter device (a GPU, a MIG slice or a HAMi vGPU's card) and its pods' numbers."""

    utilization: dict[str, float] = field(default_factory=dict)
    memory_mib: dict[str, int] = field(default_factory=dict)


def readings_from_series(series: Mapping[str, Iterable[Sample]]) -> list[DeviceReading]:
    """Readings per exporter device, each process a pod of the hub with its holder, from
    the instant query results of :data:`SERIES` and ``gpuspawner_allocation_info`` by
    metric name (a missing name: no such series). Pods that are no server's or job's of
    the hub are left out: their use is not any holder's."""
    holders: dict[tuple[str, str], str] = {}
    for sample in series.get(ALLOCATION_INFO, ()):
        labels = sample["metric"]
        key = holder_key(labels)
        if key is not None and labels.get("pod"):
            holders[(labels.get("namespace", ""), labels["pod"])] = key

    # HAMi: per card and holder, each container's number (the same number under both of
    # its names counts once); a pod's containers add up.
    hami_util: dict[tuple[str, str, str], float] = {}
    hami_memory: dict[tuple[str, str, str], float] = {}
    for names, into in ((HAMI_UTILIZATION, hami_util), (HAMI_MEMORY, hami_memory)):
        for name in names:
            for sample in series.get(name, ()):
                labels = sample["metric"]
                key = holders.get(_pod(labels))
                if key is None:
                    continue
                card = labels.get("device_uuid") or labels.get("deviceuuid") or ""
                container = labels.get("container") or labels.get("ctrname") or ""
                slot = (card, key, container)
                into[slot] = max(into.get(slot, 0.0), _value(sample))
    hami: dict[str, _Device] = {}
    for (card, key, _), value in hami_util.items():
        device = hami.setdefault(card, _Device())
        device.utilization[key] = min(100.0, device.utilization.get(key, 0.0) + value)
    for (card, key, _), value in hami_memory.items():
        device = hami.setdefault(card, _Device())
        device.memory_mib[key] = device.memory_mib.get(key, 0) + int(value // 2**20)
    counted = {key for device in hami.values() for key in device.utilization}

    # DCGM: per GPU or MIG slice and holder. A MIG slice's activity is its own
    # (DCGM_FI_DEV_GPU_UTIL is not measured per MIG slice); a whole GPU's utilisation is
    # DCGM_FI_DEV_GPU_UTIL, or its engine activity where only profiling metrics are on.
    util: dict[tuple[str, str], float] = {}
    active: dict[tuple[str, str], float] = {}
    memory: dict[tuple[str, str], int] = {}
    mig: set[str] = set()
    pods_on: dict[str, set[tuple[str, str]]] = {}
    for name in (DCGM_UTILIZATION, DCGM_ACTIVE, DCGM_MEMORY):
        for sample in series.get(name, ()):
            labels = sample["metric"]
            gpu = "/".join(p for p in (labels.get("Hostname"), labels.get("UUID")) if p)
            if labels.get("GPU_I_ID"):
                gpu += f"/MIG {labels['GPU_I_ID']}"
                mig.add(gpu)
            if labels.get("pod"):
                pods_on.setdefault(gpu, set()).add(_pod(labels))
            key = holders.get(_pod(labels))
            if key is None or key in counted:
                continue
            if name == DCGM_UTILIZATION:
                util[(gpu, key)] = _value(sample)
            elif name == DCGM_ACTIVE:
                active[(gpu, key)] = _value(sample) * 100.0
            else:
                memory[(gpu, key)] = int(_value(sample))
    dcgm: dict[str, _Device] = {}
    for gpu, key in sorted(set(util) | set(active) | set(memory)):
        device = dcgm.setdefault(gpu, _Device())
        first, second = (active, util) if gpu in mig else (util, active)
        level = first.get((gpu, key), second.get((gpu, key)))
        if level is not None:
            device.utilization[key] = level
        if (gpu, key) in memory:
            device.memory_mib[key] = memory[(gpu, key)]

    readings = [_reading(uuid, device, None) for uuid, device in sorted(hami.items())]
    for uuid, device in sorted(dcgm.items()):
        sharing = len(pods_on.get(uuid, ()))
        shared = (
            f"the DCGM exporter gives each of the {sharing} pods on this time-shared GPU the "
            "GPU's numbers"
            if sharing > 1
            else None
        )
        readings.append(_reading(uuid, device, shared))
    return readings


def _reading(uuid: str, device: _Device, shared: str | None) -> DeviceReading:
    keys = sorted(set(device.utilization) | set(device.memory_mib))
    processes = tuple(
        ProcessReading(
            None,
            device.utilization.get(key),
            device.memory_mib.get(key),
            holder=key,
            device_wide=shared,
        )
        for key in keys
    )
    return DeviceReading(
        uuid=uuid,
        index=-1,
        utilization_pct=max(device.utilization.values(), default=0.0),
        memory_used_mib=sum(device.memory_mib.values()),
        memory_total_mib=0,
        temperature_c=0.0,
        processes=processes,
    )


class PrometheusTelemetry:
    """Per-pod readings from the Prometheus at ``url`` (see the module docstring).

    An unreachable Prometheus, or one that refuses a query, gives no readings (logged once
    per change of the problem): with no readings nobody is reclaimed for idleness.
    """

    def __init__(self, url: str, *, timeout: float = QUERY_TIMEOUT):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._last_error: str | None = None
        self._told: set[tuple[str, str]] = set()

    def read(self) -> list[DeviceReading]:
        try:
            series = {name: self.query(name) for name in (*SERIES, ALLOCATION_INFO)}
        except (OSError, ValueError, KeyError) as error:
            problem = str(error)
            if problem != self._last_error:
                self._last_error = problem
                log.error(
                    "Cannot read GPU use per pod from Prometheus at %s (%s); no server is "
                    "reclaimed for idleness until it answers. Check the address, and that "
                    "Prometheus scrapes the hub, the DCGM exporter and HAMi's monitor.",
                    self.url,
                    problem,
                )
            return []
        self._last_error = None
        if not series[ALLOCATION_INFO]:
            log.debug("Prometheus has no %s: it does not scrape the hub yet", ALLOCATION_INFO)
        readings = readings_from_series(series)
        for reading in readings:
            for process in reading.processes or ():
                told = (reading.uuid, process.device_wide or "")
                if process.device_wide and told not in self._told:
                    if len(self._told) >= 256:  # GPUs come and go: keep the log bounded
                        self._told.clear()
                    self._told.add(told)
                    log.warning(
                        "GPU use on %s is counted device-wide, not per server or job: %s.",
                        reading.uuid,
                        process.device_wide,
                    )
        return readings

    def query(self, expr: str) -> list[Sample]:
        """The instant vector of ``expr`` (``/api/v1/query``); raises OSError when
        Prometheus cannot be reached, ValueError when it refuses the query."""
        address = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        try:
            with urllib.request.urlopen(address, timeout=self.timeout) as response:
                body = json.load(response)
        except urllib.error.HTTPError as error:
            raise ValueError(f"Prometheus answered {error.code} to {expr}") from None
        if body.get("status") != "success" or body["data"]["resultType"] != "vector":
            raise ValueError(f"Prometheus gave no instant vector for {expr}: {body}")
        result: list[Sample] = body["data"]["result"]
        return result
