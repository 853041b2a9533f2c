"""Prometheus metrics of the GPU hub: who holds which slice, what each GPU is doing, and
how admission answers.

Design notes: docs/design/hub.md, "gpuspawner.metrics".
"""

from __future__ import annotations

import functools
import logging
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from .core.ledger import AllocationLedger, ProcessHolder
from .core.telemetry import DeviceReading, holders_of
from .holder_use import use_by_holder
from .policy import CapacityPool, Catalog, Refusal
from .policy.admission import WAIT_CODES
from .policy.catalog_models import Course, ProfileSection
from .process_owners import ProcessOwners, attribute

ADMISSIONS = Counter(
    "gpuspawner_admissions",
    "Servers and jobs admitted (a GPU share or none), by kind, profile or flavor, course.",
    ["kind", "profile", "course"],
)
REFUSALS = Counter(
    "gpuspawner_refusals",
    "Starts refused by the admission, by kind and reason (the refusal's code: full, "
    "closed, not-entitled, user-limit, course-full, reserved...).",
    ["kind", "reason"],
)
SERVER_START = Histogram(
    "gpuspawner_server_start_duration_seconds",
    "Seconds from the admission's decision to the GPU server answering, by profile, course.",
    ["profile", "course"],
    buckets=(1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, float("inf")),
)

F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger(__name__)


def counted_admission(kind: str) -> Callable[[F], F]:
    """Count each call of a ``grant_*`` method: admitted (by the Grant's subject and course)
    or refused (by the Refusal's code; a job's "wait" answers are not counted, its time in
    the queue is). The subject of a refusal is not a label: a refused
    request may name any flavor or profile, granted ones come from the catalog."""

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def counted(*args: Any, **kwargs: Any) -> Any:
            try:
                grant = method(*args, **kwargs)
            except Refusal as refusal:
                # A job told to wait stays queued and is asked again: not a refusal.
                if not (kind == "job" and refusal.code in WAIT_CODES):
                    REFUSALS.labels(kind, refusal.code).inc()
                raise
            ADMISSIONS.labels(kind, grant.subject, grant.course_id or "").inc()
            return grant

        return counted  # type: ignore[return-value]

    return decorate


def observe_server_start(profile: str, course: str | None, decided_at: float) -> None:
    """Record a GPU server start that was decided at ``decided_at`` (``time.monotonic()``)."""
    SERVER_START.labels(profile, course or "").observe(max(time.monotonic() - decided_at, 0.0))


@dataclass
class PoolView:
    """What the collector reads at scrape time, from the hub's spawners."""

    pool: CapacityPool
    backend: str
    """The sharing back end on Kubernetes (``hami``, ``mig``...), ``local`` on one machine."""
    readings: list[DeviceReading] = field(default_factory=list)
    catalog: Catalog | None = None
    pods: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Allocation key -> (namespace, pod), on Kubernetes."""
    node_pods: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    """(allocation key, node) -> (namespace, pod): a job on several nodes has a pod on each
    (device ids are ``<node>/<index>``); where absent, ``pods`` names the holder's pod."""
    queue_length: int | None = None
    """Servers waiting in the Kueue queue; None when the hub does not queue."""


MIB = 1024 * 1024


def _fraction(value: Any) -> str:
    return f"{value.numerator}/{value.denominator}"


