"""Prometheus metrics of the job service, read from its job store at each scrape.

Design notes: docs/design/jobs.md, "jupyter_to_job.metrics".
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from .logs import LogStore
from .models import JobStatus
from .store import JobRow, JobStore, utcnow

METRICS_SCOPE = "read:metrics"
"""JupyterHub's scope for reading metrics; the service asks the same of its callers."""

WAIT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400)
RUN_BUCKETS = (10, 30, 60, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400)


def _histogram(
    name: str,
    documentation: str,
    labels: list[str],
    values: dict[tuple[str, ...], list[float]],
    buckets: tuple[float, ...],
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, documentation, labels=labels)
    for key, observed in sorted(values.items()):
        counts = [sum(1 for value in observed if value <= bound) for bound in buckets]
        family.add_metric(
            list(key),
            [(str(float(bound)), count) for bound, count in zip(buckets, counts, strict=True)]
            + [("+Inf", len(observed))],
            sum(observed),
        )
    return family


def _seconds(later: datetime | None, earlier: datetime | None) -> float | None:
    if later is None or earlier is None:
        return None
    return max((later - earlier).total_seconds(), 0.0)


def job_metrics(
    rows: list[JobRow], log_sizes: dict[str, int], now: datetime
) -> list[GaugeMetricFamily | HistogramMetricFamily]:
    """The metric families of the jobs in ``rows`` (pure: rows and log sizes in)."""
    jobs = GaugeMetricFamily(
        "jupyter_to_job_jobs", "Jobs in the store, by state and flavor.", labels=["state", "flavor"]
    )
    counts: dict[tuple[str, str], int] = {}
    waits: dict[tuple[str, ...], list[float]] = {}
    runs: dict[tuple[str, ...], list[float]] = {}
    log_bytes: dict[str, int] = {}
    oldest: float = 0.0
    for row in rows:
        flavor = row.flavor or ""
        counts[row.status, flavor] = counts.get((row.status, flavor), 0) + 1
        wait = _seconds(row.start_time, row.queue_time)
        if wait is not None:
            waits.setdefault((flavor,), []).append(wait)
        status = row.job_status
        run = _seconds(row.end_time, row.start_time)
        if run is not None and status.is_final:
            runs.setdefault((flavor, row.status), []).append(run)
        if status is JobStatus.QUEUED:
            oldest = max(oldest, _seconds(now, row.queue_time or row.create_time) or 0.0)
        log_bytes[flavor] = log_bytes.get(flavor, 0) + log_sizes.get(row.job_id, 0)
    # Every state appears, so "no queued job" is a 0 and not a missing series.
    for status in JobStatus:
        if not any(key[0] == status.value for key in counts):
            counts[status.value, ""] = 0
    for (state, flavor), count in sorted(counts.items()):
        jobs.add_metric([state, flavor], count)
    queued = GaugeMetricFamily(
        "jupyter_to_job_oldest_queued_seconds",
        "How long the longest-waiting queued job has waited (0: nothing is queued).",
    )
    queued.add_metric([], oldest)
    logs = GaugeMetricFamily(
        "jupyter_to_job_log_bytes", "Bytes of job logs kept, by flavor.", labels=["flavor"]
    )
    for flavor, size in sorted(log_bytes.items()):
        logs.add_metric([flavor], size)
    return [
        jobs,
        queued,
        _histogram(
            "jupyter_to_job_queue_wait_seconds",
            "Seconds from queued to running, of the jobs in the store that started.",
            ["flavor"],
            waits,
            WAIT_BUCKETS,
        ),
        _histogram(
            "jupyter_to_job_run_seconds",
            "Run time in seconds of the jobs in the store that ended, by flavor and final state.",
            ["flavor", "state"],
            runs,
            RUN_BUCKETS,
        ),
        logs,
    ]


class JobStoreCollector(Collector):
    """Reads the job store (and the log sizes) at each scrape."""

    def __init__(self, store: JobStore, log_store: LogStore):
        self.store = store
        self.log_store = log_store

    def describe(self) -> list:
        return []

    def collect(self) -> Iterator[GaugeMetricFamily | HistogramMetricFamily]:
        rows = self.store.with_status(*JobStatus)
        sizes = {row.job_id: self.log_store.size(row.job_id) for row in rows}
        yield from job_metrics(rows, sizes, utcnow())


def service_registry(store: JobStore, log_store: LogStore) -> CollectorRegistry:
    """A registry holding the store's collector (one per service app, so tests may run
    several apps in one process)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobStoreCollector(store, log_store))
    return registry


def metrics_text(registry: CollectorRegistry) -> bytes:
    """The exposition text of the service: the process's metrics, then the jobs'."""
    return generate_latest(REGISTRY) + generate_latest(registry)
