"""Scenario: a real Prometheus scrapes a real JupyterHub (SimpleLocalGPUSpawner, one
simulated GPU with simulated readings) and its job service, with a token holding
``read:metrics``; after a student's GPU server starts and a job runs, Prometheus' HTTP API
returns the allocation, telemetry and job metrics, and the shipped recording rules.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import requests

from gpuspawner.core.telemetry import DeviceReading, write_readings
from jupyter_to_job.hub import job_server_token_scopes

from ..support.course_catalogs import catalog, course, minute, now, spawner_config, write_catalog
from ..support.hubprocess import BrowserlessUser, RunningHub, free_loopback_ports
from ..support.job_hub import JobHub, JobService, wait_for_service
from ..support.notebooks import notebook_json
from ..support.prometheus import (
    MISSING_REASON,
    PROMETHEUS,
    RunningPrometheus,
    scrape_job,
)

pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason=MISSING_REASON)

ONE_GPU = '[{"model": "RTX 4090", "memory": "24GiB"}]'
FLAVORS = """\
flavors:
  - id: course-gpu
    title: Course GPU
    gpu: {fraction: 1/4, memory: 4GiB}
    access: {courses: [ml101]}
"""


def hub_config(catalog_dir: Path, readings: Path, jobs_root: Path, port: int, token: str) -> str:
    return spawner_config(
        catalog_dir,
        ONE_GPU,
        f"""
from jupyter_to_job.hub import (
    job_server_token_scopes, job_service, job_service_roles, job_service_url,
)
from jupyter_to_job.scopes import hub_custom_scopes
c.GPUAdmission.telemetry_path = {str(readings)!r}
c.JupyterHub.custom_scopes = hub_custom_scopes()
c.JupyterHub.services.append(job_service(
    port={port},
    catalog_path={str(catalog_dir)!r},
    root_dir={str(jobs_root)!r},
    gpu_inventory="simulated",
    simulated_gpus={ONE_GPU},
    args=["--LocalExecutor.poll_interval=0.1", "--JobManager.queue_poll_interval=0.2"],
))
c.JupyterHub.load_roles.extend(job_service_roles())
c.Spawner.server_token_scopes = job_server_token_scopes()
c.Spawner.environment.update({{"JUPYTER_TO_JOB_SERVICE_URL": job_service_url({port})}})
# Prometheus: a service whose token may read metrics, and nothing else.
c.JupyterHub.services.append({{"name": "prometheus", "api_token": {token!r}}})
c.JupyterHub.load_roles.append(
    {{"name": "metrics-reader", "scopes": ["read:metrics"], "services": ["prometheus"]}}
)
""",
    )


@pytest.fixture(scope="module")
def monitored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The hub, its job service and Prometheus scraping both, for the whole module."""
    work = tmp_path_factory.mktemp("monitored")
    start = minute(now()) - timedelta(minutes=30)
    catalog_dir = work / "catalog"
    write_catalog(
        catalog_dir,
        catalog(
            course(
                "ml101",
                start=start,
                end=start + timedelta(hours=2),
                students=["alice"],
                gpu="{fraction: 1/4, memory: 4GiB}",
            )
        )
        + FLAVORS,
    )
    readings = work / "gpu-readings.json"
    write_readings(readings, [DeviceReading("sim-0", 0, 12.0, 3072, 24576, 66.0)])
    (port,) = free_loopback_ports(1)
    token = secrets.token_hex(16)
    hub = RunningHub.start(
        hub_config(catalog_dir, readings, work / "jobs", port, token), work / "hub"
    )
    service_root = f"http://127.0.0.1:{port}/services/jupyter-to-job/"
    prometheus = None
    try:
        wait_for_service(service_root + "api/")
        prometheus = RunningPrometheus(
            work / "prometheus",
            [
                scrape_job("hub", hub.url.rstrip("/") + "/hub/metrics", token),
                scrape_job("jobs", service_root + "metrics", token),
            ],
        )
        yield {"hub": hub, "prometheus": prometheus, "service": service_root, "token": token}
    finally:
        if prometheus is not None:
            prometheus.stop()
        hub.stop()


def value(result: list[dict]) -> float:
    assert len(result) == 1, result
    return float(result[0]["value"][1])