def pool_metrics(view: PoolView) -> list[GaugeMetricFamily]:
    """The gauges of one scrape (pure: the view in, metric families out)."""
    pool = view.pool
    names = {device.id: device.label for device in pool.devices}
    allocations = GaugeMetricFamily(
        "gpuspawner_allocations",
        "GPU shares held now, by GPU, course, profile, kind (server or job), sharing back end.",
        labels=["gpu", "course", "profile", "kind", "backend"],
    )
    counts: dict[tuple[str, ...], int] = {}
    info = GaugeMetricFamily(
        "gpuspawner_allocation_info",
        "One per slice held now: its GPU, holder and share (1). On Kubernetes namespace and "
        "pod join the DCGM exporter's series to the holder.",
        labels=[
            "gpu",
            "user",
            "course",
            "profile",
            "kind",
            "name",
            "fraction",
            "namespace",
            "pod",
        ],
    )
    for allocation in sorted(pool.allocations.values(), key=lambda a: a.key):
        kind = "job" if allocation.key.startswith("job:") else "server"
        name = allocation.key.split(":", 1)[1]
        if kind == "server":
            name = name.split("/", 1)[1] if "/" in name else ""
        holder = view.pods.get(allocation.key, ("", ""))
        for device_id in allocation.device_ids:
            node = device_id.rsplit("/", 1)[0]
            namespace, pod = view.node_pods.get((allocation.key, node), holder)
            gpu = names.get(device_id, device_id)
            key = (gpu, allocation.course_id or "", allocation.profile_id, kind, view.backend)
            counts[key] = counts.get(key, 0) + 1
            info.add_metric(
                [
                    gpu,
                    allocation.owner,
                    allocation.course_id or "",
                    allocation.profile_id,
                    kind,
                    name,
                    _fraction(allocation.fraction),
                    namespace,
                    pod,
                ],
                1,
            )
    for labels, count in sorted(counts.items()):
        allocations.add_metric(list(labels), count)

    allocated = GaugeMetricFamily(
        "gpuspawner_gpu_allocated_fraction",
        "The part of each GPU held by servers and jobs (0 to 1).",
        labels=["gpu", "model"],
    )
    holders = GaugeMetricFamily(
        "gpuspawner_gpu_holders",
        "How many servers and jobs hold a slice of each GPU.",
        labels=["gpu", "model"],
    )
    for usage in pool.usage().values():
        device = [usage.device.label, usage.device.model]
        allocated.add_metric(device, float(usage.fraction))
        holders.add_metric(device, len(usage.holders))
    families = [allocations, info, allocated, holders]
    families.extend(_telemetry_metrics(view, names))

    limits = GaugeMetricFamily(
        "gpuspawner_profile_idle_limit_seconds",
        "How long a server of a profile may leave its GPU share idle before it is "
        "reclaimed (the catalog's reclaim.idle_after); profiles without a limit are absent.",
        labels=["profile", "course"],
    )
    catalog = view.catalog
    sections: list[ProfileSection] = (
        [*catalog.courses, *catalog.research, *catalog.standing] if catalog else []
    )
    for section in sections:
        idle_after = section.reclaim.idle_after
        if idle_after is not None:
            course = section.id if isinstance(section, Course) else ""
            limits.add_metric([section.id, course], idle_after.total_seconds())
    families.append(limits)

    if view.queue_length is not None:
        queue = GaugeMetricFamily(
            "gpuspawner_server_queue_length",
            "GPU servers waiting in the Kueue queue for a slice.",
        )
        queue.add_metric([], view.queue_length)
        families.append(queue)
    return families


def _telemetry_metrics(view: PoolView, names: dict[str, str]) -> list[GaugeMetricFamily]:
    """Per-GPU readings, and each slice's own use of its GPU (or the GPU's, said so)."""
    if not view.readings:
        return []
    by_index = {device.index: device for device in view.pool.devices}
    ids = {device.id for device in view.pool.devices}

    def label(reading: DeviceReading) -> str:
        if reading.uuid in ids:
            return names[reading.uuid]
        device = by_index.get(reading.index)
        return device.label if device else reading.uuid

    utilisation = GaugeMetricFamily(
        "gpuspawner_gpu_utilization_percent",
        "GPU utilisation in percent (NVML, or the simulated readings file).",
        labels=["gpu"],
    )
    used = GaugeMetricFamily(
        "gpuspawner_gpu_memory_used_bytes", "GPU memory in use.", labels=["gpu"]
    )
    total = GaugeMetricFamily("gpuspawner_gpu_memory_total_bytes", "GPU memory.", labels=["gpu"])
    temperature = GaugeMetricFamily(
        "gpuspawner_gpu_temperature_celsius", "GPU temperature.", labels=["gpu"]
    )
    for reading in view.readings:
        gpu = [label(reading)]
        utilisation.add_metric(gpu, reading.utilization_pct)
        used.add_metric(gpu, reading.memory_used_mib * MIB)
        total.add_metric(gpu, reading.memory_total_mib * MIB)
        temperature.add_metric(gpu, reading.temperature_c)
    slice_labels = ["gpu", "user", "course", "profile", "kind", "name", "measured"]
    slices = GaugeMetricFamily(
        "gpuspawner_slice_utilization_percent",
        "For each slice held now, its holder's SM utilisation of the GPU it is on: its own "
        "processes' (measured=\"holder\"), or the whole GPU's where they cannot be told apart "
        '(measured="device": no per-process readings, or a process of no known holder).',
        labels=slice_labels,
    )
    slice_memory = GaugeMetricFamily(
        "gpuspawner_slice_memory_used_bytes",
        "For each slice held now, the GPU memory its holder's processes hold on the GPU it is "
        'on (measured="holder"), or the whole GPU\'s (measured="device"); absent where the '
        "driver does not say.",
        labels=slice_labels,
    )
    for reading in view.readings:
        holders = {h.key: h for h in holders_of([reading], view.pool)[reading.uuid]}
        for key, use in use_by_holder([reading], view.pool).items():
            holder = holders.get(key)
            if holder is None:
                continue
            labels = [
                label(reading),
                holder.user,
                holder.course_id or "",
                holder.profile_id,
                holder.kind,
                holder.name,
                use.measured,
            ]
            if use.utilization_pct is not None:
                slices.add_metric(labels, use.utilization_pct)
            if use.memory_used_mib is not None:
                slice_memory.add_metric(labels, use.memory_used_mib * MIB)
    return [utilisation, used, total, temperature, slices, slice_memory]


