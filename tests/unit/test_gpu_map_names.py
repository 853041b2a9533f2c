"""Scenarios: who is named on the GPU map page, by role (hub admin, instructor, student).

One picture: two students of ML101 (ana, ben), a student of CS102 (cleo), and a job of
researcher rex, on two GPUs. The instructor of ML101 (by name in the catalog) and the
instructor of CS102 (through the course's instructor group) look at it, as do a hub admin
and ana herself.
"""

from __future__ import annotations

import json
import tempfile
from fractions import Fraction
from pathlib import Path

from gpuspawner.gpu_map import gpu_map_json, map_viewer
from gpuspawner.policy import CapacityPool, GPUDevice, GPUShare, UserIdentity, load_catalog

CATALOG = """\
courses:
  - id: ml101
    title: Machine learning
    instructors: [mila]
    enrolment: {users: [ana, ben]}
    schedule: &term
      timezone: UTC
      term: {first_day: 2026-09-01, last_day: 2026-12-31}
      windows: [{day: Mon, start: "10:00", end: "12:00"}]
  - id: cs102
    title: Systems
    enrolment: {users: [cleo]}
    schedule: *term
"""


def the_catalog():
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "catalog.yaml"
        path.write_text(CATALOG)
        return load_catalog(path)


def busy_pool() -> CapacityPool:
    pool = CapacityPool(
        [GPUDevice("g0", 0, "RTX 4090", 24576), GPUDevice("g1", 1, "RTX 4090", 24576)]
    )
    for key, owner, course, fraction in (
        ("server:ana/", "ana", "ml101", Fraction(1, 4)),
        ("server:ben/", "ben", "ml101", Fraction(1, 4)),
        ("server:cleo/", "cleo", "cs102", Fraction(1, 4)),
        ("job:7f3a", "rex", None, Fraction(1, 2)),
    ):
        pool.allocate(
            key,
            owner=owner,
            profile_id=course or "vision-lab",
            course_id=course,
            share=GPUShare(fraction=fraction),
        )
    return pool


def seen_by(identity: UserIdentity) -> dict:
    """The map's JSON as ``identity`` receives it."""
    return gpu_map_json(
        busy_pool(),
        map_viewer(the_catalog(), identity),
        titles={"ml101": "Machine learning", "cs102": "Systems"},
    )


def holders(picture) -> list[str | None]:
    return [item["holder"] for gpu in picture["gpus"] for item in gpu["slices"]]


def test_a_hub_admin_sees_every_holder_and_the_job_id():
    # Given the admin looks at the map
    picture = seen_by(UserIdentity("root", frozenset(), admin=True))
    # Then every slice names its holder, servers and the job alike
    assert picture["viewer"] == {"name": "root", "role": "admin"}
    assert sorted(holders(picture)) == ["ana", "ben", "cleo", "rex"]
    job = next(i for g in picture["gpus"] for i in g["slices"] if i["kind"] == "job")
    assert job["job_id"] == "7f3a"
    assert job["label"] == "rex"
    assert picture["totals"] == {"gpus": 2, "slices": 4, "servers": 3, "jobs": 1, "free_gpus": 0}


def test_an_instructor_named_in_the_catalog_sees_only_their_own_courses_students():
    # Given ML101's instructor looks at the map
    picture = seen_by(UserIdentity("mila", frozenset()))
    assert picture["viewer"]["role"] == "instructor"
    slices = [i for g in picture["gpus"] for i in g["slices"]]
    # Then ana and ben (their course) are named, cleo's and rex's slices are anonymous
    named = {i["holder"] for i in slices if i["holder"]}
    assert named == {"ana", "ben"}
    cleo = next(i for i in slices if i["course"] == "cs102")
    assert cleo["label"] == "Systems" and cleo["holder"] is None
    job = next(i for i in slices if i["kind"] == "job")
    assert job["holder"] is None and job["job_id"] is None and job["label"] == "vision-lab"
    # And no other person's name appears anywhere in the answer
    text = json.dumps(picture)
    assert "cleo" not in text and "rex" not in text and "7f3a" not in text


def test_an_instructor_through_the_course_group_sees_that_courses_students():
    # Given a member of course-cs102-instructors (the catalog's instructor group) looks at the map
    picture = seen_by(UserIdentity("tom", frozenset({"course-cs102-instructors"})))
    # Then cleo is named to them, the ML101 students are not
    assert picture["viewer"]["role"] == "instructor"
    assert [h for h in holders(picture) if h] == ["cleo"]
    assert "ana" not in json.dumps(picture)


def test_a_student_sees_their_own_slice_as_you_and_everyone_else_anonymously():
    # Given ana looks at the map
    picture = seen_by(UserIdentity("ana", frozenset()))
    slices = [i for g in picture["gpus"] for i in g["slices"]]
    mine = [i for i in slices if i["mine"]]
    # Then exactly her slice is marked as hers, labelled "you"
    assert [(i["label"], i["holder"], i["server_name"]) for i in mine] == [("you", "ana", "")]
    assert picture["viewer"]["role"] == "student"
    # And the others show their course or research allocation only
    others = sorted(i["label"] for i in slices if not i["mine"])
    assert others == ["Machine learning", "Systems", "vision-lab"]
    text = json.dumps(picture)
    for name in ("ben", "cleo", "rex", "7f3a", "mila"):
        assert name not in text


def test_a_researchers_own_job_shows_its_id_to_them():
    # Given rex, whose job holds half a GPU, looks at the map
    picture = seen_by(UserIdentity("rex", frozenset()))
    job = next(i for g in picture["gpus"] for i in g["slices"] if i["kind"] == "job")
    # Then the job is theirs ("you"), with its id, and the students stay anonymous
    assert (job["label"], job["job_id"], job["fraction"]) == ("you", "7f3a", "1/2")
    assert [h for h in holders(picture) if h] == ["rex"]


def test_an_idle_gpu_is_listed_with_no_slices():
    # Given one GPU holds nothing
    pool = CapacityPool(
        [GPUDevice("g0", 0, "RTX 4090", 24576), GPUDevice("g1", 1, "RTX 4090", 24576)]
    )
    picture = gpu_map_json(pool, map_viewer(the_catalog(), UserIdentity("ana", frozenset())))
    # Then both GPUs are listed, free
    assert [(g["label"], g["used_pct"], g["slices"]) for g in picture["gpus"]] == [
        ("GPU 0 (RTX 4090, 24 GiB)", 0.0, []),
        ("GPU 1 (RTX 4090, 24 GiB)", 0.0, []),
    ]
    assert picture["totals"]["free_gpus"] == 2
