"""A hub killed outright (``kill -9``) and started again: no phantom booking, nothing double-booked.

A real JupyterHub with SimpleLocalGPUSpawner on one simulated GPU, the allocation ledger
shared with the job service, the job service and the course-sessions service (with its
course API) as managed services, as hub_config/local wires them. The hub is killed with
SIGKILL, so none of its cleanup runs, then launched again with the same configuration.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import psutil
import pytest
import requests

from gpuspawner.core.ledger import AllocationLedger, ProcessHolder
from jupyter_to_job.runfiles import JobFiles, read_status

from ..support import until
from ..support.course_catalogs import catalog, course, minute, now, write_catalog
from ..support.hubprocess import BrowserlessUser, RunningHub, free_loopback_ports
from ..support.notebooks import notebook_json

pytestmark = pytest.mark.integration

ONE_GPU = [{"model": "RTX 4090", "memory": "24GiB"}]
JOB_FLAVORS = """\
flavors:
  - id: half-gpu
    title: Half a GPU
    gpu: {fraction: 1/2, memory: 8GiB}
    default_deadline: 30m
    max_deadline: 1h
    access: {courses: [ml101]}
"""


def write_course_catalog(folder: Path, gpu: str) -> Path:
    t = minute(now())
    text = catalog(
        course(
            "ml101",
            start=t - timedelta(minutes=10),
            end=t + timedelta(minutes=120),
            students=["ana", "ben"],
            gpu=gpu,
            instructors=("teacher",),
        )
    )
    write_catalog(folder, text + JOB_FLAVORS)
    return folder


def hub_config(catalog_dir: Path, ledger: Path, jobs_root: Path, ports: tuple[int, int]) -> str:
    """The hub as hub_config/local wires it: spawner, ledger, job and course-sessions services."""
    jobs_port, sessions_port = ports
    return f"""
import sys
from pathlib import Path
from gpuspawner.policy import load_catalog
from gpuspawner.policy.roles import course_roles
from gpuspawner.sessions import course_sessions_service, sessions_service_role
from jupyter_to_job.hub import (
    job_server_token_scopes, job_service, job_service_roles, job_service_url,
)
from jupyter_to_job.scopes import hub_custom_scopes

c.JupyterHub.authenticator_class = "dummy"
c.JupyterHub.spawner_class = "gpuspawner.local.SimpleLocalGPUSpawner"
c.GPUAdmission.catalog_path = {str(catalog_dir)!r}
c.GPUAdmission.gpu_inventory = "simulated"
c.GPUAdmission.simulated_gpus = {ONE_GPU!r}
c.GPUAdmission.allocation_ledger = {str(ledger)!r}
c.Spawner.cmd = [str(Path(sys.executable).parent / "jupyterhub-singleuser")]
c.Spawner.consecutive_failure_limit = 0

c.JupyterHub.custom_scopes = hub_custom_scopes()
c.JupyterHub.services.append(job_service(
    port={jobs_port},
    catalog_path={str(catalog_dir)!r},
    root_dir={str(jobs_root)!r},
    gpu_inventory="simulated",
    simulated_gpus=c.GPUAdmission.simulated_gpus,
    allocation_ledger=c.GPUAdmission.allocation_ledger,
    args=["--LocalExecutor.poll_interval=0.1", "--JobManager.queue_poll_interval=0.2"],
))
c.JupyterHub.load_roles.extend(job_service_roles())
c.JupyterHub.services.append(course_sessions_service(
    {str(catalog_dir)!r}, interval=3600, audit_log={str(jobs_root.parent / "sessions.jsonl")!r},
    port={sessions_port},
))
c.JupyterHub.load_roles.append(sessions_service_role())
c.JupyterHub.load_roles.extend(course_roles(load_catalog({str(catalog_dir)!r})))
c.Spawner.server_token_scopes = job_server_token_scopes()
c.Spawner.environment.update({{"JUPYTER_TO_JOB_SERVICE_URL": job_service_url({jobs_port})}})
"""


# A spawner that stops between the booking and the launch of the server while a file
# exists: the window in which a hub killed outright used to leave a phantom booking.
PAUSING_SPAWNER = """
import asyncio
from pathlib import Path
from jupyterhub.spawner import SimpleLocalProcessSpawner
from gpuspawner.spawners.local import LocalGPUSpawnerMixin

PAUSE, BOOKED = Path({pause!r}), Path({booked!r})


