"""Scenarios: what a Prometheus scrape of the hub and of the job service says about GPUs,
slices, admissions and jobs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.registry import Collector

from gpuspawner.core.allocation_record import (
    ALLOCATION_ANNOTATION,
    pods_by_allocation,
    pods_by_allocation_node,
)
from gpuspawner.core.telemetry import DeviceReading, ProcessReading
from gpuspawner.metrics import PoolView, counted_admission, pool_metrics
from gpuspawner.policy import CapacityPool, GPUDevice, GPUShare, Refusal, load_catalog
from jupyter_to_job.metrics import job_metrics
from jupyter_to_job.store import JobRow

GIB = 1024
NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


class Fixed(Collector):
    def __init__(self, families):
        self.families = families

    def collect(self):
        yield from self.families


def scrape(families) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed(families))
    return registry


def busy_pool() -> CapacityPool:
    pool = CapacityPool(
        [GPUDevice("sim-0", 0, "RTX 4090", 24 * GIB), GPUDevice("sim-1", 1, "RTX 4090", 24 * GIB)]
    )
    quarter = GPUShare(fraction=Fraction(1, 4))
    pool.allocate("server:ana/", owner="ana", profile_id="ml101", course_id="ml101", share=quarter)
    pool.allocate("server:ben/", owner="ben", profile_id="ml101", course_id="ml101", share=quarter)
    pool.allocate("job:j1", owner="cy", profile_id="batch", course_id=None, share=quarter)
    return pool


def test_a_scrape_shows_each_gpu_its_holders_and_their_view_of_its_utilisation():
    # Given three quarter slices on one GPU, the other GPU idle and hot
    pool = busy_pool()
    readings = [
        DeviceReading("sim-0", 0, 0.0, 2048, 24 * GIB, 55.0),
        DeviceReading("sim-1", 1, 3.0, 0, 24 * GIB, 74.0),
    ]
    registry = scrape(pool_metrics(PoolView(pool, "local", readings)))
    gpu0 = pool.devices[0].label

    # Then the allocations are counted by course, profile and kind
    value = registry.get_sample_value
    labels = {"gpu": gpu0, "course": "ml101", "profile": "ml101", "kind": "server"}
    assert value("gpuspawner_allocations", {**labels, "backend": "local"}) == 2
    assert value("gpuspawner_gpu_allocated_fraction", {"gpu": gpu0, "model": "RTX 4090"}) == 0.75
    assert value("gpuspawner_gpu_holders", {"gpu": pool.devices[1].label, "model": "RTX 4090"}) == 0
    # And each slice carries its GPU's utilisation with its holder's labels, said to be
    # the device's (these readings have no per-process numbers)
    assert (
        value(
            "gpuspawner_slice_utilization_percent",
            {
                "gpu": gpu0,
                "user": "cy",
                "course": "",
                "profile": "batch",
                "kind": "job",
                "name": "j1",
                "measured": "device",
            },
        )
        == 0.0
    )
    assert value("gpuspawner_gpu_temperature_celsius", {"gpu": pool.devices[1].label}) == 74.0
    assert value("gpuspawner_gpu_memory_used_bytes", {"gpu": gpu0}) == 2048 * 1024 * 1024
    info = {
        "gpu": gpu0,
        "user": "ana",
        "course": "ml101",
        "profile": "ml101",
        "kind": "server",
        "name": "",
        "fraction": "1/4",
        "namespace": "",
        "pod": "",
    }
    assert value("gpuspawner_allocation_info", info) == 1


def test_each_slice_reports_its_own_use_where_the_gpus_processes_are_attributed():
    # Given the shared GPU busy at 80 % because of ben's kernel alone, ana idle with 3 GiB
    # held, and cy's job holding nothing yet
    pool = busy_pool()
    processes = (
        ProcessReading(11, 0.0, 3 * GIB, holder="server:ana/"),
        ProcessReading(12, 80.0, 5 * GIB, holder="server:ben/"),
    )
    readings = [DeviceReading("sim-0", 0, 80.0, 8 * GIB, 24 * GIB, 60.0, processes)]
    registry = scrape(pool_metrics(PoolView(pool, "local", readings)))
    gpu0 = pool.devices[0].label

    def slice_value(metric: str, user: str, kind: str = "server", name: str = "") -> float | None:
        course = "" if kind == "job" else "ml101"
        profile = "batch" if kind == "job" else "ml101"
        labels = {
            "gpu": gpu0,
            "user": user,
            "course": course,
            "profile": profile,
            "kind": kind,
            "name": name,
            "measured": "holder",
        }
        return registry.get_sample_value(metric, labels)

    # Then each slice has its own utilisation and memory, measured for its holder
    assert slice_value("gpuspawner_slice_utilization_percent", "ana") == 0.0
    assert slice_value("gpuspawner_slice_utilization_percent", "ben") == 80.0
    assert slice_value("gpuspawner_slice_utilization_percent", "cy", "job", "j1") == 0.0
    assert slice_value("gpuspawner_slice_memory_used_bytes", "ana") == 3 * GIB * 1024 * 1024
    assert slice_value("gpuspawner_slice_memory_used_bytes", "cy", "job", "j1") == 0
    # while the GPU's own series still say how busy the whole card is
    assert registry.get_sample_value("gpuspawner_gpu_utilization_percent", {"gpu": gpu0}) == 80.0


def test_without_readings_there_are_no_device_series_but_allocations_still_show():
    registry = scrape(pool_metrics(PoolView(busy_pool(), "hami")))
    assert registry.get_sample_value("gpuspawner_gpu_utilization_percent", {"gpu": "x"}) is None
    samples = [
        s for m in registry.collect() for s in m.samples if s.name == "gpuspawner_allocations"
    ]
    assert {s.labels["backend"] for s in samples} == {"hami"}
    assert sum(s.value for s in samples) == 3


def test_admissions_and_refusals_are_counted_by_reason():
    # Given an admission method that grants once and refuses once
    class Granted:
        subject, course_id = "ml101", "ml101"

    answers = iter([Granted(), Refusal("closed", "The class is closed.")])

    @counted_admission("server")
    def grant(*_):
        answer = next(answers)
        if isinstance(answer, Refusal):
            raise answer
        return answer

    def counted(name, labels):
        return REGISTRY.get_sample_value(name, labels) or 0

    admitted = {"kind": "server", "profile": "ml101", "course": "ml101"}
    before = (
        counted("gpuspawner_admissions_total", admitted),
        counted("gpuspawner_refusals_total", {"kind": "server", "reason": "closed"}),
    )
    grant()
    with pytest.raises(Refusal):
        grant()
    after = (
        counted("gpuspawner_admissions_total", admitted),
        counted("gpuspawner_refusals_total", {"kind": "server", "reason": "closed"}),
    )
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)


def job(job_id, status, *, queued=None, started=None, ended=None, flavor="gpu"):
    return JobRow(
        job_id=job_id,
        owner="ana",
        name=job_id,
        flavor=flavor,
        status=status,
        input_path="a.ipynb",
        create_time=queued or NOW,
        queue_time=queued,
        start_time=started,
        end_time=ended,
    )


def test_jobs_by_state_waits_and_run_times():
    # Given a job that waited 2 minutes and ran 10, one running, one queued for 40 minutes
    rows = [
        job(
            "a",
            "COMPLETED",
            queued=NOW - timedelta(minutes=30),
            started=NOW - timedelta(minutes=28),
            ended=NOW - timedelta(minutes=18),
        ),
        job("b", "RUNNING", queued=NOW - timedelta(minutes=5), started=NOW - timedelta(minutes=5)),
        job("c", "QUEUED", queued=NOW - timedelta(minutes=40)),
    ]
    registry = scrape(job_metrics(rows, {"a": 1200, "b": 34}, NOW))
    value = registry.get_sample_value

    assert value("jupyter_to_job_jobs", {"state": "QUEUED", "flavor": "gpu"}) == 1
    assert value("jupyter_to_job_jobs", {"state": "FAILED", "flavor": ""}) == 0
    assert value("jupyter_to_job_oldest_queued_seconds") == 2400
    assert value("jupyter_to_job_queue_wait_seconds_count", {"flavor": "gpu"}) == 2
    assert value("jupyter_to_job_queue_wait_seconds_bucket", {"flavor": "gpu", "le": "60.0"}) == 1
    assert value("jupyter_to_job_queue_wait_seconds_sum", {"flavor": "gpu"}) == 120
    labels = {"flavor": "gpu", "state": "COMPLETED"}
    assert value("jupyter_to_job_run_seconds_sum", labels) == 600
    assert value("jupyter_to_job_run_seconds_bucket", {**labels, "le": "300.0"}) == 0
    assert value("jupyter_to_job_run_seconds_bucket", {**labels, "le": "600.0"}) == 1
    assert value("jupyter_to_job_log_bytes", {"flavor": "gpu"}) == 1234


def test_an_empty_queue_is_a_zero_not_a_missing_series():
    registry = scrape(job_metrics([], {}, NOW))
    assert registry.get_sample_value("jupyter_to_job_oldest_queued_seconds") == 0
    assert registry.get_sample_value("jupyter_to_job_jobs", {"state": "QUEUED", "flavor": ""}) == 0


def test_a_profiles_idle_limit_comes_from_its_catalog_reclaim_policy(tmp_path):
    # Given ML101 reclaiming after 20 idle minutes and a research allocation without a limit
    path = tmp_path / "catalog.yaml"
    path.write_text(
        """\
