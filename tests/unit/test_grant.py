"""One admission, one Grant: decided once, rendered for where it runs, applied as it is."""

from __future__ import annotations

import os
from datetime import timedelta
from fractions import Fraction
from pathlib import Path

import pytest

from gpuspawner.backends import make_backend
from gpuspawner.core.admission import GPUAdmission
from gpuspawner.core.grant import SHARE_HOOKS, Grant
from gpuspawner.policy import CapacityPool, GPUDevice, GPUShare, Refusal, UserIdentity
from jupyter_to_job.errors import JobRefused
from jupyter_to_job.executors.kubernetes import KubernetesExecutor
from jupyter_to_job.job_admission import JobTicket
from jupyter_to_job.service.app import JobServiceApp
from jupyter_to_job.service.flavor_admission import FlavorAdmission, IdentityBook

from ..support.course_catalogs import catalog, course, minute, now

NODE_GPU = GPUDevice("gpu-node-0/0", 0, "A100-SXM4-80GB", 81920)
TIME_SLICED = {"replicas": 4, "gfd_labels": False}
FLAVORS = """
flavors:
  - {id: quarter-job, title: Quarter job, gpu: {fraction: 1/4}, access: {everyone: true},
     environment: {variables: {DATA: /data}}, resources: {cpu: 2, memory: 4GiB}}
  - {id: half-job, title: Half job, gpu: {fraction: 1/2}, access: {everyone: true}}
"""


@pytest.fixture
def catalog_path(tmp_path: Path) -> Path:
    """ML101 in class now for ana (a quarter GPU), and two job flavors."""
    start = minute(now())
    text = catalog(
        course(
            "ml101",
            start=start - timedelta(minutes=10),
            end=start + timedelta(minutes=80),
            students=["ana"],
            gpu="{fraction: 1/4}",
        )
    )
    path = tmp_path / "catalog.yaml"
    path.write_text(text + FLAVORS)
    return path


def admission(catalog_path: Path, target: str) -> GPUAdmission:
    return GPUAdmission(
        catalog_path=str(catalog_path),
        target=target,
        sharing_backend="time-slicing",
        sharing_backend_config=TIME_SLICED,
    )


ANA = UserIdentity("ana")


def test_one_admission_grants_servers_and_jobs_rendered_for_kubernetes(catalog_path):
    # Given the hub's admission on a cluster whose GPUs are time-sliced four ways
    chosen = admission(catalog_path, "kubernetes")
    pool = CapacityPool([NODE_GPU])

    # When ana's class server and her job are granted
    server = chosen.grant_server(pool, ANA, "ml101", key="server:ana/", now=now())
    job = chosen.grant_job(
        pool, ANA, "quarter-job", key="job:j1", now=now(), running_jobs=[], object_name="job-j1"
    )

    # Then each carries the share the back end renders for that GPU, and the GPU's node
    expected = make_backend("time-slicing", **TIME_SLICED).render(
        GPUShare(fraction=Fraction(1, 4)),
        gpu_model="NVIDIA A100-SXM4-80GB",
        gpu_memory_mib=81920,
        name="job-j1-gpu",
    )
    assert job.plan == expected
    assert server.node == job.node == "gpu-node-0"
    assert server.allocation is not None and job.allocation is not None
    assert set(pool.allocations) == {"server:ana/", "job:j1"}
    # And what the pod or the job sees of it, the GPUSPAWNER_* contract included
    assert server.environment["GPUSPAWNER_PROFILE"] == "ml101"
    assert server.session_end is not None
    assert server.environment["GPUSPAWNER_SESSION_END"] == server.session_end.isoformat()
    assert job.environment["GPUSPAWNER_PROFILE"] == "quarter-job"
    assert job.variables == {"DATA": "/data"}
    assert (job.limits.cpu, job.limits.memory_bytes) == (2, 4 * 1024**3)


