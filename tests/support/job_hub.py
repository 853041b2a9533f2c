"""A real JupyterHub with the job service as a managed service (as hub_config/local wires it).

People (DummyAuthenticator; tokens made through the admin API):

- alice, bob: students of ML101 (through the group ``ml101-students``);
- ines: instructor of ML101; olga: instructor of PHYS201 (pete is her student);
- tara: a teaching assistant whose role reads the jobs of ``ml101-students``;
- rhea: holder of the research allocation ``lab``;
- root: a hub admin.

Flavors: ``cpu-job`` (everyone), ``course-gpu`` (ML101, 1/4 of the one simulated GPU),
``research-gpu`` (the ``lab`` allocation).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from jupyter_to_job.scopes import READ_JOBS_SCOPE, access_scope

from .course_catalogs import minute, now, window
from .hubprocess import REPO_ROOT, RunningHub, copy_log, free_loopback_ports

ARTIFACTS = REPO_ROOT / "test-artifacts" / "jobs_service"
STUDENTS_GROUP = "ml101-students"
MAX_NOTEBOOK_BYTES = 200_000
READY_TIMEOUT = 60.0
JOB_TIMEOUT = 120.0  # a bound for a broken test, never a timing assertion


def matrix_catalog() -> str:
    """Two courses in term, a research allocation, and three job flavors."""
    start = minute(now()) - timedelta(minutes=30)
    end = start + timedelta(hours=2)
    first, last = (start - timedelta(days=1)).date(), (start + timedelta(days=60)).date()

    def course(course_id: str, title: str, instructor: str, enrolment: str) -> str:
        return f"""\
  - id: {course_id}
    title: {title}
    instructors: [{instructor}]
    enrolment: {enrolment}
    schedule:
      timezone: UTC
      term: {{first_day: {first}, last_day: {last}}}
      windows:
        - {window(start, end)}
"""

    return (
        "courses:\n"
        + course("ml101", "Machine Learning 101", "ines", f"{{groups: [{STUDENTS_GROUP}]}}")
        + course("phys201", "Physics 201", "olga", "{users: [pete]}")
        + """\
research:
  - id: lab
    title: Vision lab
    users: [rhea]
    expires: 2099-12-31
flavors:
  - id: cpu-job
    title: CPU job
    access: {everyone: true}
  - id: course-gpu
    title: Course GPU
    gpu: {fraction: 1/4, memory: 4GiB}
    default_deadline: 10m
    max_deadline: 1h
    access: {courses: [ml101]}
  - id: research-gpu
    title: Research GPU
    gpu: {count: 1}
    access: {research: [lab]}
"""
    )


def hub_config(catalog: Path, root: Path, port: int, extra: str = "") -> str:
    """Hub configuration: the job service wired as hub_config/local does it."""
    return f"""