courses:
  - id: ml101
    title: ML101
    instructors: [ines]
    enrolment: {users: [ana]}
    gpu: {fraction: 1/4}
    reclaim: {idle_after: 20m}
    schedule:
      timezone: UTC
      term: {first_day: 2026-02-01, last_day: 2026-06-30}
      windows:
        - {day: Mon, start: "09:00", end: "11:00"}
research:
  - id: lab
    title: Vision lab
    users: [rhea]
    expires: 2099-12-31
"""
    )
    registry = scrape(pool_metrics(PoolView(busy_pool(), "local", catalog=load_catalog(path))))

    # Then the alert rule can compare ML101's idle slices with 1,200 seconds, and only those
    assert (
        registry.get_sample_value(
            "gpuspawner_profile_idle_limit_seconds", {"profile": "ml101", "course": "ml101"}
        )
        == 1200
    )
    limits = [
        s
        for m in registry.collect()
        for s in m.samples
        if s.name == "gpuspawner_profile_idle_limit_seconds"
    ]
    assert len(limits) == 1


def test_a_job_on_two_nodes_names_each_nodes_pod_beside_that_nodes_gpus():
    # Given a job holding a whole GPU on each of two nodes (device ids are <node>/<index>),
    # whose pods' records say which pod runs on which node
    pool = CapacityPool(
        [GPUDevice(f"gpu-node-{n}/0", n, "H100 80GB HBM3", 80 * GIB) for n in (0, 1)]
    )
    whole = GPUShare(fraction=Fraction(1))
    pool.allocate("job:j7", owner="cy", profile_id="train", course_id=None, share=whole, nodes=2)
    pods = [
        {
            "metadata": {
                "name": f"j2j-j7-{rank}",
                "namespace": "jobs",
                "annotations": {ALLOCATION_ANNOTATION: '{"key": "job:j7"}'},
            },
            "spec": {"nodeName": f"gpu-node-{rank}"},
            "status": {"phase": "Running"},
        }
        for rank in (1, 0)
    ]
    view = PoolView(
        pool,
        "hami",
        pods=pods_by_allocation(pods),
        node_pods=pods_by_allocation_node(pods),
    )

    # When Prometheus scrapes the hub
    registry = scrape(pool_metrics(view))

    # Then each GPU's allocation series names the pod on its own node, so the DCGM
    # exporter's per-pod readings join to the right GPU
    for rank in (0, 1):
        info = {
            "gpu": pool.devices[rank].label,
            "user": "cy",
            "course": "",
            "profile": "train",
            "kind": "job",
            "name": "j7",
            "fraction": "1/1",
            "namespace": "jobs",
            "pod": f"j2j-j7-{rank}",
        }
        assert registry.get_sample_value("gpuspawner_allocation_info", info) == 1
