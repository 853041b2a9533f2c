"""Scenarios: a start request goes through entitlement, quotas and capacity, in that order."""

from __future__ import annotations

import pytest

from gpuspawner.policy import (
    Allocation,
    CapacityPool,
    GPUDevice,
    Refusal,
    UserIdentity,
    active_reservations,
    admit,
    seats_left,
)
from gpuspawner.policy.admission import job_start_order, prewarm_applies
from gpuspawner.policy.entitlements import entitlement_for

from .conftest import at

CATALOG = """\
    settings:
      timezone: Europe/Zurich
      max_gpu_servers_per_user: 1
    standing:
      - id: cpu
        title: CPU only
        default: true
    courses:
      - id: ml101
        title: Machine Learning 101
        instructors: [prof]
        enrolment: {groups: [ml101]}
        gpu: {fraction: 1/4}
        max_gpu_servers: 3
        reserved_seats: 2
        schedule:
          term: {first_day: 2024-02-19, last_day: 2024-06-01}
          windows: [{days: [Mon, Wed], start: "10:00", end: "12:00"}]
          prewarm: 30m
      - id: vision
        title: Computer Vision
        enrolment: {groups: [vision-students]}
        gpu: {fraction: 1/2}
        schedule:
          term: {first_day: 2024-02-19, last_day: 2024-06-01}
          windows: [{day: Mon, start: "10:00", end: "12:00"}]
      - id: h100-course
        title: Large models
        enrolment: {users: [alice]}
        gpu: {fraction: 1/2, model: H100}
        schedule:
          term: {first_day: 2024-02-19, last_day: 2024-06-01}
          windows: [{day: Mon, start: "10:00", end: "12:00"}]
    research:
      - id: vision-lab
        title: Vision lab
        users: [rita]
        expires: 2024-12-31
        gpu: {fraction: 1/2}
"""

CLASS_TIME = at("2024-03-18 10:30")  # Monday, during both courses
EVENING = at("2024-03-18 19:00")


def student(name: str, *groups: str) -> UserIdentity:
    return UserIdentity(name, frozenset(groups or ("ml101",)))


@pytest.fixture
def catalog(catalog_from):
    return catalog_from(CATALOG)


@pytest.fixture
def pool():
    return CapacityPool([GPUDevice("GPU-0", 0, "NVIDIA GeForce RTX 4090", 24 * 1024)])


def start(catalog, pool, user, profile, now=CLASS_TIME, server="", **options):
    return admit(
        catalog, pool, user, profile, key=f"server:{user.name}/{server}", now=now, **options
    )


def refused(catalog, pool, user, profile, now=CLASS_TIME, server="", **options) -> Refusal:
    with pytest.raises(Refusal) as error:
        start(catalog, pool, user, profile, now, server, **options)
    return error.value


def test_given_two_students_in_class_then_each_gets_a_quarter_and_the_class_end(catalog, pool):
    alice = start(catalog, pool, student("alice"), "ml101")
    bob = start(catalog, pool, student("bob"), "ml101")

    assert alice.allocation is not None and bob.allocation is not None
    assert alice.allocation.key != bob.allocation.key
    assert alice.allocation.fraction + bob.allocation.fraction == pytest.approx(0.5)
    assert alice.session_end == at("2024-03-18 12:10")


def test_given_the_gpu_is_full_then_the_next_student_is_told_all_gpus_are_taken(catalog, pool):
    start(catalog, pool, student("vic", "vision-students"), "vision")
    start(catalog, pool, student("alice"), "ml101")
    start(catalog, pool, student("bob"), "ml101")

    problem = refused(catalog, pool, student("carol"), "ml101")

    assert problem.code == "full"
    assert "All GPUs are taken right now" in problem.message
    assert "start a profile without a GPU" in problem.message


def test_given_the_course_seat_limit_then_the_next_student_is_refused(catalog):
    big_pool = CapacityPool([GPUDevice(f"GPU-{i}", i, "A100", 80 * 1024) for i in range(4)])
    for name in ("a", "b", "c"):
        start(catalog, big_pool, student(name), "ml101")

    problem = refused(catalog, big_pool, student("d"), "ml101")

    assert problem.code == "course-full"
    assert problem.message.startswith("All 3 GPU seats of Machine Learning 101 are taken.")


