"""Scenario: research jobs queue behind a class's reserved seats on the cluster's one GPU pool.

The job service's capacity hook (``FlavorAdmission``) rebuilds its pool from the cluster's
node labels and pods, as it does with the Kubernetes executor; the jobs run as Kubernetes
Jobs on the test cluster, their pods as real processes.
"""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nbformat
from traitlets.config import Config

from gpuspawner.core.admission import GPUAdmission
from gpuspawner.policy import load_catalog
from jupyter_to_job.executors.kubernetes import KubernetesExecutor
from jupyter_to_job.models import CreateJob, JobStatus
from jupyter_to_job.service.app import JobServiceApp
from jupyter_to_job.service.flavor_admission import FlavorAdmission, IdentityBook
from tests.support import eventually
from tests.support.course_catalogs import window
from tests.support.job_managers import ManagerFactory, finished
from tests.support.notebooks import notebook, wait_for_file

NOW = datetime.now(UTC).replace(second=0, microsecond=0)
CLASS_END = NOW + timedelta(minutes=120)
RESEARCHERS = ["rhea", "ravi", "rosa", "ruth"]


def write_catalog(path: Path) -> Path:
    """ML101 reserves 8 quarter-GPU seats (2 of the node's 4 GPUs); a whole-GPU flavor."""
    start = NOW - timedelta(minutes=10)
    path.write_text(
        textwrap.dedent(
            f"""\
            courses:
              - id: ml101
                title: ML101
                instructors: [teacher]
                enrolment: {{users: [s0, s1, s2, s3, s4, s5, s6, s7]}}
                gpu: {{fraction: 1/4}}
                max_gpu_servers: 8
                reserved_seats: 8
                schedule:
                  timezone: UTC
                  term: {{first_day: {(NOW - timedelta(days=1)).date()}, last_day: {(NOW + timedelta(days=30)).date()}}}
                  windows:
                    - {window(start, CLASS_END)}
            flavors:
              - id: a100
                title: Whole GPU
                gpu: {{count: 1}}
                access: {{users: [{", ".join(RESEARCHERS)}]}}
            """
        )
    )
    return path


async def test_research_jobs_wait_with_positions_behind_reserved_seats_and_start_as_class_ends(
    job_pods: Any,
    make_k8s_manager: ManagerFactory,
    job_service_kubeconfig: Path,
    tmp_path: Path,
) -> None:
    # Given a node with 4 GPUs, ML101 open with 2 GPUs' worth of reserved seats, and the
    # job service's pool read from the cluster
    manager = await make_k8s_manager(flavors={"a100": {"gpu": {"count": 1}}})
    catalog = load_catalog(write_catalog(tmp_path / "catalog.yaml"))
    config = Config()
    config.KubernetesExecutor.kubeconfig = str(job_service_kubeconfig)
    config.KubernetesExecutor.namespace = "default"
    clock = {"now": NOW}
    capacity = FlavorAdmission(
        admission=GPUAdmission(fallback_catalog=catalog, target="kubernetes"),
        devices=[],
        identities=IdentityBook(tmp_path / "identities.json"),
        cluster=KubernetesExecutor.cluster_pool_reader(config),
        clock=lambda: clock["now"],
    )
    await capacity.refresh_from_cluster()
    manager.capacity = capacity
    manager.max_running_jobs = 10  # only GPUs limit these jobs

    # When four researchers each submit a whole-GPU job that waits for a gate
    gate = tmp_path / "gate"
    nb = nbformat.writes(notebook("print('on the GPU')\n" + wait_for_file(gate)))
    request = CreateJob(input_path="train.ipynb", output_formats=["ipynb"], flavor="a100")
    jobs = [(await manager.create(who, request, notebook=nb)).job_id for who in RESEARCHERS]
    await manager.dispatch()

    # Then two run, and two wait in order with the class's reservation as the reason
    statuses = [manager.describe(job_id).status for job_id in jobs]
    assert statuses.count(JobStatus.RUNNING) == 2, statuses
    waiting = [manager.describe(job_id) for job_id in jobs if job_id not in jobs[:2]]
    assert [job.status for job in waiting] == [JobStatus.QUEUED, JobStatus.QUEUED]
    assert [job.queue_position for job in waiting] == [1, 2]
    assert "ML101" in (waiting[0].status_message or ""), waiting[0].status_message

    # When the class ends (its reservation lapses) and the pool is read again
    clock["now"] = CLASS_END + timedelta(minutes=1)
    await capacity.refresh_from_cluster()
    await manager.dispatch()

    # Then the waiting jobs start on the GPUs the class held, and all four complete
    await eventually(
        lambda: all(manager.describe(j).status is not JobStatus.QUEUED for j in jobs),
        what="the queued jobs to start",
    )
    gate.touch()
    for job_id in jobs:
        job = await finished(manager, job_id)
        assert job.status is JobStatus.COMPLETED, job.status_message


async def test_the_job_service_on_kubernetes_takes_its_gpus_from_the_clusters_nodes(
    k8s_controls: Any, job_service_kubeconfig: Path, tmp_path: Path
) -> None:
    # Given a cluster with two GPU nodes of two GPUs each
    k8s_controls.add_gpu_nodes(2, gpu_count=2)
    # When the job service is configured with the Kubernetes executor (and, wrongly, a ledger)
    app = JobServiceApp()
    app.initialize(
        [
            f"--JobServiceApp.root_dir={tmp_path / 'service'}",
            "--JobServiceApp.executor_class=jupyter_to_job.executors.kubernetes.KubernetesExecutor",
            f"--GPUAdmission.allocation_ledger={tmp_path / 'ledger.json'}",
            f"--KubernetesExecutor.kubeconfig={job_service_kubeconfig}",
            "--KubernetesExecutor.namespace=default",
        ]
    )
    _, manager, _ = app.make_api()
    capacity = manager.capacity
    assert isinstance(capacity, FlavorAdmission)
    await capacity.refresh_from_cluster()
    # Then its GPUs are the nodes' GPUs, its pool the cluster's, and no local ledger is used
    assert capacity.cluster is not None and capacity.ledger_path is None
    assert [device.id.rsplit("/", 1)[1] for device in capacity.devices] == ["0", "1", "0", "1"]
    assert len({device.id.rsplit("/", 1)[0] for device in capacity.devices}) == 2
