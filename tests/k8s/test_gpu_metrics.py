"""Scenario: on Kubernetes the hub's metrics name the pod of every slice, a job's as well
as a server's, so Prometheus can join the DCGM exporter's per-pod GPU readings to the user,
course and job holding them (hub_config/monitoring/rules)."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path

import pytest
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from gpuspawner.core.allocation_record import ALLOCATION_ANNOTATION, encode_allocation
from gpuspawner.metrics import pool_metrics, view_of_spawners
from gpuspawner.policy import Allocation
from gpuspawner.spawners.kubernetes import GPUSpawner
from tests.support.course_catalogs import window
from tests.support.k8s_spawners import make_gpu_spawner

pytestmark = pytest.mark.usefixtures("kubespawner_env")

NOW = datetime.now(UTC).replace(second=0, microsecond=0)


def write_catalog(path: Path) -> Path:
    start, end = NOW - timedelta(minutes=10), NOW + timedelta(minutes=90)
    path.write_text(
        textwrap.dedent(
            f"""\
            courses:
              - id: ml101
                title: ML101
                instructors: [teacher]
                enrolment: {{users: [ana]}}
                gpu: {{fraction: 1/4}}
                schedule:
                  timezone: UTC
                  term: {{first_day: {(NOW - timedelta(days=1)).date()}, last_day: {(NOW + timedelta(days=30)).date()}}}
                  windows:
                    - {window(start, end)}
            """
        )
    )
    return path


class Scrape(Collector):
    def __init__(self, spawners):
        self.spawners = spawners

    def collect(self):
        yield from pool_metrics(view_of_spawners(self.spawners))


@pytest.fixture(autouse=True)
def fresh_inventory():
    GPUSpawner._inventories.clear()
    yield
    GPUSpawner._inventories.clear()


async def test_the_allocation_info_names_each_slices_pod(k8s_controls, k8s_api, tmp_path):
    # Given one GPU node and a research job's pod recording its whole-GPU slice
    k8s_controls.add_gpu_nodes(2, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})
    core = client.CoreV1Api(k8s_api)
    spawner = make_gpu_spawner(
        "ana", write_catalog(tmp_path / "catalog.yaml"), job_slices_refresh_seconds=0
    )
    await spawner.ensure_inventory()
    device = spawner.capacity_pool.devices[1].id
    job = Allocation("job:j-7", "rhea", "a100", None, (device,), Fraction(1), 0, 0)
    await core.create_namespaced_pod(
        "default",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "jupyter-to-job-j-7-abcde",
                "labels": {"component": "jupyter-to-job"},
                "annotations": {ALLOCATION_ANNOTATION: encode_allocation(job)},
            },
            "spec": {"containers": [{"name": "job", "image": "python:3.12"}]},
        },
    )

    # When ana's ML101 server starts beside it
    await spawner.start()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Scrape([spawner]))

    # Then the scrape names the pod, user, course and kind of both slices
    def info(user: str) -> dict[str, str]:
        (sample,) = [
            s
            for m in registry.collect()
            for s in m.samples
            if s.name == "gpuspawner_allocation_info" and s.labels["user"] == user
        ]
        return sample.labels

    try:
        assert info("ana")["pod"] == spawner.pod_name
        assert (info("ana")["namespace"], info("ana")["course"]) == ("default", "ml101")
        assert info("ana")["kind"] == "server"
        assert info("rhea")["pod"] == "jupyter-to-job-j-7-abcde"
        assert (info("rhea")["kind"], info("rhea")["name"]) == ("job", "j-7")
        backends = {
            s.labels["backend"]
            for m in registry.collect()
            for s in m.samples
            if s.name == "gpuspawner_allocations"
        }
        assert backends == {"time-slicing"}
    finally:
        await spawner.stop()
