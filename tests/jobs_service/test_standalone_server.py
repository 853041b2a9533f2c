"""Run as Job without a hub: a real ``jupyter server`` with the extension in standalone mode.

The server runs jobs itself (embedded manager, local executor). Through its REST API a
user saves a notebook, reads its parameters, runs it, follows the log, and saves the
executed notebook into their files; every bad request gets a clear 4xx, and nothing
answers without the server's token.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import nbformat
import pytest

from jupyter_to_job.extension.handlers import extension_handlers

from ..support.notebooks import notebook_json
from ..support.pipeline_scenes import NOTEBOOKS, TEMPLATE_YAML
from ..support.standalone_server import JOB_TIMEOUT, StandaloneServer, standalone_server

MAX_NOTEBOOK_BYTES = 50_000


TRAIN = notebook_json(
    ("learning_rate = 0.1  # how fast\nepochs = 2", ["parameters"]),
    "print('cell one', learning_rate)",
    "for epoch in range(epochs):\n    print('epoch', epoch)",
    "print('cell three')",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneServer]:
    with standalone_server(
        tmp_path_factory.mktemp("standalone"),
        f"--JobsExtensionApp.max_notebook_bytes={MAX_NOTEBOOK_BYTES}",
    ) as running:
        yield running


def test_no_endpoint_answers_without_the_servers_token(server):
    for pattern, _handler in extension_handlers():
        path = (
            pattern.replace("(?P<job_id>[^/]+)", "some-job")
            .replace("(?P<schedule_id>[^/]+)", "some-schedule")
            .replace("(?P<pipeline_id>[^/]+)", "some-pipeline")
            .replace("(?P<fmt>ipynb|html)", "ipynb")
        )
        path = path.removeprefix("jupyter-to-job/api/")
        for method in ("GET", "POST", "PATCH", "DELETE"):
            answer = server.jobs_api(method, path, auth=False)
            assert answer.status_code in (401, 403, 405), (method, path, answer.status_code)


def test_a_notebook_runs_as_a_job_in_the_server_and_its_output_is_saved(server):
    # Given a saved notebook with a parameters cell
    server.put_notebook("train.ipynb", TRAIN)
    config = server.jobs_api("GET", "config").json()
    assert config["mode"] == "standalone" and config["features"]["save_outputs"]
    flavors = server.jobs_api("GET", "flavors").json()["flavors"]
    assert [(f["id"], f["available"], f["gpu"]) for f in flavors] == [("local", True, None)]
    # The Run as Job dialog can prefill its parameters
    found = server.jobs_api("GET", "parameters", params={"path": "train.ipynb"}).json()
    assert [(p["name"], p["default"], p["help"]) for p in found["parameters"]] == [
        ("learning_rate", "0.1", "how fast"),
        ("epochs", "2", ""),
    ]
    # When it runs as a job with other parameters
    created = server.jobs_api(
        "POST", "jobs", json={"input_path": "train.ipynb", "parameters": {"epochs": 3}}
    )
    assert created.status_code == 201, created.text
    job_id = created.json()["job_id"]
    # Then the followed log shows every cell's output, in order, to the end
    followed = server.jobs_api("GET", f"jobs/{job_id}/logs", params={"follow": 1}, stream=True)
    chunks = [json.loads(line) for line in followed.iter_lines() if line]
    assert chunks[-1]["complete"]
    log = "".join(chunk["data"] for chunk in chunks)
    printed = re.findall(r"^\[cell \d+\] (.*)$", log, re.M)
    assert printed == ["cell one 0.1", "epoch 0", "epoch 1", "epoch 2", "cell three"]
    assert server.wait_final(job_id)["status"] == "COMPLETED"
    tail = server.jobs_api("GET", f"jobs/{job_id}/logs", params={"tail": 2}).json()
    assert "completed" in tail["data"]
    # And the executed notebook can be saved into the user's files, not over another file
    saved = server.jobs_api(
        "POST", f"jobs/{job_id}/outputs/ipynb/save", json={"path": "results/train-run.ipynb"}
    )
    assert saved.status_code == 201, saved.text
    executed = nbformat.read(server.root / "results" / "train-run.ipynb", as_version=4)
    assert "cell three" in json.dumps(executed.cells[-1].outputs)
    again = server.jobs_api(
        "POST", f"jobs/{job_id}/outputs/ipynb/save", json={"path": "results/train-run.ipynb"}
    )
    assert again.status_code == 409 and again.json()["reason"] == "already-exists"
    overwritten = server.jobs_api(
        "POST",
        f"jobs/{job_id}/outputs/html/save",
        json={"path": "results/train-run.html", "overwrite": True},
    )
    assert overwritten.status_code == 201, overwritten.text
    download = server.jobs_api("GET", f"jobs/{job_id}/outputs/html")
    assert download.status_code == 200 and "cell three" in download.text
    assert download.headers["Content-Disposition"].startswith('attachment; filename="train-')
    # Stopping a finished job is refused with a sentence; deleting it works
    stop = server.jobs_api("PATCH", f"jobs/{job_id}", json={"status": "STOPPED"})
    assert stop.status_code == 409 and "already finished" in stop.json()["message"]
    assert server.jobs_api("DELETE", f"jobs/{job_id}").status_code == 204
    assert server.jobs_api("GET", f"jobs/{job_id}").status_code == 404


def test_a_rerun_runs_the_jobs_own_notebook_with_new_parameters(server):
    # Given a job that ran train.ipynb as it was then
    server.put_notebook("rerun.ipynb", TRAIN)
    first = server.jobs_api("POST", "jobs", json={"input_path": "rerun.ipynb", "name": "run1"})
    assert first.status_code == 201, first.text
    first_id = first.json()["job_id"]
    assert server.wait_final(first_id)["status"] == "COMPLETED"
    # and a notebook file changed since (its parameters cell and its cells)
    server.put_notebook("rerun.ipynb", notebook_json(("size = 1", ["parameters"]), "print(size)"))
    # When the Rerun dialog asks for the parameters of that job's notebook
    found = server.jobs_api("GET", "parameters", params={"job_id": first_id}).json()
    # Then it gets those of the snapshot the job ran, not of the file as it is now
    assert [(p["name"], p["default"]) for p in found["parameters"]] == [
        ("learning_rate", "0.1"),
        ("epochs", "2"),
    ]
    assert found["path"] == "rerun.ipynb"
    # And the rerun with a new parameter, under a name of its own, runs that snapshot
    again = server.jobs_api(
        "POST",
        "jobs",
        json={
            "input_path": "rerun.ipynb",
            "name": "run1 (2)",
            "parameters": {"learning_rate": 0.5},
            "rerun_of": first_id,
        },
    )
    assert again.status_code == 201, again.text
    rerun = again.json()["job"]
    assert (rerun["name"], rerun["rerun_of"]) == ("run1 (2)", first_id)
    assert server.wait_final(rerun["job_id"])["status"] == "COMPLETED"
    log = server.jobs_api("GET", f"jobs/{rerun['job_id']}/logs").json()["data"]
    assert "cell one 0.5" in log and "cell three" in log
    # The snapshot itself can be read back, as the hub's jobs page shows it
    snapshot = server.jobs_api("GET", f"jobs/{first_id}/input").json()
    assert "learning_rate = 0.1" in "".join(snapshot["cells"][0]["source"])


def test_bad_requests_get_a_clear_4xx(server):
    server.put_notebook("ok.ipynb", notebook_json("1 + 1"))
    server.put_notebook("big.ipynb", notebook_json("x = '" + "a" * MAX_NOTEBOOK_BYTES + "'"))
    (server.root / "notes.txt").write_text("not a notebook")
    (server.root / "broken.ipynb").write_text("{this is not json")
    (server.root / "sub").mkdir(exist_ok=True)
    cases = [
        ("missing file", {"input_path": "missing.ipynb"}, 404, "no-such-file"),
        ("path with ..", {"input_path": "sub/../../ok.ipynb"}, 400, "invalid"),
        ("path outside the root", {"input_path": "/etc/ok.ipynb"}, 400, "invalid"),
        ("a file that is not a notebook", {"input_path": "notes.txt"}, 400, "invalid"),
        ("a broken notebook", {"input_path": "broken.ipynb"}, 400, "not-a-notebook"),
        ("an oversized notebook", {"input_path": "big.ipynb"}, 413, "too-large"),
        ("an unknown flavor", {"input_path": "ok.ipynb", "flavor": "a100"}, 400, "unknown-flavor"),
        ("a misspelt field", {"input_path": "ok.ipynb", "paramaters": {}}, 400, "invalid"),
    ]
    for what, body, status, reason in cases:
        answer = server.jobs_api("POST", "jobs", json=body)
        assert (answer.status_code, answer.json().get("reason")) == (status, reason), (
            what,
            answer.text,
        )
        assert answer.json()["message"][0].isupper(), (what, answer.text)
    invalid = server.jobs_api(
        "POST", "jobs", data=b"{oops", headers={"Content-Type": "application/json"}
    )
    assert invalid.status_code == 400 and invalid.json()["reason"] == "invalid-json"
    outside = server.jobs_api("GET", "parameters", params={"path": "../x.ipynb"})
    assert outside.status_code == 400
    for path in ("../escape.ipynb", "/tmp/escape.ipynb", "results/wrong-suffix.txt"):
        answer = server.jobs_api("POST", "jobs/some-job/outputs/ipynb/save", json={"path": path})
        assert answer.status_code == 400, (path, answer.text)
    assert server.jobs_api("GET", "jobs/some-job").status_code == 404


def test_a_saved_notebook_is_scheduled_paused_and_deleted_in_the_server(server):
    # Given a saved notebook
    server.put_notebook("nightly.ipynb", TRAIN)

    # When its owner schedules it every night at 3 (the notebook read from their files)
    created = server.jobs_api(
        "POST",
        "schedules",
        json={"job": {"input_path": "nightly.ipynb"}, "cron": "0 3 * * *", "max_runs": 3},
    )

    # Then the schedule waits for 3:00, and can be paused, resumed and deleted
    assert created.status_code == 201, created.text
    schedule = created.json()
    assert (schedule["status"], schedule["job"]["flavor"]) == ("ACTIVE", "local")
    assert schedule["next_run_time"] is not None
    path = f"schedules/{schedule['schedule_id']}"
    listed = server.jobs_api("GET", "schedules").json()["schedules"]
    assert [s["schedule_id"] for s in listed] == [schedule["schedule_id"]]
    paused = server.jobs_api("PATCH", path, json={"status": "PAUSED"}).json()
    assert paused["status"] == "PAUSED"
    assert server.jobs_api("PATCH", path, json={"status": "ACTIVE"}).json()["status"] == "ACTIVE"
    assert server.jobs_api("DELETE", path).status_code == 204
    assert server.jobs_api("GET", path).status_code == 404

    # and a bad schedule is a 400 with a sentence
    bad = server.jobs_api(
        "POST", "schedules", json={"job": {"input_path": "nightly.ipynb"}, "interval_seconds": 5}
    )
    assert bad.status_code == 400
    assert "an interval of 5 seconds is too short" in bad.json()["message"]


def test_a_saved_pipeline_template_runs_again_with_other_values_in_the_server(server):
    # Given the pipeline scene's notebooks and its template (mode: fail) in the user's files
    for path, nb in NOTEBOOKS.items():
        server.put_notebook(path, json.loads(nbformat.writes(nb)))
    saved = server.request(
        "PUT",
        "api/contents/evaluate.pipeline.yaml",
        json={"type": "file", "format": "text", "content": TEMPLATE_YAML},
    )
    assert saved.status_code in (200, 201), saved.text

    # The Jobs panel reads the template back as a pipeline
    template = server.jobs_api(
        "GET", "pipeline-templates", params={"path": "evaluate.pipeline.yaml"}
    )
    assert template.status_code == 200, template.text
    assert template.json()["parameters"] == {"mode": "fail"}
    assert template.json()["template_path"] == "evaluate.pipeline.yaml"
    assert [stage["name"] for stage in template.json()["stages"]] == [
        "prepare",
        "evaluate",
        "report",
    ]

    # When the user runs the template with mode 'pass' (its notebooks read from their files)
    created = server.jobs_api(
        "POST",
        "pipelines",
        json={"template_path": "evaluate.pipeline.yaml", "parameters": {"mode": "pass"}},
    )
    assert created.status_code == 201, created.text
    path = f"pipelines/{created.json()['pipeline_id']}"
    deadline = time.monotonic() + JOB_TIMEOUT
    pipeline = created.json()
    while pipeline["status"] not in ("COMPLETED", "FAILED", "STOPPED"):
        assert time.monotonic() < deadline, pipeline
        time.sleep(0.2)
        pipeline = server.jobs_api("GET", path).json()

    # Then every stage completed, and stage 3 read stage 1's file from the shared folder
    assert pipeline["status"] == "COMPLETED", pipeline["status_message"]
    assert (pipeline["template_path"], pipeline["parameters"]) == (
        "evaluate.pipeline.yaml",
        {"mode": "pass"},
    )
    assert (server.root / "report.txt").read_text() == "made by stage 1, read by stage 3"
    assert (server.root / "pipelines/evaluate-the-model/data.txt").is_file()
    listed = server.jobs_api("GET", "pipelines").json()["pipelines"]
    assert pipeline["pipeline_id"] in [p["pipeline_id"] for p in listed]
    assert server.jobs_api("DELETE", path).status_code == 204

    # And a pipeline is saved as a template once, then only with overwrite
    request = {"path": "copy.pipeline.json", "pipeline": template.json()}
    first = server.jobs_api("POST", "pipeline-templates", json=request)
    assert first.status_code == 201, first.text
    assert first.json()["path"] == "copy.pipeline.json"
    again = server.jobs_api("POST", "pipeline-templates", json=request)
    assert again.status_code == 409
    assert "already exists" in again.json()["message"]
    copy = server.jobs_api("GET", "pipeline-templates", params={"path": "copy.pipeline.json"})
    assert copy.json()["stages"] == template.json()["stages"]

    # And a file that is not a template is a 400 with a sentence
    server.request(
        "PUT",
        "api/contents/broken.pipeline.yaml",
        json={"type": "file", "format": "text", "content": "name: x\nstages: []\n"},
    )
    broken = server.jobs_api("GET", "pipeline-templates", params={"path": "broken.pipeline.yaml"})
    assert broken.status_code == 400
    assert "a pipeline needs at least one stage" in broken.json()["message"]
    wrong = server.jobs_api("GET", "pipeline-templates", params={"path": "train.ipynb"})
    assert wrong.status_code == 400
    assert "is not a pipeline template" in wrong.json()["message"]


def test_the_owners_default_notifications_are_kept_by_the_server(server):
    # Given a server without a hub: its embedded manager keeps the owner's default
    before = server.jobs_api("GET", "notification-settings")
    assert before.status_code == 200, before.text
    assert before.json()["webhook_secret_set"] is False

    # When the owner saves a webhook for failed jobs
    hook = {"webhook_url": "https://hooks.example.org/jobs", "on": ["failed"]}
    saved = server.jobs_api("PUT", "notification-settings", json={"default": hook})

    # Then the webhook secret comes back in this answer only, and the default reads back
    assert saved.status_code == 200, saved.text
    assert saved.json()["webhook_secret"]
    read_back = server.jobs_api("GET", "notification-settings").json()
    assert read_back["webhook_secret"] is None and read_back["webhook_secret_set"] is True
    assert read_back["default"]["webhook_url"] == hook["webhook_url"]
    assert read_back["default"]["on"] == ["failed"]

    # and a plain-http webhook is a 400 with a sentence
    bad = {"default": {"webhook_url": "http://hooks.example.org/jobs"}}
    refused = server.jobs_api("PUT", "notification-settings", json=bad)
    assert refused.status_code == 400, refused.text
    assert "must start with https://" in refused.json()["message"]
