"""GPU-hour budgets in the catalog: validated with file and line, and enforced by the
admission with a sentence, counting the still-running intervals up to now."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest

from gpuspawner.accounting.store import close_shared_usage_store
from gpuspawner.core.admission import GPUAdmission
from gpuspawner.policy import (
    CapacityPool,
    CatalogError,
    GPUDevice,
    Refusal,
    UserIdentity,
    load_catalog,
)
from gpuspawner.policy.entitlements import entitlement_for

CATALOG = """\
settings:
  timezone: Pacific/Auckland
courses:
  - id: cs101
    title: CS101
    instructors: [prof]
    enrolment: {users: [ana]}
    gpu: {fraction: 1/4}
    budget: {gpu_hours_per_student_per_week: 1.5}
    schedule:
      timezone: Pacific/Auckland
      term: {first_day: 2026-09-01, last_day: 2026-12-31}
      windows: [{days: [Mon, Tue, Wed, Thu, Fri, Sat, Sun], start: "00:00", end: "23:59"}]
research:
  - id: vision
    title: Vision lab
    users: [rex]
    expires: 2026-12-31
    gpu: {count: 1}
    budget: {gpu_hours_per_term: 2}
flavors:
  - {id: half-job, title: Half-GPU job, gpu: {fraction: 1/2}, access: {courses: [cs101]}}
"""
DEVICES = [GPUDevice("sim-0", 0, "RTX 4090", 24576, simulated=True)]
# Saturday 26 September 2026, 10:00 in Auckland: the next day clocks go forward.
SATURDAY = datetime(2026, 9, 25, 22, 0, tzinfo=UTC)


@pytest.fixture
def admission(write_yaml, tmp_path):
    url = f"sqlite:///{tmp_path / 'usage.sqlite'}"
    yield GPUAdmission(catalog_path=str(write_yaml(CATALOG)), usage_db_url=url, target="local")
    close_shared_usage_store(url)


def run_server(admission: GPUAdmission, user: str, profile: str, start: datetime, hours: float):
    """Start ``user``'s server at ``start`` and stop it ``hours`` later (None: keep it)."""
    pool = CapacityPool(DEVICES)
    key = f"server:{user}/"
    grant = admission.grant_server(pool, UserIdentity(user), profile, key=key, now=start)
    admission.record_start(grant, name="", groups=(), now=start)
    if hours is not None:
        admission.record_end(key, start + timedelta(hours=hours))


def test_a_student_over_the_weekly_budget_is_refused_with_when_it_renews(admission):
    # Given ana used her quarter GPU for 4 h this week (1 GPU-hour) and runs it again now
    run_server(admission, "ana", "cs101", SATURDAY - timedelta(days=2), 4)
    run_server(admission, "ana", "cs101", SATURDAY, None)

    # When she starts another cs101 server 2 h later (0.5 GPU-hour more: 1.5 of 1.5 used)
    pool = CapacityPool(DEVICES)
    later = SATURDAY + timedelta(hours=2)
    with pytest.raises(Refusal) as refused:
        admission.grant_server(
            pool, UserIdentity("ana"), "cs101", key="server:ana/second", now=later
        )

    # Then she is told what she used, when the budget renews in the course's zone, and what to do
    assert refused.value.code == "budget" and refused.value.status == 403
    assert refused.value.message == (
        "You have used 1.5 of your 1.5 GPU-hours for CS101 this week; the budget renews on "
        "Monday 00:00 (Pacific/Auckland). Ask your instructor if you need more, or start a "
        "profile without a GPU."
    )
    # and nothing stays booked for the refused start
    assert "server:ana/second" not in pool.allocations


def test_the_budget_renews_on_monday_midnight_in_the_course_zone(admission):
    # Given ana used up her budget on Saturday
    run_server(admission, "ana", "cs101", SATURDAY, 6)

    # When she starts on Monday 00:01 in Auckland (Sunday 11:01 UTC, after the clocks moved)
    monday = datetime(2026, 9, 27, 11, 1, tzinfo=UTC)
    pool = CapacityPool(DEVICES)
    grant = admission.grant_server(pool, UserIdentity("ana"), "cs101", key="k", now=monday)

    # Then the new week's budget lets her in, and the card says what is left
    assert grant.allocation is not None
    catalog = admission.catalog()
    entitlement = entitlement_for(catalog, UserIdentity("ana"), "cs101", monday)
    status = admission.server_budget(catalog, entitlement, UserIdentity("ana"), monday)
    assert status is not None and status.used == 0 and status.left == Fraction(3, 2)
    assert status.line() == (
        "1.5 of your 1.5 GPU-hours left this week (renews Monday 00:00, Pacific/Auckland)"
    )


