"""Scenarios: pipelines through a real JupyterHub's job service (``api/pipelines``).

Each person calls with the token their single-user server holds. The jobs are real local
jobs (runners and kernels). A pipeline is its owner's alone: someone else's answers 404 and
stays as it was. Bad input is a 400 whose sentence names the field.
"""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_to_job.pipelines import CreatePipeline
from jupyter_to_job.rest import ApiError

from ..support.job_hub import JobHub
from ..support.job_service_client import JobServiceClient as ServiceRelay
from ..support.notebooks import notebook_json
from ..support.pipeline_scenes import notebooks_json, pipeline_request, settled_pipeline


def test_a_failing_job_stops_its_sibling_and_skips_the_last_stage(job_hub: JobHub) -> None:
    alice = job_hub.as_("alice")

    # When alice runs the three-stage pipeline with mode 'fail'
    created = alice.request(
        "POST", "pipelines", json={**pipeline_request("fail"), "notebooks": notebooks_json()}
    )
    assert created.status_code == 201, created.text
    pipeline_id = created.json()["pipeline_id"]
    pipeline = settled_pipeline(alice, pipeline_id)

    # Then the API says which job failed in which cell, that its sibling was stopped for
    # it, and that the last stage was skipped without a job
    assert pipeline["status"] == "FAILED"
    assert pipeline["status_message"] == (
        "Stage 'evaluate' failed: in 'evaluate.ipynb', cell 3 raised ValueError: cannot "
        "evaluate in mode fail. The rest was stopped or skipped."
    )
    assert [stage["status"] for stage in pipeline["stages"]] == ["COMPLETED", "FAILED", "SKIPPED"]
    failing, watching = pipeline["stages"][1]["jobs"]
    assert failing["status"] == "FAILED"
    assert (failing["error"]["ename"], failing["error"]["evalue"]) == (
        "ValueError",
        "cannot evaluate in mode fail",
    )
    assert watching["status"] == "STOPPED"
    assert watching["status_message"] == (
        "Stopped because 'evaluate.ipynb' of stage 'evaluate' failed."
    )
    skipped = pipeline["stages"][2]["jobs"][0]
    assert (skipped["status"], skipped["job_id"]) == ("SKIPPED", None)
    assert pipeline["shared_folder"] == "pipelines/evaluate-the-model"
    assert (pipeline["own"], pipeline["can_delete"], pipeline["can_stop"]) == (True, True, False)
    # Each job's flavor has its title for people, where the list shows it too
    assert {job["flavor_title"] for stage in pipeline["stages"] for job in stage["jobs"]} == {
        "CPU job"
    }
    listed_titles = [
        job["flavor_title"]
        for p in alice.request("GET", "pipelines").json()["pipelines"]
        if p["pipeline_id"] == pipeline_id
        for stage in p["stages"]
        for job in stage["jobs"]
    ]
    assert listed_titles and set(listed_titles) == {"CPU job"}

    # And each job made is an ordinary job of hers, labelled with the pipeline
    job = alice.job(watching["job_id"])
    assert (job["status"], job["pipeline_id"]) == ("STOPPED", pipeline_id)
    listed = alice.request("GET", "pipelines").json()["pipelines"]
    assert pipeline_id in [p["pipeline_id"] for p in listed]

    # And bob sees none of it and changes nothing
    bob = job_hub.as_("bob")
    path = f"pipelines/{pipeline_id}"
    assert bob.request("GET", path).status_code == 404
    assert bob.request("PATCH", path, json={"status": "STOPPED"}).status_code == 404
    assert bob.request("DELETE", path).status_code == 404
    assert pipeline_id not in [
        p["pipeline_id"] for p in bob.request("GET", "pipelines").json()["pipelines"]
    ]

    # When alice deletes the finished pipeline, it goes and its jobs stay
    assert alice.request("DELETE", path).status_code == 204
    gone = alice.request("GET", path)
    assert gone.status_code == 404
    assert gone.json()["message"].startswith("There is no pipeline")
    assert alice.job(failing["job_id"])["status"] == "FAILED"


def test_stopping_a_pipeline_stops_its_running_job_and_skips_the_rest(job_hub: JobHub) -> None:
    alice = job_hub.as_("alice")
    body = {
        "name": "Long one",
        "stages": [
            {"name": "spin", "jobs": [{"input_path": "spin.ipynb"}]},
            {"name": "after", "jobs": [{"input_path": "after.ipynb"}]},
        ],
        "notebooks": {
            "spin.ipynb": notebook_json("import time\nwhile True:\n    time.sleep(0.1)"),
            "after.ipynb": notebook_json("print('after')"),
        },
    }
    created = alice.request("POST", "pipelines", json=body)
    assert created.status_code == 201, created.text
    pipeline = created.json()
    path = f"pipelines/{pipeline['pipeline_id']}"
    alice.wait_for(pipeline["stages"][0]["jobs"][0]["job_id"], "RUNNING")

    # A running pipeline cannot be deleted
    refused = alice.request("DELETE", path)
    assert refused.status_code == 409, refused.text
    assert "stop it first" in refused.json()["message"]

    # When she stops it
    stopping = alice.request("PATCH", path, json={"status": "STOPPED"})
    assert stopping.status_code == 200, stopping.text
    assert stopping.json()["status"] in ("STOPPING", "STOPPED")
    stopped = settled_pipeline(alice, pipeline["pipeline_id"])

    # Then its job stopped, the next stage never started, and it says why
    assert stopped["status"] == "STOPPED"
    assert stopped["stages"][0]["jobs"][0]["status"] == "STOPPED"
    assert stopped["stages"][1]["status"] == "SKIPPED"
    assert stopped["stages"][1]["jobs"][0]["job_id"] is None
    assert stopped["status_message"].startswith("Stopped by its owner")
    again = alice.request("PATCH", path, json={"status": "STOPPED"})
    assert again.status_code == 409, again.text
    assert alice.request("PATCH", path, json={"status": "RUNNING"}).status_code == 400