def test_the_same_grant_is_rendered_as_an_environment_on_one_machine(catalog_path):
    gpu = GPUDevice("sim-0", 0, "RTX 4090", 24576, simulated=True)
    job = admission(catalog_path, "local").grant_job(
        CapacityPool([gpu]), ANA, "quarter-job", key="job:j1", now=now(), running_jobs=[]
    )

    assert job.plan is None
    environment = job.environment_over({"PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "0,1"})
    assert environment["CUDA_VISIBLE_DEVICES"] == "0"  # the user's own value cannot widen it
    assert environment["GPUSPAWNER_GPU_FRACTION"] == "1/4"
    assert environment["DATA"] == "/data" and environment["PATH"] == "/usr/bin"
    assert job.describe == "Quarter job: 1/4 of a GPU on GPU 0 (RTX 4090, 24 GiB, simulated)"


def test_a_share_keeps_the_sites_package_path_after_its_hooks(catalog_path):
    gpu = GPUDevice("sim-0", 0, "RTX 4090", 24576, simulated=True)
    job = admission(catalog_path, "local").grant_job(
        CapacityPool([gpu]), ANA, "quarter-job", key="job:j1", now=now(), running_jobs=[]
    )

    environment = job.environment_over({"PYTHONPATH": "/opt/site/python:/opt/lab"})

    assert environment["PYTHONPATH"].split(os.pathsep) == [
        SHARE_HOOKS,
        "/opt/site/python",
        "/opt/lab",
    ]


def test_a_share_the_back_end_cannot_give_is_refused_and_its_booking_freed(catalog_path):
    pool = CapacityPool([NODE_GPU])
    with pytest.raises(Refusal) as refused:
        admission(catalog_path, "kubernetes").grant_job(
            pool, ANA, "half-job", key="job:j1", now=now(), running_jobs=[]
        )
    assert refused.value.code == "unsupported" and refused.value.status == 409
    assert not pool.allocations


def test_an_unknown_flavor_has_one_refusal_wherever_it_is_met(catalog_path, tmp_path):
    chosen = admission(catalog_path, "local")
    gpu = GPUDevice("sim-0", 0, "RTX 4090", 24576, simulated=True)
    with pytest.raises(Refusal) as at_create:
        chosen.check_job_flavor([gpu], ANA, "gone", now=now())
    with pytest.raises(Refusal) as at_start:
        chosen.grant_job(CapacityPool([gpu]), ANA, "gone", key="job:j1", now=now(), running_jobs=[])
    capacity = FlavorAdmission(
        admission=chosen, devices=[gpu], identities=IdentityBook(tmp_path / "ids.json")
    )
    with pytest.raises(JobRefused) as through_the_service:
        capacity.acquire(JobTicket("j1", "ana", "gone"))

    assert at_create.value.code == at_start.value.code == "unknown-flavor"
    assert at_create.value.message == at_start.value.message
    assert through_the_service.value.message == at_start.value.message
    assert through_the_service.value.code == "unknown-flavor"


def test_the_job_service_takes_its_settings_from_one_place(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_TO_JOB_CATALOG", "/from/the/environment")
    monkeypatch.setenv("JUPYTER_TO_JOB_SIMULATED_GPUS", '[{"model": "T4", "memory": "16GiB"}]')
    app = JobServiceApp()
    app.initialize(
        [
            "--GPUAdmission.allocation_ledger=/configured/ledger.json",
            "--GPUAdmission.sharing_backend=mps",
            "--JobManager.max_running_jobs=7",
        ]
    )

    # Each setting is taken from its one place; the environment fills what config leaves empty
    assert app.admission.allocation_ledger == "/configured/ledger.json"
    assert app.admission.sharing_backend == "mps"
    assert app.admission.catalog_path == "/from/the/environment"
    assert app.admission.simulated_gpus == [{"model": "T4", "memory": "16GiB"}]
    assert app.config.JobManager.max_running_jobs == 7
    # And the configured value wins over the environment
    configured = JobServiceApp()
    configured.initialize(["--GPUAdmission.catalog_path=/configured"])
    assert configured.admission.catalog_path == "/configured"
    assert KubernetesExecutor.class_traits().get("sharing_backend") is None


def test_each_admission_setting_has_one_name():
    from gpuspawner.spawners.kubernetes import GPUSpawner
    from gpuspawner.spawners.local import LocalGPUSpawner, SimpleLocalGPUSpawner
    from gpuspawner.sso import CampusOAuthenticator
    from jupyter_to_job.extension.app import JobsExtensionApp

    # Given the admission's settings (c.GPUAdmission.*),
    settings = set(GPUAdmission.class_trait_names(config=True))
    for owner in (
        LocalGPUSpawner,
        SimpleLocalGPUSpawner,
        GPUSpawner,
        CampusOAuthenticator,
        JobServiceApp,
        JobsExtensionApp,
        KubernetesExecutor,
    ):
        # then no spawner, authenticator or job-side application takes one under its name.
        assert not settings & set(owner.class_trait_names(config=True)), owner.__name__


def test_a_grant_describes_a_cpu_start_without_a_gpu():
    grant = Grant(kind="job", key="job:j1", owner="ana", subject="cpu", title="CPU", target="local")
    assert grant.describe == "CPU: no GPU" and grant.job_record() is None