class GPUPoolCollector(Collector):
    """Reads the hub's pool and telemetry at each scrape, through the spawners it watches.

    Every spawner of the hub sees the same pool (one machine: the ledger or the process's
    pool; Kubernetes: the cluster inventory), so any live one will do; spawners are held
    weakly and forgotten when JupyterHub drops them.
    """

    def __init__(self) -> None:
        self._spawners: weakref.WeakSet[Any] = weakref.WeakSet()

    def watch(self, spawner: Any) -> None:
        self._spawners.add(spawner)

    def describe(self) -> list:
        return []  # collected at scrape time only; nothing to check at registration

    def collect(self) -> Iterator[GaugeMetricFamily]:
        spawners = list(self._spawners)
        if not spawners:
            return
        try:
            families = pool_metrics(view_of_spawners(spawners))
        except Exception:  # a scrape must answer; JupyterHub's own metrics still matter
            log.exception("Reading the GPU pool for the metrics failed")
            return
        yield from families


def view_of_spawners(spawners: list[Any]) -> PoolView:
    """The pool view the hub's spawners give (duck-typed: CourseProfilesMixin spawners)."""
    first = spawners[0]
    admission = first.admission
    kubernetes = admission.target == "kubernetes"
    if kubernetes:
        backend = admission.sharing_backend
    else:
        backend = "hami-core" if admission.hami_core_library else "local"
    # Kubernetes: the pods of every slice, servers' and jobs', from the pods' records.
    pods: dict[str, tuple[str, str]] = dict(getattr(first, "allocation_pods", dict)())
    queue_length = None
    for spawner in spawners:
        allocation = getattr(spawner, "_allocation", None)
        pod = getattr(spawner, "pod_name", None)
        if allocation is not None and pod:
            pods[allocation.key] = (str(getattr(spawner, "namespace", "")), str(pod))
        if kubernetes and getattr(spawner, "queueing", False):
            place = spawner.queue_place()
            queue_length = max(queue_length or 0, place[1] if place else 0)
    readings = [] if kubernetes else admission.device_telemetry().read()
    if any(p.pid is not None for r in readings for p in r.processes or ()):
        readings = attribute(readings, _process_owners(admission, spawners))
    return PoolView(
        pool=first.capacity_pool,
        backend=backend,
        readings=readings,
        catalog=admission.catalog_in_force(),
        pods=pods,
        node_pods=dict(getattr(first, "allocation_node_pods", dict)()),
        queue_length=queue_length,
    )


def _process_owners(admission: Any, spawners: list[Any]) -> ProcessOwners:
    """Who holds each slice's process on this machine: the allocation ledger's holders, or
    without a ledger, the hub's own servers' processes."""
    simulated = bool(admission.telemetry_path)  # simulated processes hold no GPU device
    if admission.allocation_ledger:
        holders = AllocationLedger(admission.allocation_ledger).holders()
        return ProcessOwners(holders, gpu_files=not simulated)
    found: dict[str, ProcessHolder | None] = {}
    for spawner in spawners:
        allocation, pid = getattr(spawner, "_allocation", None), getattr(spawner, "pid", 0)
        if allocation is not None and pid:
            found[allocation.key] = ProcessHolder.of_pid(pid)
    return ProcessOwners(found, gpu_files=not simulated)


_collector: GPUPoolCollector | None = None


def watch_spawner(spawner: Any) -> None:
    """Let the hub's metrics read the pool through ``spawner`` (registers the collector in
    prometheus_client's default registry once per process)."""
    global _collector
    if _collector is None:
        _collector = GPUPoolCollector()
        REGISTRY.register(_collector)
    _collector.watch(spawner)