class PauseBeforeLaunch(SimpleLocalProcessSpawner):
    async def start(self):
        if PAUSE.exists():  # the GPU slice is booked by now (LocalGPUSpawnerMixin.start)
            BOOKED.write_text(self.user.name)
            while PAUSE.exists():
                await asyncio.sleep(0.1)
        return await super().start()


class PausingGPUSpawner(LocalGPUSpawnerMixin, PauseBeforeLaunch):
    runs_as_user_account = False  # as SimpleLocalGPUSpawner: the hub's own account


c.JupyterHub.spawner_class = PausingGPUSpawner
"""


class Services:
    """The job service and the course API of one hub, called directly on their ports."""

    def __init__(self, ports: tuple[int, int]):
        jobs_port, sessions_port = ports
        self.jobs_url = f"http://127.0.0.1:{jobs_port}/services/jupyter-to-job/api/"
        self.courses_url = f"http://127.0.0.1:{sessions_port}/services/course-sessions/api/courses"

    def jobs(self, user: BrowserlessUser, method: str, path: str, **kwargs: Any):
        headers = {"Authorization": f"token {user.token}"}
        return requests.request(method, self.jobs_url + path, headers=headers, timeout=30, **kwargs)

    def job(self, user: BrowserlessUser, job_id: str) -> dict:
        response = self.jobs(user, "GET", f"jobs/{job_id}")
        assert response.status_code == 200, response.text
        return response.json()

    def courses(self, teacher: BrowserlessUser) -> requests.Response:
        headers = {"Authorization": f"token {teacher.token}"}
        return requests.get(self.courses_url, headers=headers, timeout=30)

    def wait_answering(self, teacher: BrowserlessUser) -> None:
        """Both services answer: the job service's health check, the course API's list."""

        def answering() -> bool:
            try:
                health = requests.get(self.jobs_url + "health", timeout=5)
                return health.status_code == 200 and self.courses(teacher).status_code == 200
            except requests.RequestException:
                return False

        until(answering, "the job service and the course-sessions service to answer")


def service_processes(hub: RunningHub) -> dict[str, psutil.Process]:
    """The hub's managed services, by module name."""
    assert hub.pid is not None
    found = {}
    for child in psutil.Process(hub.pid).children():
        command = " ".join(child.cmdline())
        for module in ("jupyter_to_job.service", "gpuspawner.sessions"):
            if f"-m {module}" in command:
                found[module] = child
    return found


def server_pid(hub: RunningHub, user: str) -> int:
    return hub.api("GET", f"/users/{user}").json()["servers"][""]["state"]["pid"]


def refusal_message(response: requests.Response) -> str:
    return response.json().get("message", "")


def test_a_hub_killed_between_a_booking_and_its_servers_start_leaves_no_phantom_booking(
    start_hub, browserless_user, tmp_path
):
    # Given a hub whose course gives each student a whole GPU, on a machine with one,
    # and whose spawner pauses after booking while the pause file exists
    catalog_dir = write_course_catalog(tmp_path / "catalog", gpu="{count: 1}")
    ledger = tmp_path / "gpu-allocations.json"
    pause, booked = tmp_path / "pause", tmp_path / "booked"
    ports = tuple(free_loopback_ports(2))
    hub = start_hub(
        hub_config(catalog_dir, ledger, tmp_path / "jobs", ports)
        + PAUSING_SPAWNER.format(pause=str(pause), booked=str(booked))
    )
    ana, ben = browserless_user(hub, "ana"), browserless_user(hub, "ben")
    for person in (ana, ben):  # the users and their tokens exist before the crash
        assert person.token

    # When ana's start has booked the GPU and the hub is killed before her server starts
    pause.touch()
    with ThreadPoolExecutor(1) as background:
        background.submit(ana.spawn_via_api, {"profile": "ml101"})
        until(booked.exists, "the spawner to book the GPU and pause")
        assert [a["key"] for a in json.loads(ledger.read_text())["allocations"]] == ["server:ana/"]
        hub.kill_hard()
    pause.unlink()

    # And the hub is started again
    hub.launch()

    # Then ana's start is not running, and nothing holds the GPU: ben can start on it
    assert "" not in ana.model().get("servers", {})
    started = ben.spawn_via_api({"profile": "ml101"})
    assert started.status_code in (201, 202), started.text
    ben.wait_ready()
    # And the GPU is his alone, held by his server's process: ana is refused until he stops
    assert AllocationLedger(ledger).holders() == {
        "server:ben/": ProcessHolder.of_pid(server_pid(hub, "ben"))
    }
    refused = ana.spawn_via_api({"profile": "ml101"})
    assert refused.status_code == 409, refused.text
    assert "All GPUs are taken right now" in refusal_message(refused)
    # And the hub log says why the booking was released
    assert "Freed the GPU slice of server:ana/" in hub.log_text()


