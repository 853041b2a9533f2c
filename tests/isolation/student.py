"""A student in front of the hub, as the isolation tests need one: their course server, its
contents and Run as Job APIs with their own token, and their server's process."""

from __future__ import annotations

import pwd
from typing import Any

import psutil
import requests

from ..support import until
from ..support.hubprocess import BrowserlessUser, RunningHub


class Student:
    """A student in front of the hub: their server and its Run as Job API, with their token."""

    def __init__(self, hub: RunningHub, name: str):
        self.user = BrowserlessUser(hub, name)
        self.name = name
        self.account = pwd.getpwnam(name)

    def start_course_server(self) -> None:
        self.user.login()
        answer = self.user.spawn_via_api({"profile": "gpu-demo"})
        assert answer.status_code in (201, 202), answer.text
        self.user.wait_ready()

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        headers = {"Authorization": f"token {self.user.token}"}
        return requests.request(
            method, self.user.server_url() + path, headers=headers, timeout=60, **kwargs
        )

    def save(self, path: str, model: dict) -> None:
        answer = self.request("PUT", f"api/contents/{path}", json=model)
        assert answer.status_code in (200, 201), answer.text

    def save_notebook(self, path: str, content: dict) -> None:
        folder = path.rpartition("/")[0]
        if folder:
            self.save(folder, {"type": "directory"})
        self.save(path, {"type": "notebook", "content": content})

    def run_job(self, path: str, flavor: str) -> dict:
        created = self.request(
            "POST", "jupyter-to-job/api/jobs", json={"input_path": path, "flavor": flavor}
        )
        assert created.status_code == 201, created.text
        job_id = created.json()["job_id"]

        def finished() -> dict | None:
            job = self.request("GET", f"jupyter-to-job/api/jobs/{job_id}").json()
            return job if job["status"] in ("COMPLETED", "FAILED", "STOPPED") else None

        return until(finished, f"{self.name}'s job {job_id} to end")

    def job_log(self, job_id: str) -> str:
        answer = self.request("GET", f"jupyter-to-job/api/jobs/{job_id}/logs?tail=1000")
        assert answer.status_code == 200, answer.text
        return answer.json()["data"]

    def server_process(self) -> psutil.Process:
        for process in psutil.process_iter(["cmdline", "uids"]):
            cmdline = " ".join(process.info["cmdline"] or [])
            if "jupyterhub-singleuser" in cmdline and f"/user/{self.name}/" in str(
                process.environ().get("JUPYTERHUB_SERVICE_PREFIX", "")
            ):
                return process
        raise AssertionError(f"no server process of {self.name}")
