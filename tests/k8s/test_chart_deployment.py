"""Scenarios: the whole hub installed with helm on a real control plane, and used.

The README's steps install Zero to JupyterHub 4.4.0 with hub_config/kubernetes/values.yaml
and this project's chart (the job service, the usage database) on a cluster of their own;
the node runs every pod from its image (tests/support/cluster/chart_deployment.py). Then,
through the proxy-public Service and nothing else, as people would: a student logs in and
starts a quarter of a GPU; a researcher runs a notebook as a job, whose log and executed
notebook come back. Everything the hub and the job service do goes through the real API
server, with their own service accounts, RBAC and Pod Security.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest
import requests

from ..support.cluster.chart_deployment import Deployment, deploy, people_catalog
from ..support.cluster.session import ControlPlaneCluster
from ..support.notebooks import notebook_json

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.skipif(
        os.geteuid() != 0,
        reason="the node gives each pod a network and mount namespace of its own: needs root",
    ),
]

GUARD = 240.0  # a bound for a broken test, never a timing assertion


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    folder = tmp_path_factory.mktemp("chart-deployment")
    catalog = folder / "catalog.yaml"
    catalog.write_text(people_catalog())
    cluster = ControlPlaneCluster.start(folder / "cluster", identities=False)
    try:
        yield deploy(cluster, folder / "deploy", catalog)
    finally:
        cluster.stop()


class Person:
    """Someone using the hub through its public URL, as a browser would (cookies, xsrf)."""

    def __init__(self, deployment: Deployment, name: str) -> None:
        self.deployment = deployment
        self.url = deployment.url
        self.name = name
        self.session = requests.Session()
        self.token = ""

    def log_in(self) -> None:
        page = self.session.get(f"{self.url}/hub/login", timeout=30)
        assert page.status_code == 200, page.text
        answer = self.session.post(
            f"{self.url}/hub/login",
            data={
                "username": self.name,
                "password": "any password",
                "_xsrf": self.session.cookies.get("_xsrf", ""),
            },
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        # An API token of theirs, as "Token" on the hub's page makes one.
        made = self.session.post(
            f"{self.url}/hub/api/users/{self.name}/tokens",
            headers={"X-XSRFToken": self.session.cookies.get("_xsrf", path="/hub/") or ""},
            json={"note": "chart deployment scenario"},
            timeout=30,
        )
        assert made.status_code == 201, made.text
        self.token = made.json()["token"]

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        headers = {"Authorization": f"token {self.token}", **kwargs.pop("headers", {})}
        return requests.request(method, f"{self.url}{path}", headers=headers, timeout=60, **kwargs)

    def start_server(self, profile: str) -> dict:
        answer = self.api("POST", f"/hub/api/users/{self.name}/server", json={"profile": profile})
        assert answer.status_code in (201, 202), answer.text
        deadline = time.monotonic() + GUARD
        while time.monotonic() < deadline:
            user = self.api("GET", f"/hub/api/users/{self.name}").json()
            server = (user.get("servers") or {}).get("")
            if server and server.get("ready"):
                return server
            time.sleep(1)
        hub_log = self.deployment.kubectl("logs", "deploy/hub", "--tail=60")
        events = self.deployment.kubectl("get", "events", "--sort-by=.lastTimestamp")
        raise AssertionError(
            f"{self.name}'s server did not start: {user}\n{hub_log}\n{events[-3000:]}"
        )


def test_every_part_runs_and_the_hub_answers_through_its_public_service(deployment):
    pods = json.loads(deployment.kubectl("get", "pods", "-o", "json"))["items"]
    running = {
        p["metadata"]["labels"].get("component")
        or p["metadata"]["labels"].get("app.kubernetes.io/name")
        for p in pods
        if p["status"]["phase"] == "Running"
    }

    assert {"hub", "proxy", "jupyter-to-job", "gpu-usage-db"} <= running
    login = requests.get(f"{deployment.url}/hub/login", timeout=30)
    assert login.status_code == 200 and "Sign in" in login.text


def test_a_student_starts_a_quarter_of_a_gpu(deployment):
    ana = Person(deployment, "ana")
    ana.log_in()

    server = ana.start_server("ml101")

    pod = json.loads(deployment.kubectl("get", "pod", "jupyter-ana", "-o", "json"))
    container = pod["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container.get("env") or []}
    status = ana.api("GET", "/user/ana/api/status")
    assert server["ready"] and status.status_code == 200, status.text
    assert env["GPUSPAWNER_GPU_FRACTION"] == "1/4"
    # one of the four time-sliced replicas of a GPU, as backends/time-slicing.yaml names them
    assert container["resources"]["limits"]["nvidia.com/gpu.shared"] == "1"
    assert "serviceAccountName" not in pod["spec"] or not pod["spec"].get(
        "automountServiceAccountToken", True
    )


def test_a_researcher_runs_a_notebook_as_a_job_and_gets_its_log_and_output(deployment):
    rhea = Person(deployment, "rhea")
    rhea.log_in()
    rhea.start_server("cpu")
    notebook = notebook_json("print('hello from a job on the cluster')", "x = 6 * 7\nprint(x)")
    saved = rhea.api(
        "PUT",
        "/user/rhea/api/contents/analysis.ipynb",
        json={"type": "notebook", "content": notebook},
    )
    assert saved.status_code in (200, 201), saved.text

    created = rhea.api(
        "POST",
        "/user/rhea/jupyter-to-job/api/jobs",
        json={"input_path": "analysis.ipynb", "flavor": "cpu-job"},
    )
    assert created.status_code == 201, created.text
    job_id = created.json()["job_id"]
    deadline = time.monotonic() + GUARD
    while time.monotonic() < deadline:
        job = rhea.api("GET", f"/user/rhea/jupyter-to-job/api/jobs/{job_id}").json()
        if job["status"] in ("COMPLETED", "FAILED", "STOPPED"):
            break
        time.sleep(1)
    log = rhea.api("GET", f"/user/rhea/jupyter-to-job/api/jobs/{job_id}/logs").json()["data"]
    executed = rhea.api("GET", f"/user/rhea/jupyter-to-job/api/jobs/{job_id}/outputs/ipynb")

    assert job["status"] == "COMPLETED", log
    assert "hello from a job on the cluster" in log and "[cell 1] 42" in log
    assert executed.status_code == 200
    assert "hello from a job on the cluster" in json.dumps(executed.json()["cells"][0]["outputs"])

    # And, signed in on the hub in their browser, they find it on the jobs page (the job
    # service's own page, through the hub's OAuth: no token of theirs on these requests)
    menu = rhea.session.get(f"{rhea.url}/hub/home", timeout=30)
    listing = rhea.session.get(f"{rhea.url}/services/jupyter-to-job/", timeout=60)
    page = rhea.session.get(f"{rhea.url}/services/jupyter-to-job/jobs/{job_id}", timeout=60)

    assert menu.status_code == 200
    assert '<a class="dropdown-item" href="/services/jupyter-to-job/">Jobs</a>' in menu.text
    assert listing.status_code == 200, listing.text[-2000:]
    assert listing.url == f"{rhea.url}/services/jupyter-to-job/"  # back from the hub's OAuth
    assert f'data-job-id="{job_id}"' in listing.text
    assert page.status_code == 200 and "hello from a job on the cluster" in page.text
