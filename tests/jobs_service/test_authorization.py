"""Who may do what with whose jobs, over every endpoint of the job service, on a real hub.

Bob has a finished job. Each person calls each endpoint about it with the token their own
server would hold; the answer must be what the rules in jupyter_to_job/access.py say:
students see only their own jobs (another's is a 403 that tells nothing about it),
instructors read their students' jobs but never stop or delete them, admins do all.
"""

from __future__ import annotations

import pytest

from jupyter_to_job.hub import job_server_token_scopes
from jupyter_to_job.scopes import access_scope

from ..support.job_hub import MAX_NOTEBOOK_BYTES, JobHub
from ..support.notebooks import notebook_json

pytestmark = pytest.mark.integration

PEOPLE = ["anonymous", "alice", "bob", "ines", "olga", "tara", "root"]


QUICK = notebook_json("print('bob was here')")


@pytest.fixture(scope="module")
def bobs_job(job_hub: JobHub) -> str:
    """A finished job of Bob's, with its log and both outputs."""
    bob = job_hub.as_("bob")
    created = bob.create(QUICK, input_path="homework.ipynb", flavor="cpu-job")
    assert created.status_code == 201, created.text
    job_id = created.json()["job_id"]
    assert bob.wait_for(job_id, "COMPLETED", "FAILED")["status"] == "COMPLETED"
    return job_id


def listed(response) -> set[str]:
    return {job["job_id"] for job in response.json()["jobs"]}


# endpoint -> expected status per person (bob's finished job is {job})
READS = {
    ("GET", "jobs/{job}"): [401, 403, 200, 200, 403, 200, 200],
    ("GET", "jobs/{job}/logs"): [401, 403, 200, 200, 403, 200, 200],
    ("GET", "jobs/{job}/logs?tail=5"): [401, 403, 200, 200, 403, 200, 200],
    ("GET", "jobs/{job}/logs?follow=1"): [401, 403, 200, 200, 403, 200, 200],
    ("GET", "jobs/{job}/outputs/ipynb"): [401, 403, 200, 200, 403, 200, 200],
    ("GET", "jobs/{job}/outputs/html"): [401, 403, 200, 200, 403, 200, 200],
    ("GET", "jobs?owner=bob"): [401, 403, 200, 200, 403, 200, 200],
    ("GET", "flavors"): [401, 200, 200, 200, 200, 200, 200],
    ("GET", "config"): [401, 200, 200, 200, 200, 200, 200],
    ("GET", "health"): [200, 200, 200, 200, 200, 200, 200],
    # Changing bob's finished job: 409 is "allowed, but it has finished already".
    ("PATCH", "jobs/{job}"): [401, 403, 409, 403, 403, 403, 409],
    ("DELETE", "jobs/{job}"): [401, 403, None, 403, 403, 403, None],  # None: see below
    ("POST", "jobs"): [401, None, None, None, None, 403, None],
}
CASES = [
    (method, path, person, status)
    for (method, path), statuses in READS.items()
    for person, status in zip(PEOPLE, statuses, strict=True)
    if status is not None
]


@pytest.mark.parametrize(
    ("method", "path", "person", "expected"),
    CASES,
    ids=[f"{m} {p} as {who}" for m, p, who, _ in CASES],
)
def test_each_person_gets_what_the_rules_allow_on_each_endpoint(
    job_hub, bobs_job, method, path, person, expected
):
    service = job_hub.as_(None if person == "anonymous" else person)
    kwargs = {}
    if method == "PATCH":
        kwargs["json"] = {"status": "STOPPED"}
    if method == "POST":
        kwargs["json"] = {"input_path": "x.ipynb", "notebook": QUICK}
    response = service.request(method, path.format(job=bobs_job), **kwargs)
    assert response.status_code == expected, response.text
    if expected >= 400:
        body = response.json()
        assert body["message"].endswith((".", "!", "?")) and body["reason"]
    if expected == 403 and person in ("alice", "olga") and "{job}" in path:
        # Someone else's job: refused without a word about it (owner, name, state)
        body = response.json()
        assert body["reason"] == "not-yours"
        assert not {"bob", "homework", "COMPLETED"} & set(body["message"].replace(".", "").split())
        missing = "00000000-0000-4000-8000-000000000000"
        other = service.request(method, path.format(job=missing), **kwargs)
        assert other.status_code == 404  # a job that does not exist