from jupyter_to_job.hub import (
    job_server_token_scopes, job_service, job_service_roles, job_service_url,
)
from jupyter_to_job.scopes import hub_custom_scopes
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.admin_users = {{"root"}}
c.JupyterHub.load_groups = {{{STUDENTS_GROUP!r}: {{"users": ["alice", "bob"]}}}}
c.JupyterHub.custom_scopes = hub_custom_scopes()
c.JupyterHub.services.append(job_service(
    port={port},
    catalog_path={str(catalog)!r},
    root_dir={str(root)!r},
    gpu_inventory="simulated",
    simulated_gpus=[{{"model": "RTX 4090", "memory": "24GiB"}}],
    args=[
        "--LocalExecutor.poll_interval=0.1",
        "--LocalExecutor.stop_grace_seconds=5",
        "--JobManager.queue_poll_interval=0.2",
        "--LogStore.follow_interval=0.05",
        "--JobServiceApp.max_notebook_bytes={MAX_NOTEBOOK_BYTES}",
        "--JobNotifier.webhook_allowed_networks=127.0.0.0/8",
        "--JobNotifier.webhook_allowed_networks=::1/128",
    ],
))
c.JupyterHub.load_roles.extend(job_service_roles())
c.JupyterHub.load_roles.append({{
    "name": "ml101-ta",
    "scopes": [{READ_JOBS_SCOPE + "!group=" + STUDENTS_GROUP!r}, {access_scope()!r}],
    "users": ["tara"],
}})
c.Spawner.server_token_scopes = job_server_token_scopes()
c.Spawner.environment.update({{"JUPYTER_TO_JOB_SERVICE_URL": job_service_url({port})}})
c.Spawner.args.append("--ServerApp.jpserver_extensions=jupyter_to_job=True")
{extra}
"""


@dataclass
class JobService:
    """The job service of a running hub, called with one token."""

    url: str
    token: str | None = None

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        headers = dict(kwargs.pop("headers", {}))
        if self.token:
            headers["Authorization"] = f"token {self.token}"
        kwargs.setdefault("timeout", 60)
        return requests.request(method, self.url + path, headers=headers, **kwargs)

    def create(self, notebook: dict, **fields: Any) -> requests.Response:
        fields.setdefault("input_path", "notebook.ipynb")
        return self.request("POST", "jobs", json={**fields, "notebook": notebook})

    def job(self, job_id: str) -> dict:
        response = self.request("GET", f"jobs/{job_id}")
        assert response.status_code == 200, response.text
        return response.json()

    def wait_for(self, job_id: str, *statuses: str) -> dict:
        deadline = time.monotonic() + JOB_TIMEOUT
        while time.monotonic() < deadline:
            job = self.job(job_id)
            if job["status"] in statuses:
                return job
            time.sleep(0.1)
        raise AssertionError(f"job {job_id} never reached {statuses}: {job}")


@dataclass
class JobHub:
    hub: RunningHub
    service_url: str
    root: Path
    tokens: dict[str, str] = field(default_factory=dict)

    def as_(self, name: str | None) -> JobService:
        """The service as ``name`` (None: anonymous)."""
        return JobService(self.service_url, self.tokens[name] if name else None)

    def token(self, name: str, scopes: list[str] | None) -> str:
        if self.hub.api("GET", f"/users/{name}").status_code == 404:
            self.hub.api("POST", f"/users/{name}").raise_for_status()
        body: dict[str, Any] = {"note": "jobs_service test"}
        if scopes is not None:
            body["scopes"] = scopes
        response = self.hub.api("POST", f"/users/{name}/tokens", json=body)
        assert response.status_code == 201, response.text
        return response.json()["token"]


def wait_for_service(url: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        try:
            if requests.get(url + "health", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the job service did not answer at {url}health")


def start_job_hub(workdir: Path, extra: str = "") -> JobHub:
    catalog = workdir / "catalog.yaml"
    workdir.mkdir(parents=True, exist_ok=True)
    catalog.write_text(matrix_catalog())
    (port,) = free_loopback_ports(1)
    root = workdir / "jobs"
    hub = RunningHub.start(hub_config(catalog, root, port, extra), workdir / "hub")
    service_url = f"http://127.0.0.1:{port}/services/jupyter-to-job/api/"
    try:
        wait_for_service(service_url)
    except BaseException:
        hub.stop()
        raise
    return JobHub(hub, service_url, root)


@contextlib.contextmanager
def stopped_afterwards(setup: JobHub, request: pytest.FixtureRequest) -> Iterator[JobHub]:
    """Stop the hub when the block ends; when a test failed meanwhile, keep the hub's log
    under test-artifacts/jobs_service/ (named for the fixture's node) and print its tail."""
    failed_before = request.session.testsfailed
    try:
        yield setup
    finally:
        setup.hub.stop()
        if request.session.testsfailed > failed_before:
            name = re.sub(r"[^\w.-]+", "_", request.node.nodeid)
            kept = copy_log(setup.hub, ARTIFACTS / f"{name}.log")
            print(f"--- {kept} (tail) ---\n{setup.hub.log_tail(150)}")
