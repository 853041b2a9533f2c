"""Scenario: a new user's first job starts warm, even when it comes while its runner starts.

The Run as Job dialog asks for the flavors when it opens (which starts a runner ahead for
the person), and a person who clicks Submit at once sends the job while that runner is
still starting its kernel. The job waits for that kernel; it is never told that the
kernel started ahead failed.
"""

from __future__ import annotations

from pathlib import Path

from ..support.notebooks import notebook_json
from ..support.standalone_server import standalone_server

NOTEBOOK = notebook_json("print('first cell')", "print('second cell')")


def test_the_first_job_after_the_server_starts_is_a_warm_start(tmp_path: Path):
    # Given a fresh standalone server (an empty data folder, as on Binder)
    with standalone_server(tmp_path) as server:
        server.put_notebook("example.ipynb", NOTEBOOK)

        # When the dialog asks for the flavors and the job is submitted at once
        assert server.jobs_api("GET", "flavors").status_code == 200
        created = server.jobs_api("POST", "jobs", json={"input_path": "example.ipynb"})
        assert created.status_code == 201, created.text
        job = server.wait_final(created.json()["job_id"])
        log = server.jobs_api("GET", f"jobs/{job['job_id']}/logs").json()["data"]

    # Then it ran in the runner started ahead, in its kernel, and nothing failed
    assert job["status"] == "COMPLETED", log
    assert "takes the job" in log, log
    assert "the kernel was started ahead of the job (a warm start)" in log, log
    assert "failed" not in log, log
    assert "[cell 1] second cell" in log, log


def test_a_hub_users_first_job_is_a_warm_start(job_hub):
    # Given a person whose server just started asks for the flavors (the dialog opens)
    service = job_hub.as_("pete")
    flavors = service.request("GET", "flavors")
    assert flavors.status_code == 200, flavors.text
    default = next(f["id"] for f in flavors.json()["flavors"] if f.get("default"))

    # When they submit at once, with the dialog's default flavor
    created = service.create(NOTEBOOK, flavor=default)
    assert created.status_code == 201, created.text
    job = service.wait_for(created.json()["job_id"], "COMPLETED", "FAILED", "STOPPED")
    log = service.request("GET", f"jobs/{job['job_id']}/logs").json()["data"]

    # Then the job service's runner started ahead takes it, with its kernel
    assert job["status"] == "COMPLETED", log
    assert "the kernel was started ahead of the job (a warm start)" in log, log
    assert "failed" not in log, log