def test_given_a_running_gpu_server_then_a_second_named_server_hits_the_user_limit(catalog, pool):
    alice = student("alice", "ml101", "vision-students")
    start(catalog, pool, alice, "ml101")

    problem = refused(catalog, pool, alice, "vision", server="second")

    assert problem.code == "user-limit"
    assert "You already have 1 GPU server running (ml101)" in problem.message
    assert "Stop one from the Home page" in problem.message


def test_given_a_cpu_only_profile_then_no_gpu_is_held_and_no_limit_applies(catalog, pool):
    alice = student("alice")
    start(catalog, pool, alice, "ml101")

    decision = start(catalog, pool, alice, "cpu", server="notes")

    assert decision.allocation is None
    assert decision.session_end is None


def test_given_a_restart_of_the_same_server_then_its_stale_allocation_is_replaced(catalog, pool):
    alice = student("alice")
    start(catalog, pool, alice, "ml101")

    start(catalog, pool, alice, "ml101")

    assert pool.count(owner="alice") == 1


def test_given_a_hub_restart_then_restored_servers_still_hold_their_slices(catalog, pool):
    start(catalog, pool, student("vic", "vision-students"), "vision")
    start(catalog, pool, student("alice"), "ml101")
    state = [a.to_dict() for a in pool.allocations.values()]

    restarted = CapacityPool(pool.devices)
    for data in state:
        assert restarted.restore(Allocation.from_dict(data)) == []
    bob = start(catalog, restarted, student("bob"), "ml101")

    assert bob.allocation is not None
    assert sum(a.fraction for a in restarted.allocations.values()) == 1
    assert refused(catalog, restarted, student("carol"), "ml101").code == "full"


class TestReservedSeats:
    def test_given_an_open_course_then_its_reserved_seats_block_a_researcher(self, catalog, pool):
        start(catalog, pool, student("vic", "vision-students"), "vision")  # half the GPU

        # The other half is free, but held for two ml101 students until their class ends.
        problem = refused(catalog, pool, UserIdentity("rita"), "vision-lab")

        assert problem.code == "reserved"
        assert "reserved for Machine Learning 101 until 12:00" in problem.message

    def test_given_an_open_course_then_its_own_student_uses_a_reserved_seat(self, catalog, pool):
        start(catalog, pool, student("vic", "vision-students"), "vision")

        alice = start(catalog, pool, student("alice"), "ml101")
        bob = start(catalog, pool, student("bob"), "ml101")

        assert alice.allocation is not None and bob.allocation is not None

    def test_given_the_course_is_closed_then_the_researcher_gets_the_gpu(self, catalog, pool):
        assert start(catalog, pool, UserIdentity("rita"), "vision-lab", now=EVENING).allocation

    def test_given_class_time_then_only_open_courses_hold_reservations(self, catalog):
        assert [r.course_id for r in active_reservations(catalog, CLASS_TIME)] == ["ml101"]
        assert active_reservations(catalog, EVENING) == ()

    def test_given_reservations_then_seats_left_differs_by_who_asks(self, catalog, pool):
        ml101 = entitlement_for(catalog, student("alice"), "ml101", CLASS_TIME)
        lab = entitlement_for(catalog, UserIdentity("rita"), "vision-lab", CLASS_TIME)
        cpu = entitlement_for(catalog, student("alice"), "cpu", CLASS_TIME)

        assert seats_left(catalog, pool, ml101, CLASS_TIME) == 3  # capped by max_gpu_servers
        assert seats_left(catalog, pool, lab, CLASS_TIME) == 1  # half the GPU is reserved
        assert seats_left(catalog, pool, cpu, CLASS_TIME) is None


def test_given_a_gpu_model_the_hub_lacks_then_the_student_is_told(catalog, pool):
    problem = refused(catalog, pool, UserIdentity("alice"), "h100-course")

    assert problem.code == "no-such-gpu"
    assert "Please tell your instructor or the hub admins" in problem.message


def test_given_a_closed_course_then_the_start_is_refused_with_403(catalog, pool):
    problem = refused(catalog, pool, student("alice"), "ml101", now=EVENING)

    assert (problem.code, problem.status) == ("closed", 403)
    assert problem.message == "Machine Learning 101 cannot be started now. Opens Wed 09:50."
    assert pool.allocations == {}