@pytest.mark.parametrize(
    ("person", "sees_bobs_job"),
    [
        ("alice", False),
        ("bob", True),
        ("ines", True),
        ("olga", False),
        ("tara", True),
        ("root", True),
    ],
)
def test_job_lists_hold_exactly_the_jobs_each_person_may_read(
    job_hub, bobs_job, person, sees_bobs_job
):
    response = job_hub.as_(person).request("GET", "jobs")
    assert response.status_code == 200, response.text
    assert (bobs_job in listed(response)) is sees_bobs_job
    owners = {job["owner"] for job in response.json()["jobs"]}
    if person in ("alice", "bob"):
        assert owners <= {person}


def test_an_instructor_reads_the_whole_log_and_output_of_a_students_job(job_hub, bobs_job):
    ines = job_hub.as_("ines")
    log = ines.request("GET", f"jobs/{bobs_job}/logs").json()
    assert "bob was here" in log["data"] and log["complete"]
    executed = ines.request("GET", f"jobs/{bobs_job}/outputs/ipynb")
    assert "bob was here" in executed.text
    assert 'filename="homework-' in executed.headers["Content-Disposition"]
    html = ines.request("GET", f"jobs/{bobs_job}/outputs/html")
    assert html.headers["Content-Security-Policy"] == "sandbox"  # user content, hub origin


def test_a_running_job_is_stopped_and_deleted_only_by_its_owner_or_an_admin(job_hub, tmp_path):
    # Given bob's job waiting in a cell
    gate = tmp_path / "never-opened"
    waiting = notebook_json(
        f"import os, time\nwhile not os.path.exists({str(gate)!r}):\n    time.sleep(0.1)"
    )
    bob, root = job_hub.as_("bob"), job_hub.as_("root")
    job_id = bob.create(waiting, input_path="long.ipynb", flavor="cpu-job").json()["job_id"]
    bob.wait_for(job_id, "RUNNING")
    # When bob tries to delete it while it runs, he is told to stop it first
    early = bob.request("DELETE", f"jobs/{job_id}")
    assert early.status_code == 409 and early.json()["reason"] == "not-finished"
    # And the instructor and the TA may not stop it, nor may students of any course
    for person, status in [("ines", 403), ("tara", 403), ("alice", 403), ("olga", 403)]:
        answer = job_hub.as_(person).request("PATCH", f"jobs/{job_id}", json={"status": "STOPPED"})
        assert answer.status_code == status, (person, answer.text)
    assert bob.job(job_id)["status"] == "RUNNING"
    # Then the admin stops it, and deletes it once it has stopped
    stopped = root.request("PATCH", f"jobs/{job_id}", json={"status": "STOPPED"})
    assert stopped.status_code == 200, stopped.text
    assert bob.wait_for(job_id, "STOPPED", "FAILED", "COMPLETED")["status"] == "STOPPED"
    for person, status in [("ines", 403), ("alice", 403)]:
        assert job_hub.as_(person).request("DELETE", f"jobs/{job_id}").status_code == status
    assert root.request("DELETE", f"jobs/{job_id}").status_code == 204
    assert bob.request("GET", f"jobs/{job_id}").status_code == 404


def test_the_owner_deletes_their_finished_job(job_hub):
    alice = job_hub.as_("alice")
    job_id = alice.create(notebook_json("1 + 1"), flavor="cpu-job").json()["job_id"]
    alice.wait_for(job_id, "COMPLETED", "FAILED")
    assert alice.request("DELETE", f"jobs/{job_id}").status_code == 204
    assert alice.request("GET", f"jobs/{job_id}/logs").status_code == 404


def test_flavors_follow_the_catalog_entitlements_of_each_person(job_hub):
    def flavors(person: str) -> dict[str, dict]:
        answer = job_hub.as_(person).request("GET", "flavors").json()
        return {flavor["id"]: flavor for flavor in answer["flavors"]}

    alice, olga, root = flavors("alice"), flavors("olga"), flavors("root")
    assert alice["course-gpu"]["available"] and alice["course-gpu"]["gpu"] == "1/4 of a GPU, 4 GiB"
    assert not alice["research-gpu"]["available"]
    assert "not offered to you" in alice["research-gpu"]["reason"]
    assert not olga["course-gpu"]["available"]
    assert all(flavor["available"] for flavor in root.values())
    assert alice["cpu-job"]["default"]
    # A researcher's dialog starts on their allocation's GPU, not on "CPU job"
    rhea = flavors("rhea")
    assert rhea["research-gpu"]["available"] and rhea["research-gpu"]["default"]
    assert not rhea["cpu-job"]["default"]


def test_a_researchers_job_that_names_no_flavor_runs_on_their_allocations_gpu(job_hub):
    created = job_hub.as_("rhea").create(notebook_json("1 + 1"))
    assert created.status_code == 201, created.text
    assert job_hub.as_("rhea").job(created.json()["job_id"])["flavor"] == "research-gpu"


