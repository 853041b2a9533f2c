"""Scenario: on the demo hub (``make demo``), a person's first job after their server starts
is a warm start.

The researcher signs in, starts her CPU server, opens the Run as Job dialog (which asks
her server for the flavors) and clicks Submit at once, with the dialog's default flavor.
Her server relays both to the demo's job service, whose runner started ahead for her is
still starting its kernel: the job waits for that kernel and is never told it failed.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from ..support import until
from ..support.hubprocess import REPO_ROOT, BrowserlessUser, DemoHub, copy_log
from ..support.notebooks import notebook_json

pytestmark = pytest.mark.integration

ARTIFACTS = REPO_ROOT / "test-artifacts" / "integration" / "demo-first-job"
# Use the checkout as it is set up: neither .venv nor the lab extension is remade.
AS_SET_UP = ("-o", "setup", "-o", "jupyter_to_job/labextension/package.json")
NOTEBOOK = notebook_json("print('first cell')", "print('second cell')")


@pytest.fixture
def demo(request: pytest.FixtureRequest) -> Iterator[DemoHub]:
    folder = Path(tempfile.mkdtemp(prefix="cgh-demo-first-job-", dir="/tmp"))
    hub = DemoHub("demo", folder / "runtime", make_options=AS_SET_UP)
    try:
        hub.launch()
        hub.wait_ready(timeout=120)
        yield hub
    finally:
        report = getattr(request.node, "report_call", None)
        if report is None or report.failed:
            print(f"--- {copy_log(hub, ARTIFACTS / 'demo.log')} ---")  # type: ignore[arg-type]
            print(hub.log_tail(80))
        hub.close()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_demo_users_first_job_after_her_server_starts_is_a_warm_start(demo: DemoHub):
    # Given the researcher's server just started on the demo hub
    researcher = BrowserlessUser(demo, "researcher")  # type: ignore[arg-type]
    researcher.login()
    started = researcher.spawn_via_api({"profile": "cpu"})
    assert started.status_code in (201, 202), started.text
    researcher.wait_ready()

    def server(method: str, path: str, **kwargs) -> requests.Response:
        headers = {"Authorization": f"token {researcher.token}"}
        return requests.request(
            method, researcher.server_url() + path, headers=headers, timeout=60, **kwargs
        )

    saved = server(
        "PUT", "api/contents/first.ipynb", json={"type": "notebook", "content": NOTEBOOK}
    )
    assert saved.status_code in (200, 201), saved.text

    # When the dialog asks for her flavors and she submits at once with its default
    flavors = server("GET", "jupyter-to-job/api/flavors")
    assert flavors.status_code == 200, flavors.text
    default = next(f["id"] for f in flavors.json()["flavors"] if f.get("default"))
    created = server(
        "POST", "jupyter-to-job/api/jobs", json={"input_path": "first.ipynb", "flavor": default}
    )
    assert created.status_code == 201, created.text
    job_id = created.json()["job_id"]

    def final() -> dict | None:
        job = server("GET", f"jupyter-to-job/api/jobs/{job_id}").json()
        return job if job["status"] in ("COMPLETED", "FAILED", "STOPPED") else None

    job = until(final, f"job {job_id} to end")
    log = server("GET", f"jupyter-to-job/api/jobs/{job_id}/logs").json()["data"]

    # Then the runner started ahead for her takes it, with its kernel, and nothing failed
    assert job["status"] == "COMPLETED", log
    assert "the kernel was started ahead of the job (a warm start)" in log, log
    assert "failed" not in log, log
    assert "second cell" in log, log
