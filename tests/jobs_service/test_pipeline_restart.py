"""Scenario: the job service restarts in the middle of a pipeline (its hub restarts, and the
hub starts the service again), and the pipeline goes on where it was.

The pipeline's state is in the job database: the new service adopts the running job,
follows the pipeline on from there, and makes no job twice.
"""

from __future__ import annotations

from pathlib import Path

from ..support.job_hub import JobHub, wait_for_service
from ..support.notebooks import notebook_json, wait_for_file
from ..support.pipeline_scenes import settled_pipeline


def test_a_pipeline_goes_on_after_the_job_service_restarts(job_hub: JobHub, tmp_path: Path) -> None:
    alice = job_hub.as_("alice")
    gate = tmp_path / "gate"
    body = {
        "name": "Across a restart",
        "stages": [
            {"name": "wait", "jobs": [{"input_path": "wait.ipynb"}]},
            {"name": "after", "jobs": [{"input_path": "after.ipynb"}]},
        ],
        "notebooks": {
            "wait.ipynb": notebook_json(wait_for_file(gate)),
            "after.ipynb": notebook_json("print('after the restart')"),
        },
    }
    created = alice.request("POST", "pipelines", json=body)
    assert created.status_code == 201, created.text
    pipeline_id = created.json()["pipeline_id"]
    first = created.json()["stages"][0]["jobs"][0]["job_id"]
    alice.wait_for(first, "RUNNING")

    # When the hub, and with it the job service, restarts while stage 1 runs
    job_hub.hub.restart()
    wait_for_service(job_hub.service_url)
    during = alice.request("GET", f"pipelines/{pipeline_id}").json()
    assert (during["status"], during["current_stage"]) == ("RUNNING", 0)

    # And stage 1's job finishes afterwards
    gate.write_text("open")
    pipeline = settled_pipeline(alice, pipeline_id)

    # Then the new service went on with stage 2, and each job was made once
    assert pipeline["status"] == "COMPLETED", pipeline["status_message"]
    assert pipeline["stages"][0]["jobs"][0]["job_id"] == first
    second = pipeline["stages"][1]["jobs"][0]["job_id"]
    jobs = alice.request("GET", "jobs", params={"max_items": 100}).json()["jobs"]
    assert sorted(job["job_id"] for job in jobs if job["pipeline_id"] == pipeline_id) == sorted(
        [first, second]
    )