def test_a_student_cannot_run_a_job_on_a_flavor_they_are_not_entitled_to(job_hub):
    # Given alice, a student of ML101, and olga, who teaches another course
    for person, flavor in [("alice", "research-gpu"), ("olga", "course-gpu")]:
        # When they create a job on a flavor their catalog entitlements do not give them
        answer = job_hub.as_(person).create(QUICK, flavor=flavor)
        # Then it is refused with the reason, and nothing runs
        assert answer.status_code == 403, answer.text
        assert answer.json()["reason"] == "not-entitled"
        assert "not offered to you" in answer.json()["message"]
    # While alice may use her course's GPU flavor, and gets a share of the GPU
    granted = job_hub.as_("alice").create(QUICK, flavor="course-gpu")
    assert granted.status_code == 201, granted.text
    job = job_hub.as_("alice").wait_for(granted.json()["job_id"], "COMPLETED", "FAILED")
    assert job["status"] == "COMPLETED" and job["gpu"]["device_ids"] == ["sim-0"]
    assert job["deadline_seconds"] == 600  # the flavor's default deadline


def test_a_repeated_idempotency_token_returns_the_first_job(job_hub):
    alice = job_hub.as_("alice")
    first = alice.create(QUICK, flavor="cpu-job", idempotency_token="double-click-1")
    again = alice.create(QUICK, flavor="cpu-job", idempotency_token="double-click-1")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["job_id"] == first.json()["job_id"] and not again.json()["created"]
    alice.wait_for(first.json()["job_id"], "COMPLETED", "FAILED")


def test_tokens_without_the_right_scopes_are_refused(job_hub):
    # A token that may reach the service but holds no job scope
    bare = job_hub.as_("alice")
    bare.token = job_hub.token("alice", [access_scope()])
    answer = bare.request("GET", "jobs")
    assert answer.status_code == 403 and answer.json()["reason"] == "missing-scope"
    # A token with job scopes but without access to the service
    no_access = job_hub.as_("alice")
    scopes = [s for s in job_server_token_scopes() if not s.startswith("access:services")]
    no_access.token = job_hub.token("alice", scopes)
    answer = no_access.request("GET", "jobs")
    assert answer.status_code == 403 and answer.json()["reason"] == "forbidden"
    # A token the hub does not know
    forged = job_hub.as_(None)
    forged.token = "0" * 32
    assert forged.request("GET", "jobs").status_code == 401


BAD_REQUESTS = [
    ("invalid JSON", b"{not json", 400, "invalid-json"),
    ("a body that is not an object", b"[1, 2]", 400, "invalid-json"),
    (
        "a misspelt field",
        {"input_path": "a.ipynb", "flavour": "x", "notebook": QUICK},
        400,
        "invalid",
    ),
    ("a path with ..", {"input_path": "../a.ipynb", "notebook": QUICK}, 400, "invalid"),
    ("a path outside the root", {"input_path": "/etc/a.ipynb", "notebook": QUICK}, 400, "invalid"),
    (
        "a file that is not a notebook",
        {"input_path": "data.csv", "notebook": QUICK},
        400,
        "invalid",
    ),
    (
        "content that is not a notebook",
        {"input_path": "a.ipynb", "notebook": {"x": 1}},
        400,
        "not-a-notebook",
    ),
    ("no notebook content", {"input_path": "a.ipynb"}, 400, "invalid"),
    (
        "an unknown flavor",
        {"input_path": "a.ipynb", "notebook": QUICK, "flavor": "huge"},
        400,
        "unknown-flavor",
    ),
    (
        "a deadline beyond the flavor's",
        {
            "input_path": "a.ipynb",
            "notebook": QUICK,
            "flavor": "course-gpu",
            "deadline_seconds": 7200,
        },
        400,
        "deadline-too-long",
    ),
    (
        "an oversized notebook",
        {
            "input_path": "a.ipynb",
            "notebook": notebook_json("x = '" + "a" * MAX_NOTEBOOK_BYTES + "'"),
        },
        413,
        "too-large",
    ),
]


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
def test_bad_create_requests_get_a_clear_4xx(job_hub, body, status, reason):
    alice = job_hub.as_("alice")
    if isinstance(body, bytes):
        answer = alice.request(
            "POST", "jobs", data=body, headers={"Content-Type": "application/json"}
        )
    else:
        answer = alice.request("POST", "jobs", json=body)
    assert answer.status_code == status, answer.text
    error = answer.json()
    assert error["reason"] == reason
    assert len(error["message"]) > 20 and error["message"][0].isupper()
    if reason == "invalid" and isinstance(body, dict) and "notebook" in body:
        assert error["errors"][0]["field"] in ("input_path", "flavour")


