"""Scenarios: which job flavors a user may run "Run as Job" on, and GPU admission of jobs."""

from __future__ import annotations

import pytest

from gpuspawner.policy import (
    CapacityPool,
    CatalogError,
    GPUDevice,
    Refusal,
    UserIdentity,
    admit,
    admit_job,
    flavor_entitlements,
)
from gpuspawner.policy.admission import OWN_LIMIT_CODES, WAIT_CODES
from gpuspawner.policy.flavors import default_flavor

from .conftest import UTC, at

CATALOG = """
courses:
  - id: ml101
    title: ML101
    instructors: [ada]
    enrolment: {users: [sam], groups: [ml-students]}
    gpu: {fraction: 1/4}
    reserved_seats: 3
    max_gpu_servers: 10
    schedule:
      timezone: UTC
      term: {first_day: 2026-09-01, last_day: 2026-12-18}
      windows: [{day: Mon, start: "10:00", end: "12:00"}]
research:
  - id: vision
    title: Vision lab
    users: [rhea]
    expires: 2026-12-31
flavors:
  - id: cpu-job
    title: CPU job
    access: {everyone: true}
  - id: class-gpu
    title: Quarter GPU for ML101
    gpu: {fraction: 1/4}
    access: {courses: [ml101]}
  - id: a100
    title: Whole GPU
    gpu: {count: 1}
    max_running_per_user: 1
    access: {research: [vision], users: [guest]}
"""


@pytest.fixture
def catalog(catalog_from):
    return catalog_from(CATALOG)


def usable(catalog, user, moment):
    return [e.flavor.id for e in flavor_entitlements(catalog, user, moment) if e.available]


def test_each_person_may_use_the_flavors_their_courses_and_grants_give(catalog):
    during_term = at("2026-11-20 15:00", UTC)
    assert usable(catalog, UserIdentity("sam"), during_term) == ["cpu-job", "class-gpu"]
    grouped = UserIdentity("kim", frozenset({"ml-students"}))
    assert usable(catalog, grouped, during_term) == ["cpu-job", "class-gpu"]
    assert usable(catalog, UserIdentity("ada"), during_term) == ["cpu-job", "class-gpu"]
    assert usable(catalog, UserIdentity("rhea"), during_term) == ["cpu-job", "a100"]
    assert usable(catalog, UserIdentity("guest"), during_term) == ["cpu-job", "a100"]
    assert usable(catalog, UserIdentity("root", admin=True), during_term) == [
        "cpu-job",
        "class-gpu",
        "a100",
    ]


def test_a_researchers_dialog_starts_on_their_allocations_gpu_a_students_on_the_first(
    catalog,
):
    during_term = at("2026-11-20 15:00", UTC)

    def preselected(user):
        return default_flavor(flavor_entitlements(catalog, user, during_term))

    # A researcher's allocation exists to run GPU jobs: its GPU flavor, not "CPU job"
    assert preselected(UserIdentity("rhea")) == "a100"
    # Others keep the catalog's first open flavor: the whole GPU named for a guest is
    # not theirs through an allocation, and a student's CPU job comes first
    assert preselected(UserIdentity("guest")) == "cpu-job"
    assert preselected(UserIdentity("sam")) == "cpu-job"
    assert preselected(UserIdentity("root", admin=True)) == "cpu-job"
    # Once the allocation has ended, the researcher is back on the first open flavor
    assert (
        default_flavor(
            flavor_entitlements(catalog, UserIdentity("rhea"), at("2027-01-15 10:00", UTC))
        )
        == "cpu-job"
    )


def test_course_and_research_flavors_close_with_the_term_and_the_grant(catalog):
    after = at("2027-01-15 10:00", UTC)
    sam = {e.flavor.id: e for e in flavor_entitlements(catalog, UserIdentity("sam"), after)}
    assert sam["class-gpu"].available is False
    assert "not active now" in sam["class-gpu"].reason
    assert usable(catalog, UserIdentity("rhea"), after) == ["cpu-job"]
    stranger = {e.flavor.id: e for e in flavor_entitlements(catalog, UserIdentity("x"), after)}
    assert stranger["a100"].reason == "Whole GPU is not offered to you."


