"""Scenarios: schedules through a real JupyterHub's job service (``api/schedules``).

Each person calls with the token their single-user server holds. A schedule is its owner's
alone: someone else's answers 404 and stays as it was. Bad input is a 400 with a sentence.
The slots themselves (what runs when) are tested with a hand-moved clock in
tests/jobs/test_schedules.py; here the schedules are set far from now so none runs.
"""

from __future__ import annotations

import pytest

from jupyter_to_job.rest import ApiError
from jupyter_to_job.schedules import CreateSchedule

from ..support.job_hub import JobHub
from ..support.job_service_client import JobServiceClient as ServiceRelay
from ..support.notebooks import notebook_json

NIGHTLY = {
    "job": {"input_path": "nightly.ipynb", "flavor": "cpu-job"},
    "name": "Nightly report",
    "cron": "0 3 * * *",
    "timezone": "Asia/Taipei",
    "window": {"start": "02:00", "end": "04:00"},
    "max_runs": 5,
}


def create(job_hub: JobHub, who: str, **changes: object):  # type: ignore[no-untyped-def]
    body = {**NIGHTLY, **changes, "notebook": notebook_json("print('report')")}
    return job_hub.as_(who).request("POST", "schedules", json=body)


def test_an_owner_creates_pauses_resumes_and_deletes_a_schedule(job_hub: JobHub) -> None:
    alice = job_hub.as_("alice")

    created = create(job_hub, "alice")
    assert created.status_code == 201, created.text
    schedule = created.json()
    assert (schedule["owner"], schedule["status"], schedule["runs"]) == ("alice", "ACTIVE", 0)
    assert schedule["next_run_time"] is not None
    assert schedule["job"]["deadline_seconds"] is not None  # the flavor's default, checked
    path = f"schedules/{schedule['schedule_id']}"
    listed = alice.request("GET", "schedules").json()["schedules"]
    assert [s["schedule_id"] for s in listed] == [schedule["schedule_id"]]
    # Its flavor is named for people where it is shown, as it was made and as listed
    assert schedule["flavor_title"] == listed[0]["flavor_title"] == "CPU job"

    paused = alice.request("PATCH", path, json={"status": "PAUSED"})
    assert paused.status_code == 200, paused.text
    assert (paused.json()["status"], paused.json()["next_run_time"]) == ("PAUSED", None)
    resumed = alice.request("PATCH", path, json={"status": "ACTIVE"}).json()
    assert resumed["status"] == "ACTIVE" and resumed["next_run_time"] is not None

    assert alice.request("DELETE", path).status_code == 204
    gone = alice.request("GET", path)
    assert gone.status_code == 404
    assert gone.json()["message"].startswith("There is no schedule")


def test_another_persons_schedule_is_a_404_and_stays_as_it_was(job_hub: JobHub) -> None:
    schedule = create(job_hub, "alice").json()
    path = f"schedules/{schedule['schedule_id']}"

    for who in ("bob", "ines"):  # a classmate, and the course's instructor
        other = job_hub.as_(who)
        assert other.request("GET", path).status_code == 404
        assert other.request("PATCH", path, json={"status": "PAUSED"}).status_code == 404
        assert other.request("DELETE", path).status_code == 404
        assert schedule["schedule_id"] not in [
            s["schedule_id"] for s in other.request("GET", "schedules").json()["schedules"]
        ]

    still = job_hub.as_("alice").request("GET", path).json()
    assert still["status"] == "ACTIVE"


@pytest.mark.parametrize(
    ("changes", "sentence"),
    [
        ({"cron": "every night"}, "'every night' is not a cron expression"),
        ({"cron": None, "interval_seconds": 5}, "an interval of 5 seconds is too short"),
        (
            {"window": {"start": "04:00", "end": "02:00"}},
            "the window ends (02:00) before it starts (04:00)",
        ),
        ({"timezone": "Atlantis/Capital"}, "'Atlantis/Capital' is not a time zone"),
        ({"max_runs": 0}, "max_runs"),
    ],
)
def test_bad_input_is_a_400_with_a_sentence(job_hub: JobHub, changes: dict, sentence: str) -> None:
    answer = create(job_hub, "alice", **changes)

    assert answer.status_code == 400, answer.text
    assert answer.json()["message"].startswith("The schedule has errors:")
    assert sentence in answer.json()["message"]


def test_a_flavor_not_offered_to_the_owner_is_refused_when_the_schedule_is_made(
    job_hub: JobHub,
) -> None:
    # olga teaches PHYS201, not ML101: the ML101 course GPU is not hers
    answer = create(job_hub, "olga", job={"input_path": "nightly.ipynb", "flavor": "course-gpu"})

    assert answer.status_code == 403, answer.text
    assert "Choose another flavor" in answer.json()["message"]
    assert job_hub.as_("olga").request("GET", "schedules").json()["schedules"] == []


async def test_a_users_server_relays_schedules_to_the_job_service(job_hub: JobHub) -> None:
    # Given alice's and bob's servers, each relaying with its own server token
    service = job_hub.service_url.removesuffix("api/")
    alice = ServiceRelay(service, job_hub.tokens["alice"])
    bob = ServiceRelay(service, job_hub.tokens["bob"])
    request = CreateSchedule.model_validate(NIGHTLY)

    # When alice schedules a notebook from her server
    created = await alice.create_schedule(request, notebook_json("print('report')"))

    # Then the service keeps it as hers; bob's server gets the service's 404 sentence
    assert (created["owner"], created["status"]) == ("alice", "ACTIVE")
    described = await alice.describe_schedule(created["schedule_id"])
    assert described["schedule_id"] == created["schedule_id"]
    with pytest.raises(ApiError) as refused:
        await bob.describe_schedule(created["schedule_id"])
    assert refused.value.status == 404
    assert refused.value.message.startswith("There is no schedule")
    await alice.delete_schedule(created["schedule_id"])
    left = (await alice.list_schedules())["schedules"]
    assert created["schedule_id"] not in [s["schedule_id"] for s in left]