def test_other_bad_requests_get_a_clear_4xx(job_hub, bobs_job):
    bob = job_hub.as_("bob")
    cases = [
        ("PATCH", f"jobs/{bobs_job}", {"json": {"status": "STOPPED"}}, 409, "already-finished"),
        ("PATCH", f"jobs/{bobs_job}", {"json": {"status": "RUNNING"}}, 400, "invalid"),
        ("GET", f"jobs/{bobs_job}/logs?offset=-4", {}, 400, "invalid"),
        ("GET", "jobs?max_items=1000", {}, 400, "invalid"),
        ("GET", "jobs?next_token=garbage", {}, 400, "invalid"),
        ("GET", "jobs/not-a-job", {}, 404, "not-found"),
        ("GET", "jobs/../../etc", {}, 404, "not-found"),
        ("GET", "no/such/endpoint", {}, 404, "not-found"),
    ]
    for method, path, kwargs, status, reason in cases:
        answer = bob.request(method, path, **kwargs)
        assert (answer.status_code, answer.json()["reason"]) == (status, reason), (
            path,
            answer.text,
        )


@pytest.mark.parametrize(
    ("person", "own", "can_stop", "can_delete", "can_rerun"),
    [
        ("bob", True, True, True, True),  # his own job: every action
        ("ines", False, False, False, False),  # his instructor: reads it, nothing more
        ("tara", False, False, False, False),  # a reader of the students' group
        ("root", False, True, True, False),  # an admin stops and deletes, never reruns
    ],
)
def test_each_reader_of_a_job_is_told_which_actions_are_theirs(
    job_hub, bobs_job, person, own, can_stop, can_delete, can_rerun
):
    # Given bob's finished job, when each person who may read it describes and lists it
    service = job_hub.as_(person)
    described = service.request("GET", f"jobs/{bobs_job}").json()
    listed_job = next(
        job for job in service.request("GET", "jobs").json()["jobs"] if job["job_id"] == bobs_job
    )
    # Then both say whose it is and what this person may do with it, and the flavor's title
    for job in (described, listed_job):
        assert job["owner"] == "bob"
        assert (job["own"], job["can_stop"], job["can_delete"], job["can_rerun"]) == (
            own,
            can_stop,
            can_delete,
            can_rerun,
        )
        assert (job["flavor"], job["flavor_title"]) == ("cpu-job", "CPU job")


def test_an_instructor_rerunning_a_students_job_is_told_whose_job_it_is(job_hub, bobs_job):
    # When ines, bob's instructor, sends a rerun of his job (as the Jobs panel's Rerun would)
    rerun = {"input_path": "homework.ipynb", "notebook": QUICK, "rerun_of": bobs_job}
    refused = job_hub.as_("ines").request("POST", "jobs", json=rerun)
    # Then it is a 403 naming bob, not a job of hers
    assert refused.status_code == 403, refused.text
    assert refused.json()["message"].startswith(
        "This is bob's job; you can read it but not rerun it."
    )
    assert bobs_job not in {
        j["job_id"]
        for j in job_hub.as_("ines").request("GET", "jobs").json()["jobs"]
        if j["owner"] == "ines"
    }
    # And alice, who may not read it, learns nothing about it
    hidden = job_hub.as_("alice").request("POST", "jobs", json=rerun)
    assert hidden.status_code == 403 and "bob" not in hidden.json()["message"]
    # While bob himself reruns it: a new job of his, which he may act on
    again = job_hub.as_("bob").request("POST", "jobs", json=rerun)
    assert again.status_code == 201, again.text
    job = again.json()["job"]
    assert job["job_id"] != bobs_job and job["owner"] == "bob"
    assert job["own"] and job["can_rerun"] and job["can_stop"]
    assert job["rerun_of"] == bobs_job
    # and a rerun sent without a notebook runs the snapshot his job ran (the hub's jobs
    # page and a rerun whose notebook file has gone)
    snapshot = job_hub.as_("bob").request("GET", f"jobs/{bobs_job}/input")
    assert snapshot.status_code == 200 and snapshot.json()["cells"], snapshot.text
    bare = {key: value for key, value in rerun.items() if key != "notebook"}
    from_snapshot = job_hub.as_("bob").request("POST", "jobs", json=bare)
    assert from_snapshot.status_code == 201, from_snapshot.text
    assert from_snapshot.json()["job"]["rerun_of"] == bobs_job
    # while alice can read neither the snapshot nor rerun it without one
    assert job_hub.as_("alice").request("GET", f"jobs/{bobs_job}/input").status_code == 403