@pytest.mark.parametrize("profile", ["vision", "no-such-profile", {"id": "ml101"}])
def test_given_a_profile_not_offered_then_the_start_is_refused_with_403(catalog, pool, profile):
    problem = refused(catalog, pool, student("alice"), profile)

    assert (problem.code, problem.status) == ("not-entitled", 403)
    assert "Choose one of the profiles on the start page" in problem.message


def test_given_an_instructor_then_the_server_is_not_reclaimed_after_class(catalog, pool):
    decision = start(catalog, pool, UserIdentity("prof"), "ml101")

    assert decision.allocation is not None
    assert decision.allocation.session_end is None


class TestPrewarm:
    PREWARM_TIME = at("2024-03-18 09:35")  # 25 minutes before class, before the lead time

    def test_given_the_prewarm_period_then_a_prewarm_start_is_granted(self, catalog, pool):
        decision = start(catalog, pool, student("alice"), "ml101", self.PREWARM_TIME, prewarm=True)

        assert decision.prewarmed
        assert decision.session_end == at("2024-03-18 12:10")

    def test_given_the_same_moment_without_prewarm_then_the_student_must_wait(self, catalog, pool):
        problem = refused(catalog, pool, student("alice"), "ml101", self.PREWARM_TIME)

        assert problem.code == "closed"
        assert "Opens 09:50" in problem.message

    def test_given_before_the_prewarm_period_then_prewarm_is_refused(self, catalog, pool):
        early = at("2024-03-18 09:29")

        assert refused(catalog, pool, student("alice"), "ml101", early, prewarm=True).code == (
            "closed"
        )

    def test_given_a_course_without_prewarm_then_prewarm_is_refused(self, catalog, pool):
        vic = student("vic", "vision-students")

        problem = refused(catalog, pool, vic, "vision", self.PREWARM_TIME, prewarm=True)

        assert problem.code == "closed"

    def test_given_the_lead_time_then_a_prewarm_start_is_an_ordinary_start(self, catalog, pool):
        decision = start(
            catalog, pool, student("alice"), "ml101", at("2024-03-18 09:55"), prewarm=True
        )

        assert not decision.prewarmed
        assert decision.allocation is not None

    @pytest.mark.parametrize(
        ("moment", "applies"),
        [("09:29", False), ("09:30", True), ("09:59", True), ("10:00", False)],
    )
    def test_given_an_entitlement_then_prewarm_applies_only_in_its_period(
        self, catalog, moment, applies
    ):
        now = at(f"2024-03-18 {moment}")
        entitlement = entitlement_for(catalog, student("alice"), "ml101", now)

        assert prewarm_applies(entitlement, now) is applies


def test_given_one_student_with_ten_queued_jobs_then_anothers_single_job_goes_first():
    # Given alice running one job with ten more queued, then bob queueing one
    queued = [(f"a{n}", "alice") for n in range(10)] + [("b0", "bob")]
    # When the order of the next free slots is decided
    order = job_start_order(queued, {"alice": 1})
    # Then bob's job takes the first free slot, and alice's keep their own order
    assert order == ["b0"] + [f"a{n}" for n in range(10)]


def test_given_equal_shares_then_owners_take_turns_oldest_job_first():
    queued = [("a1", "alice"), ("a2", "alice"), ("b1", "bob"), ("c1", "carl"), ("b2", "bob")]
    assert job_start_order(queued, {}) == ["a1", "b1", "c1", "a2", "b2"]
    # a person running more jobs than the others waits for them to catch up
    assert job_start_order(queued, {"alice": 2, "carl": 1}) == ["b1", "c1", "b2", "a1", "a2"]


def test_given_equal_running_jobs_then_the_student_served_longest_ago_goes_first():
    # Given alice's job just ended (she was served last) and bob's has waited behind hers
    queued = [("a1", "alice"), ("a2", "alice"), ("b1", "bob")]
    # Then the free slot goes to bob, though alice's queued jobs are older
    assert job_start_order(queued, {}, {"alice": 20.0}) == ["b1", "a1", "a2"]
    assert job_start_order(queued, {}, {"alice": 20.0, "bob": 10.0}) == ["b1", "a1", "a2"]
    assert job_start_order(queued, {}, {"alice": 10.0, "bob": 20.0}) == ["a1", "b1", "a2"]