def test_a_student_cannot_run_a_job_on_a_flavor_they_are_not_offered(catalog):
    pool = CapacityPool([GPUDevice("g0", 0, "A100", 81920)])
    with pytest.raises(Refusal) as refused:
        admit_job(
            catalog,
            pool,
            UserIdentity("sam"),
            "a100",
            key="job:1",
            now=at("2026-11-20 15:00", UTC),
            running_jobs=(),
        )
    assert refused.value.code == "not-entitled" and refused.value.status == 403
    assert pool.allocations == {}


def test_jobs_share_the_gpus_with_servers_and_respect_open_class_reservations(catalog):
    pool = CapacityPool([GPUDevice("g0", 0, "A100", 81920)])
    rhea = UserIdentity("rhea")
    # Outside class a whole-GPU job takes the GPU, and a second one waits (per-user limit)
    outside = at("2026-11-20 15:00", UTC)
    first = admit_job(catalog, pool, rhea, "a100", key="job:1", now=outside, running_jobs=())
    assert first.allocation is not None and first.allocation.device_ids == ("g0",)
    with pytest.raises(Refusal) as waiting:
        admit_job(catalog, pool, rhea, "a100", key="job:2", now=outside, running_jobs=["a100"])
    assert waiting.value.code == "job-limit"
    # and a student's course server cannot start while the job holds the only GPU
    pool.release("job:1")
    # During class, ML101's three reserved quarter seats keep a whole-GPU job out
    in_class = at("2026-11-23 10:30", UTC)
    with pytest.raises(Refusal) as reserved:
        admit_job(catalog, pool, rhea, "a100", key="job:3", now=in_class, running_jobs=())
    assert reserved.value.code in ("reserved", "full")
    # while the course's own student still gets a seat
    decision = admit(catalog, pool, UserIdentity("sam"), "ml101", key="server:sam/", now=in_class)
    assert decision.allocation is not None


def test_a_cpu_flavor_honours_its_per_user_limit_too(catalog_from):
    # Given a CPU flavor that lets each person run one job, and sam running one on it
    catalog = catalog_from(
        CATALOG.replace("title: CPU job", "title: CPU job\n    max_running_per_user: 1")
    )
    pool = CapacityPool([GPUDevice("g0", 0, "A100", 81920)])
    sam, now = UserIdentity("sam"), at("2026-11-20 15:00", UTC)
    assert (
        admit_job(catalog, pool, sam, "cpu-job", key="job:1", now=now, running_jobs=()).allocation
        is None
    )
    # When sam's second CPU job asks to start
    with pytest.raises(Refusal) as waiting:
        admit_job(catalog, pool, sam, "cpu-job", key="job:2", now=now, running_jobs=["cpu-job"])
    # Then it waits on sam's own limit, and says so
    assert waiting.value.code == "job-limit"
    assert waiting.value.code in WAIT_CODES and waiting.value.code in OWN_LIMIT_CODES
    assert waiting.value.message == (
        "You already have 1 job running on CPU job; each person may run 1 at a time there. "
        "This job waits in the queue and starts when one of yours ends."
    )
    # while a job of sam's on another flavor, and another person's job, may start
    admit_job(catalog, pool, sam, "class-gpu", key="job:3", now=now, running_jobs=["cpu-job"])
    kim = UserIdentity("kim", frozenset({"ml-students"}))
    admit_job(catalog, pool, kim, "cpu-job", key="job:4", now=now, running_jobs=())


def test_waiting_refusals_are_one_set_and_final_ones_are_not_in_it():
    assert {"full", "reserved", "job-limit"} <= WAIT_CODES
    assert OWN_LIMIT_CODES <= WAIT_CODES
    assert not {"full", "reserved"} & OWN_LIMIT_CODES
    assert not {"not-entitled", "no-such-gpu", "too-large", "closed"} & WAIT_CODES


def test_a_flavor_naming_an_unknown_course_is_a_located_catalog_error(catalog_from):
    with pytest.raises(CatalogError) as error:
        catalog_from(CATALOG.replace("courses: [ml101]", "courses: [ml999]"))
    problem = error.value.problems[0]
    assert problem.field == "flavors[1].access.courses[0]"
    assert (
        problem.line
        == CATALOG.lstrip("\n").splitlines().index("    access: {courses: [ml101]}") + 1
    )
    assert "no course with the id 'ml999'" in problem.message