def test_after_a_hub_is_killed_with_a_server_and_a_job_running_nothing_is_double_booked(
    start_hub, browserless_user, tmp_path
):
    # Given a hub with its job and course-sessions services, on one GPU
    catalog_dir = write_course_catalog(tmp_path / "catalog", gpu="{fraction: 1/2, memory: 8GiB}")
    ledger, jobs_root = tmp_path / "gpu-allocations.json", tmp_path / "jobs"
    ports = tuple(free_loopback_ports(2))
    hub = start_hub(hub_config(catalog_dir, ledger, jobs_root, ports))
    services = Services(ports)
    ana, ben, teacher = (browserless_user(hub, n) for n in ("ana", "ben", "teacher"))
    services.wait_answering(teacher)
    # And ana's course server on half of it, and her GPU job running on the other half
    assert ana.spawn_via_api({"profile": "ml101"}).status_code in (201, 202)
    ana.wait_ready()
    gate = tmp_path / "gate"
    waiting_cell = f"import os, time\nwhile not os.path.exists({str(gate)!r}):\n    time.sleep(0.1)"
    created = services.jobs(
        ana,
        "POST",
        "jobs",
        json={
            "input_path": "train.ipynb",
            "flavor": "half-gpu",
            "notebook": notebook_json("print('training')", waiting_cell, "print('done')"),
        },
    )
    assert created.status_code == 201, created.text
    job_id = created.json()["job_id"]

    def at_waiting_cell():
        status = read_status(JobFiles(jobs_root / "jobs" / job_id))
        return status if status is not None and status.current_cell == 1 else None

    status = until(at_waiting_cell, "ana's job to reach its waiting cell")
    server, runner = server_pid(hub, "ana"), status.runner_pid
    assert {*AllocationLedger(ledger).holders()} == {"server:ana/", f"job:{job_id}"}
    old_services = service_processes(hub)
    assert set(old_services) == {"jupyter_to_job.service", "gpuspawner.sessions"}

    # When the hub is killed outright, and started again at once (as a supervisor would)
    hub.kill_hard()
    # (meanwhile the server and the job run on, and hold their slices themselves)
    assert AllocationLedger(ledger).holders() == {
        "server:ana/": ProcessHolder.of_pid(server),
        f"job:{job_id}": ProcessHolder.of_pid(runner),
    }
    log_before = len(hub.log_text())
    hub.launch()

    # Then the old services have stopped with the old hub (and let go of their ports)...
    for module, process in old_services.items():
        until(lambda process=process: not process.is_running(), f"{module} to stop with the hub")
    # ...and both services answer again, as new instances the new hub started
    services.wait_answering(teacher)
    new_services = service_processes(hub)
    assert set(new_services) == set(old_services)
    assert all(new_services[m].pid != old_services[m].pid for m in old_services)
    assert "exited with status" not in hub.log_text()[log_before:]
    # And the server and the job are still running, each on its own half of the GPU
    assert ana.wait_ready()["ready"]
    assert services.job(ana, job_id)["status"] == "RUNNING"
    assert {*AllocationLedger(ledger).holders()} == {"server:ana/", f"job:{job_id}"}
    # And nothing is double-booked: ben can neither start a GPU server nor run a GPU job
    refused = ben.spawn_via_api({"profile": "ml101"})
    assert refused.status_code == 409, refused.text
    assert "All GPUs are taken right now" in refusal_message(refused)
    queued = services.jobs(
        ben,
        "POST",
        "jobs",
        json={
            "input_path": "quick.ipynb",
            "flavor": "half-gpu",
            "notebook": notebook_json("print('ben')"),
        },
    )
    assert queued.status_code == 201, queued.text
    bens_job = queued.json()["job_id"]
    until(
        lambda: (services.job(ben, bens_job).get("status_message") or "").startswith(
            "Waiting for GPU capacity"
        ),
        "ben's job to wait for the GPU",
    )

    # When ana's job finishes, its half goes to ben's job, and to it alone
    gate.touch()
    until(lambda: services.job(ana, job_id)["status"] == "COMPLETED", "ana's job to complete")
    until(lambda: services.job(ben, bens_job)["status"] == "COMPLETED", "ben's job to complete")
    assert services.job(ben, bens_job)["gpu"] is not None
    until(
        lambda: {*AllocationLedger(ledger).holders()} == {"server:ana/"},
        "the jobs' slices to be released",
    )