def test_instructors_have_no_student_budget(admission):
    # Given the instructor used 10 GPU-hours of cs101 this week
    run_server(admission, "prof", "cs101", SATURDAY - timedelta(days=1), 40)

    # Then the instructor still starts
    pool = CapacityPool(DEVICES)
    grant = admission.grant_server(pool, UserIdentity("prof"), "cs101", key="k", now=SATURDAY)
    assert grant.allocation is not None


def test_a_job_through_the_course_draws_on_the_same_budget(admission):
    # Given ana used 1.5 GPU-hours of cs101 in servers this week
    run_server(admission, "ana", "cs101", SATURDAY - timedelta(days=1), 6)

    # When she runs a job on the course's flavor
    with pytest.raises(Refusal) as refused:
        admission.grant_job(
            CapacityPool(DEVICES),
            UserIdentity("ana"),
            "half-job",
            key="job:1",
            now=SATURDAY,
            running_jobs=[],
        )

    # Then it is refused with the same budget, and told to use a flavor without a GPU
    assert refused.value.code == "budget"
    assert refused.value.message.endswith("or run the job on a flavor without a GPU.")


def test_a_research_allocation_over_its_term_budget_is_refused(admission):
    # Given rex's whole-GPU server ran 2 h (the allocation's 2 GPU-hours)
    run_server(admission, "rex", "vision", SATURDAY, 2)

    # When rex starts again
    with pytest.raises(Refusal) as refused:
        admission.grant_server(
            CapacityPool(DEVICES),
            UserIdentity("rex"),
            "vision",
            key="server:rex/",
            now=SATURDAY + timedelta(days=1),
        )

    # Then the allocation's term budget is named, with its last day
    assert refused.value.message.startswith(
        "Vision lab has used 2.0 of its 2 GPU-hours for its term (until Thu 31 Dec 2026)."
    )


@pytest.mark.parametrize(
    "budget, field, message",
    [
        (
            "{gpu_hours_per_student_per_week: 0}",
            "courses[0].budget.gpu_hours_per_student_per_week",
            "expected a number of GPU-hours above zero, such as 6 or 2.5, got 0",
        ),
        (
            "{gpu_hours_per_week: 6}",
            "courses[0].budget.gpu_hours_per_week",
            "unknown field 'gpu_hours_per_week' (a typo?); expected one of: "
            "gpu_hours_per_student_per_week",
        ),
    ],
)
def test_a_wrong_budget_is_reported_at_its_file_and_line(write_yaml, budget, field, message):
    # Given a course whose budget is written wrong on line 9
    path = write_yaml(CATALOG.replace("{gpu_hours_per_student_per_week: 1.5}", budget))

    # When the catalog is loaded
    with pytest.raises(CatalogError) as error:
        load_catalog(path)

    # Then the error names the file, the budget's line and the field
    problem = next(p for p in error.value.problems if p.field == field)
    assert (problem.path, problem.line) == (path, 9)
    assert problem.message == message


def test_a_usage_record_that_cannot_be_opened_never_stops_a_class(write_yaml, tmp_path):
    # Given a usage record on a database that cannot be opened (a folder that is a file)
    (tmp_path / "not-a-folder").write_text("")
    url = f"sqlite:///{tmp_path / 'not-a-folder' / 'usage.sqlite'}"
    admission = GPUAdmission(catalog_path=str(write_yaml(CATALOG)), usage_db_url=url)

    # When ana starts her budgeted course server, and it is recorded and stopped
    pool = CapacityPool(DEVICES)
    grant = admission.grant_server(pool, UserIdentity("ana"), "cs101", key="k", now=SATURDAY)
    admission.record_start(grant, name="", groups=(), now=SATURDAY)
    admission.record_end("k", SATURDAY + timedelta(hours=1))

    # Then she got her GPU share all the same (the problem is in the hub's log)
    assert grant.allocation is not None and "k" in pool.allocations