def test_prometheus_sees_the_students_gpu_slice_and_its_gpu(monitored):
    hub, prometheus = monitored["hub"], monitored["prometheus"]
    # Given both targets scraped with the read:metrics token
    prometheus.wait_for('up{job="hub"} == 1')
    prometheus.wait_for('up{job="jobs"} == 1')

    # When alice starts her ML101 server with a quarter of the GPU
    alice = BrowserlessUser(hub, "alice")
    hub.api("POST", "/users/alice")
    response = alice.spawn_via_api({"profile": "ml101"})
    assert response.status_code in (201, 202), response.text
    alice.wait_ready()

    # Then Prometheus has her allocation, by course, profile and kind
    allocations = prometheus.wait_for(
        'gpuspawner_allocations{job="hub", course="ml101", kind="server"}'
    )
    assert value(allocations) == 1
    assert allocations[0]["metric"]["backend"] == "local"
    assert value(prometheus.query('gpuspawner_gpu_allocated_fraction{job="hub"}')) == 0.25
    assert (
        value(prometheus.wait_for('gpuspawner_admissions_total{kind="server", profile="ml101"}'))
        >= 1
    )
    # And the GPU's readings, and her slice's view of them with her name and course
    assert value(prometheus.query('gpuspawner_gpu_temperature_celsius{job="hub"}')) == 66
    assert value(prometheus.query('gpuspawner_gpu_memory_used_bytes{job="hub"}')) == 3072 * 2**20
    mine = prometheus.query('gpuspawner_slice_utilization_percent{user="alice"}')
    assert value(mine) == 12
    assert mine[0]["metric"]["course"] == "ml101"
    # (the readings file gives no per-process numbers: her GPU's, said to be the device's)
    assert mine[0]["metric"]["measured"] == "device"
    # And the shipped recording rule carries it on
    assert value(prometheus.wait_for('gpuspawner:slice_utilization_percent{user="alice"}')) == 12
    assert value(prometheus.wait_for("gpuspawner_server_start_duration_seconds_count")) >= 1


def test_prometheus_sees_a_submitted_job(monitored):
    hub, prometheus = monitored["hub"], monitored["prometheus"]
    # Given alice's token, as her server holds it
    setup = JobHub(hub, monitored["service"] + "api/", Path("."))
    jobs = JobService(setup.service_url, setup.token("alice", job_server_token_scopes()))

    # When she runs a notebook as a job on the course's GPU flavor
    created = jobs.create(notebook_json("print('trained')"), flavor="course-gpu")
    assert created.status_code == 201, created.text
    job = jobs.wait_for(created.json()["job_id"], "COMPLETED", "FAILED")
    assert job["status"] == "COMPLETED", job

    # Then Prometheus has the job by state and flavor, its run time and its admission
    done = prometheus.wait_for(
        'jupyter_to_job_jobs{state="COMPLETED", flavor="course-gpu"}',
        lambda result: bool(result) and value(result) == 1,
    )
    assert done[0]["metric"]["job"] == "jobs"
    assert value(prometheus.query('jupyter_to_job_run_seconds_count{flavor="course-gpu"}')) == 1
    assert value(prometheus.query("jupyter_to_job_queue_wait_seconds_count")) == 1
    assert value(prometheus.query('jupyter_to_job_log_bytes{flavor="course-gpu"}')) > 0
    assert value(prometheus.query("jupyter_to_job_oldest_queued_seconds")) == 0
    admitted = 'gpuspawner_admissions_total{job="jobs", kind="job", profile="course-gpu"}'
    assert value(prometheus.query(admitted)) == 1


def test_the_metrics_need_the_read_metrics_scope(monitored):
    hub, service = monitored["hub"], monitored["service"]
    setup = JobHub(hub, service + "api/", Path("."))
    student = setup.token("alice", job_server_token_scopes())

    # The job service: no token, a token without read:metrics, the Prometheus token
    anonymous = requests.get(service + "metrics", timeout=30)
    assert anonymous.status_code == 401
    assert anonymous.json()["reason"] == "unauthenticated"
    forbidden = requests.get(
        service + "metrics", headers={"Authorization": f"token {student}"}, timeout=30
    )
    assert forbidden.status_code == 403
    assert "read:metrics" in forbidden.json()["message"]
    allowed = requests.get(
        service + "metrics",
        headers={"Authorization": f"Bearer {monitored['token']}"},
        timeout=30,
    )
    assert allowed.status_code == 200
    assert "jupyter_to_job_jobs" in allowed.text

    # The hub, as JupyterHub itself protects it
    assert requests.get(hub.url.rstrip("/") + "/hub/metrics", timeout=30).status_code == 403