def _stage(name: str, *paths: str, **job: Any) -> dict[str, Any]:
    return {"name": name, "jobs": [{"input_path": path, **job} for path in paths]}


@pytest.mark.parametrize(
    ("changes", "field", "sentence"),
    [
        ({"stages": []}, "stages", "a pipeline needs at least one stage"),
        (
            {"stages": [_stage("wide", *[f"n{i}.ipynb" for i in range(11)])]},
            "stages.0.jobs",
            "a stage runs at most 10 jobs at once, not 11",
        ),
        (
            {"stages": [_stage("up", "../secret.ipynb")]},
            "stages.0.jobs.0.input_path",
            "the notebook path must not contain '..'",
        ),
        (
            {"stages": [_stage("one", "a.ipynb"), _stage("two", "b.ipynb", flavor="gpu-xxl")]},
            "stages.1.jobs.0.flavor",
            "There is no job flavor 'gpu-xxl' here",
        ),
        ({"shared_folder": "/etc"}, "shared_folder", "must be relative to your home folder"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    job_hub: JobHub, changes: dict, field: str, sentence: str
) -> None:
    body = {
        "name": "Bad",
        "stages": [_stage("one", "a.ipynb")],
        **changes,
    }
    paths = [job["input_path"] for stage in body["stages"] for job in stage["jobs"]]
    body["notebooks"] = {path: notebook_json("print(1)") for path in paths}

    answer = job_hub.as_("alice").request("POST", "pipelines", json=body)

    assert answer.status_code == 400, answer.text
    assert sentence in answer.json()["message"]
    assert field in [problem["field"] for problem in answer.json()["errors"]]
    assert field in answer.json()["message"] or "Stage 'two'" in answer.json()["message"]


async def test_a_users_server_relays_pipelines_to_the_job_service(job_hub: JobHub) -> None:
    # Given alice's and bob's servers, each relaying with its own server token
    service = job_hub.service_url.removesuffix("api/")
    alice = ServiceRelay(service, job_hub.tokens["alice"])
    bob = ServiceRelay(service, job_hub.tokens["bob"])
    request = CreatePipeline.model_validate(
        {"name": "Relayed", "stages": [{"name": "one", "jobs": [{"input_path": "hi.ipynb"}]}]}
    )

    # When alice runs a pipeline from her server
    created = await alice.create_pipeline(request, {"hi.ipynb": notebook_json("print('hi')")})

    # Then the service keeps it as hers; bob's server gets the service's 404 sentence
    assert (created["owner"], created["name"]) == ("alice", "Relayed")
    listed = await alice.list_pipelines()
    assert created["pipeline_id"] in [p["pipeline_id"] for p in listed["pipelines"]]
    with pytest.raises(ApiError) as refused:
        await bob.describe_pipeline(created["pipeline_id"])
    assert refused.value.status == 404
    assert refused.value.message.startswith("There is no pipeline")


def test_a_pipeline_is_scheduled_with_each_job_checked_now(job_hub: JobHub) -> None:
    alice = job_hub.as_("alice")
    schedule = {"cron": "0 3 * * *", "timezone": "UTC", "notebooks": notebooks_json()}

    # When alice schedules the pipeline every night at 3
    created = alice.request(
        "POST", "schedules", json={**schedule, "pipeline": pipeline_request("pass")}
    )

    # Then the schedule names the pipeline, each job with the flavor and deadline admitted
    assert created.status_code == 201, created.text
    saved = created.json()
    assert (saved["pipeline_name"], saved["job"], saved["status"]) == (
        "Evaluate the model",
        None,
        "ACTIVE",
    )
    jobs = [job for stage in saved["pipeline"]["stages"] for job in stage["jobs"]]
    assert all(job["flavor"] and job["deadline_seconds"] for job in jobs)
    assert alice.request("DELETE", f"schedules/{saved['schedule_id']}").status_code == 204

    # And a job with a flavor that is not hers is refused before anything is saved
    wrong = pipeline_request("pass")
    wrong["stages"][1]["jobs"][0]["flavor"] = "research-gpu"
    refused = alice.request("POST", "schedules", json={**schedule, "pipeline": wrong})
    assert refused.status_code == 403, refused.text
    assert "Choose another flavor" in refused.json()["message"]
    assert alice.request("GET", "schedules").json()["schedules"] == []
