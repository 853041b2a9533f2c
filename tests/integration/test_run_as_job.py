"""Run as Job on a real JupyterHub: the job service, a real single-user server, a real kernel.

A student saves notebooks into their server and runs them as jobs through the server
extension (``/user/<name>/jupyter-to-job/api/``), which relays to the hub's job service
with the server's own token. Jobs run under the service, so they outlive the student's
server; once a job has ended and its processes are gone, its whole log and executed
notebook are still served, and the notebook can be saved into the student's files.
"""

from __future__ import annotations

import json
import re
from typing import Any

import nbformat
import psutil
import pytest
import requests

from jupyter_to_job.runfiles import JobFiles, read_status

from ..support import until
from ..support.hubprocess import BrowserlessUser, free_loopback_ports
from ..support.job_hub import JobService, hub_config, matrix_catalog, wait_for_service
from ..support.notebooks import notebook_json

pytestmark = pytest.mark.integration


class StudentServer:
    """The student's own server, called as a browser would (with the student's token)."""

    def __init__(self, student: BrowserlessUser):
        self.student = student

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        headers = {"Authorization": f"token {self.student.token}", **kwargs.pop("headers", {})}
        kwargs.setdefault("timeout", 60)
        return requests.request(method, self.student.server_url() + path, headers=headers, **kwargs)

    def jobs(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self.request(method, "jupyter-to-job/api/" + path, **kwargs)

    def save(self, path: str, content: dict | None = None) -> None:
        model = (
            {"type": "directory"} if content is None else {"type": "notebook", "content": content}
        )
        answer = self.request("PUT", f"api/contents/{path}", json=model)
        assert answer.status_code in (200, 201), answer.text


def whole_log(service: JobService, job_id: str) -> str:
    """The log read page by page (small pages, to exercise offsets) until complete."""
    text, offset = "", 0
    while True:
        chunk = service.request("GET", f"jobs/{job_id}/logs?offset={offset}&limit=256").json()
        text += chunk["data"]
        offset = chunk["next_offset"]
        if chunk["complete"]:
            return text


def cell_lines(log: str) -> list[str]:
    return re.findall(r"^\[cell \d+\] (.*)$", log, re.M)


def test_a_notebook_runs_as_a_job_that_outlives_the_students_server(
    start_hub, browserless_user, tmp_path
):
    # Given a hub with the job service, and alice's running server
    (tmp_path / "catalog.yaml").write_text(matrix_catalog())
    (port,) = free_loopback_ports(1)
    jobs_root = tmp_path / "jobs"
    hub = start_hub(
        hub_config(
            tmp_path / "catalog.yaml", jobs_root, port, 'c.JupyterHub.spawner_class = "simple"'
        )
    )
    service_url = f"http://127.0.0.1:{port}/services/jupyter-to-job/api/"
    wait_for_service(service_url)
    alice = browserless_user(hub, "alice")
    assert alice.spawn_via_api().status_code in (201, 202)
    alice.wait_ready()
    server = StudentServer(alice)
    directly = JobService(service_url, alice.token)  # the service itself, as alice

    # And two saved notebooks: one prints in every cell, one waits for a gate
    gate = tmp_path / "gate"
    server.save("work")
    server.save(
        "work/steps.ipynb",
        notebook_json(
            "print('first cell')",
            "for i in range(3):\n    print('loop', i)",
            "import sys\nprint('to stderr', file=sys.stderr)",
            "print('third cell')",
            "print('last cell')",
        ),
    )
    server.save(
        "work/long.ipynb",
        notebook_json(
            "print('long job started')",
            f"import os, time\nwhile not os.path.exists({str(gate)!r}):\n    time.sleep(0.1)",
            "print('after the gate')",
        ),
    )

    # When she runs the first one through her server's Run as Job API
    created = server.jobs(
        "POST", "jobs", json={"input_path": "work/steps.ipynb", "flavor": "cpu-job"}
    )
    assert created.status_code == 201, created.text
    steps_id = created.json()["job_id"]
    assert created.json()["job"]["owner"] == "alice"

    # Then a real kernel runs it, and the followed log shows every cell's output in order
    followed = server.jobs("GET", f"jobs/{steps_id}/logs", params={"follow": 1}, stream=True)
    chunks = [json.loads(line) for line in followed.iter_lines() if line]
    assert chunks[-1]["complete"]
    log = "".join(chunk["data"] for chunk in chunks)
    assert cell_lines(log) == [
        "first cell",
        "loop 0",
        "loop 1",
        "loop 2",
        "to stderr",
        "third cell",
        "last cell",
    ]
    assert server.jobs("GET", f"jobs/{steps_id}").json()["status"] == "COMPLETED"

    # Bad requests through the relay are clear too
    missing = server.jobs("POST", "jobs", json={"input_path": "work/nope.ipynb"})
    assert (
        missing.status_code == 404 and "no notebook 'work/nope.ipynb'" in missing.json()["message"]
    )
    refused = server.jobs(
        "POST", "jobs", json={"input_path": "work/steps.ipynb", "flavor": "research-gpu"}
    )
    assert refused.status_code == 403 and refused.json()["reason"] == "not-entitled"

    # When she starts the long job and stops her server while it runs
    long_id = server.jobs("POST", "jobs", json={"input_path": "work/long.ipynb"}).json()["job_id"]
    until(
        lambda: "long job started" in whole_log_so_far(directly, long_id), "the long job to start"
    )
    alice.stop_server()

    # Then the job keeps running under the service, and completes when the gate opens
    assert directly.job(long_id)["status"] == "RUNNING"
    gate.touch()
    finished = directly.wait_for(long_id, "COMPLETED", "FAILED", "STOPPED")
    assert finished["status"] == "COMPLETED", finished

    # And once its processes are gone, the whole log and the executed notebook are still served
    status = read_status(JobFiles(jobs_root / "jobs" / long_id))
    assert status is not None and status.runner_pid is not None
    until(
        lambda: not _alive(status.runner_pid) and not _alive(status.kernel_pid),
        "the job's processes to exit",
    )
    log = whole_log(directly, long_id)
    assert cell_lines(log) == ["long job started", "after the gate"]
    executed = directly.request("GET", f"jobs/{long_id}/outputs/ipynb")
    assert executed.status_code == 200
    assert "after the gate" in json.dumps(
        nbformat.reads(executed.text, as_version=4).cells[-1].outputs
    )

    # And through the extension once her server is back
    assert alice.spawn_via_api().status_code in (201, 202)
    alice.wait_ready()
    relayed = server.jobs("GET", f"jobs/{long_id}/logs", params={"limit": 1_000_000}).json()
    assert relayed["complete"] and relayed["data"] == log
    listed = server.jobs("GET", "jobs").json()
    assert {job["job_id"] for job in listed["jobs"]} == {steps_id, long_id}
    assert server.jobs("GET", f"jobs/{long_id}/outputs/html").status_code == 200

    # And the executed notebook can be saved into her files
    saved = server.jobs(
        "POST", f"jobs/{long_id}/outputs/ipynb/save", json={"path": "results/long-run.ipynb"}
    )
    assert saved.status_code == 201, saved.text
    stored = server.request("GET", "api/contents/results/long-run.ipynb")
    assert stored.status_code == 200
    assert "after the gate" in json.dumps(stored.json()["content"]["cells"][-1]["outputs"])


def whole_log_so_far(service: JobService, job_id: str) -> str:
    answer = service.request("GET", f"jobs/{job_id}/logs")
    return answer.json()["data"] if answer.status_code == 200 else ""


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_jobs_are_refused_with_a_sentence_when_the_service_cannot_be_reached(
    start_hub, browserless_user, tmp_path
):
    # Given a server whose job service URL points nowhere
    (closed_port,) = free_loopback_ports(1)
    hub = start_hub(
        f"""
c.JupyterHub.authenticator_class = "dummy"
c.JupyterHub.spawner_class = "simple"
c.Spawner.args.append("--ServerApp.jpserver_extensions=jupyter_to_job=True")
c.Spawner.environment = {{
    "JUPYTER_TO_JOB_SERVICE_URL": "http://127.0.0.1:{closed_port}/services/jupyter-to-job/"
}}
"""
    )
    bea = browserless_user(hub, "bea")
    assert bea.spawn_via_api().status_code in (201, 202)
    bea.wait_ready()
    server = StudentServer(bea)
    server.save("nb.ipynb", notebook_json("1"))
    # When she lists or creates jobs, she is told the service cannot be reached
    for method, path, body in [("GET", "jobs", None), ("POST", "jobs", {"input_path": "nb.ipynb"})]:
        answer = server.jobs(method, path, json=body)
        assert answer.status_code == 503, answer.text
        assert answer.json()["message"].startswith("The job service cannot be reached")
    # While what her own server knows still answers
    assert server.jobs("GET", "session").status_code == 200
