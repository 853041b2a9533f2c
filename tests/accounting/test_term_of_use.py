"""A term of simulated use: servers and jobs of 1/7, 1/4, 1/2, one and two GPUs start and
stop through the admission (servers) and the job service's capacity hook (jobs) over three
weeks, on one machine's shared ledger; the hub and the job service crash and restart in
the middle. The usage report's GPU-hours then equal, to the last fraction, the shares the
admission allocated times the time each was held, computed here independently; and every
budget refusal on the way came exactly when the student's own use had reached the budget.
"""

from __future__ import annotations

import csv
import io
import json
import random
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from gpuspawner.accounting.store import shared_usage_store
from gpuspawner.cli import main as gpuspawner_cli
from gpuspawner.core.admission import GPUAdmission
from gpuspawner.core.ledger import AllocationLedger
from gpuspawner.policy import GPUDevice, Refusal, UserIdentity
from jupyter_to_job.errors import JobRefused
from jupyter_to_job.job_admission import JobGranted, JobTicket, JobWaits
from jupyter_to_job.service.flavor_admission import FlavorAdmission, IdentityBook

ZURICH = ZoneInfo("Europe/Zurich")
LOS_ANGELES = ZoneInfo("America/Los_Angeles")
TERM_BEGIN = datetime(2026, 9, 14, 0, 0, tzinfo=ZURICH)
TERM_END = datetime(2026, 10, 5, 0, 0, tzinfo=ZURICH)  # the day after last_day
CS101_BUDGET = Fraction(6)

CATALOG = """\
settings:
  timezone: Europe/Zurich
  terms:
    - {name: autumn-2026, first_day: 2026-09-14, last_day: 2026-10-04}
standing:
  - {id: cpu, title: CPU only, default: true}
  - {id: half, title: Half a GPU, gpu: {fraction: 1/2}}
courses:
  - id: cs101
    title: CS101
    instructors: [prof]
    enrolment: {users: [s1, s2, s3, s4]}
    gpu: {fraction: 1/4}
    budget: {gpu_hours_per_student_per_week: 6}
    schedule: &always
      timezone: America/Los_Angeles
      term: {first_day: 2026-09-01, last_day: 2026-10-31}
      windows: [{days: [Mon, Tue, Wed, Thu, Fri, Sat, Sun], start: "00:00", end: "23:59"}]
      grace: 0m
      lead_time: 2m
  - id: cs102
    title: CS102
    enrolment: {users: [s3, s4, s5]}
    gpu: {fraction: 1/7}
    schedule: *always
research:
  - id: vision
    title: Vision lab
    users: [r1, r2]
    expires: 2026-12-31
    gpu: {count: 1}
    budget: {gpu_hours_per_term: 400}
flavors:
  - {id: half-job, title: Half-GPU job, gpu: {fraction: 1/2}, access: {courses: [cs101]}}
  - {id: seventh-job, title: 1/7 job, gpu: {fraction: 1/7}, access: {everyone: true}}
  - {id: two-gpus, title: Two GPUs, gpu: {count: 2}, access: {research: [vision]}}
"""

PEOPLE = {
    "s1": ["cs101", "half"],
    "s2": ["cs101"],
    "s3": ["cs101", "cs102"],
    "s4": ["cs101", "cs102", "half"],
    "s5": ["cs102", "half"],
    "prof": ["cs101"],
    "r1": ["vision", "half"],
    "r2": ["vision"],
}
FLAVORS = ["half-job", "seventh-job", "two-gpus"]
GROUPS = {name: frozenset({"students"} if name.startswith("s") else {"staff"}) for name in PEOPLE}
DEVICES = [GPUDevice(f"sim-{i}", i, "RTX 4090", 24576, simulated=True) for i in range(4)]


@dataclass
class Held:
    """What the test itself knows of one server or job: computed from the Grant."""

    key: str
    kind: str
    owner: str
    course: str | None
    allocation: str | None
    share: Fraction
    start: datetime
    end: datetime | None = None

    def hours(self, begin: datetime, finish: datetime, now: datetime) -> Fraction:
        low = max(self.start, begin)
        high = min(self.end or now, finish)
        if high <= low:
            return Fraction(0)
        return self.share * Fraction((high - low) // timedelta(microseconds=1), 3_600_000_000)


class Term:
    """The simulated hub and job service, on one clock the test moves forward."""

    def __init__(self, tmp_path: Path, usage_url: str):
        self.catalog = tmp_path / "catalog.yaml"
        self.catalog.write_text(CATALOG)
        self.ledger = str(tmp_path / "ledger.json")
        self.identities = tmp_path / "identities.json"
        self.usage_url = usage_url
        self.now = datetime(2026, 9, 13, 19, 3, 17, 250001, tzinfo=UTC)  # before the term
        self.held: dict[str, Held] = {}
        self.history: list[Held] = []
        self.budget_refusals = 0
        self.budget_grants = 0
        self.start_services()

    def start_services(self) -> None:
        self.admission = GPUAdmission(
            catalog_path=str(self.catalog), usage_db_url=self.usage_url, target="local"
        )
        book = IdentityBook(self.identities)
        for name in PEOPLE:
            book.remember(UserIdentity(name, GROUPS[name]))
        self.jobs = FlavorAdmission(
            admission=self.admission,
            devices=DEVICES,
            identities=book,
            ledger_path=self.ledger,
            clock=lambda: self.now,
        )

    def used_this_week(self, student: str) -> Fraction:
        """cs101 GPU-hours of ``student`` in this Los Angeles week, from what the test saw."""
        local = self.now.astimezone(LOS_ANGELES)
        monday = (local - timedelta(days=local.weekday())).date()
        begin = datetime(monday.year, monday.month, monday.day, tzinfo=LOS_ANGELES)
        finish = begin + timedelta(days=7)  # no daylight-saving change in these weeks
        return sum(
            (
                h.hours(begin.astimezone(UTC), finish.astimezone(UTC), self.now)
                for h in self.history
                if h.owner == student and h.course == "cs101"
            ),
            Fraction(0),
        )

    def expect_budget(self, owner: str, course: str | None, refused: bool) -> None:
        if course != "cs101" or owner == "prof":
            return
        over = self.used_this_week(owner) >= CS101_BUDGET
        assert refused == over, (owner, self.now, self.used_this_week(owner))
        if refused:
            self.budget_refusals += 1
        else:
            self.budget_grants += 1

    def start_server(self, owner: str, profile: str) -> None:
        key = f"server:{owner}/"
        if key in self.held:
            return
        course = profile if profile.startswith("cs") else None
        identity = UserIdentity(owner, GROUPS[owner])
        try:
            with AllocationLedger(self.ledger).transaction(DEVICES) as pool:
                grant = self.admission.grant_server(pool, identity, profile, key=key, now=self.now)
        except Refusal as refusal:
            self.expect_budget(owner, course, refusal.code == "budget")
            return
        self.expect_budget(owner, course, False)
        self.admission.record_start(grant, name="", groups=identity.groups, now=self.now)
        assert grant.allocation is not None
        share = grant.allocation.fraction * len(grant.allocation.device_ids)
        research = profile if profile == "vision" else None
        self.track(Held(key, "server", owner, course, research, share, self.now))

    def start_job(self, owner: str, flavor: str, number: int) -> None:
        ticket = JobTicket(f"job-{number}", owner, flavor)
        try:
            decision = self.jobs.acquire(ticket)
        except JobRefused as refusal:
            self.expect_budget(
                owner, "cs101" if flavor == "half-job" else None, refusal.code == "budget"
            )
            return
        if isinstance(decision, JobWaits):
            return
        assert isinstance(decision, JobGranted) and decision.grant is not None
        allocation = decision.grant.allocation
        assert allocation is not None
        course = "cs101" if flavor == "half-job" else None
        self.expect_budget(owner, course, False)
        research = "vision" if flavor == "two-gpus" else None
        share = allocation.fraction * len(allocation.device_ids)
        self.track(Held(ticket.key, "job", owner, course, research, share, self.now))

    def track(self, held: Held) -> None:
        self.held[held.key] = held
        self.history.append(held)

    def stop(self, key: str) -> None:
        held = self.held.pop(key)
        held.end = self.now
        if held.kind == "server":
            self.admission.record_end(key, self.now)
            with AllocationLedger(self.ledger).transaction(DEVICES) as pool:
                pool.release(key)
        else:
            owner, flavor = held.owner, None
            self.jobs.release(JobTicket(key.removeprefix("job:"), owner, flavor))

    def crash_and_restart(self, rng: random.Random) -> None:
        """Both processes die; some servers and jobs end while they are down; an hour
        later the hub and the job service start again and close what no longer runs."""
        died = [key for key in sorted(self.held) if rng.random() < 0.5]
        with AllocationLedger(self.ledger).transaction(DEVICES) as pool:
            for key in died:
                pool.release(key)  # their processes ended: the ledger drops them
        self.now += timedelta(hours=1, seconds=7)
        for key in died:
            self.held.pop(key).end = self.now
        self.start_services()
        running = AllocationLedger(self.ledger).snapshot(DEVICES).allocations
        # The hub: what CourseProfilesMixin.close_dangling_usage does at its first decision.
        shared_usage_store(self.usage_url).close_dangling(running, self.now, kinds=("server",))
        # The job service: the manager restores the jobs still running, then reconciles.
        for key, held in self.held.items():
            if held.kind == "job":
                allocation = running[key]
                self.jobs.restore(
                    JobTicket(key.removeprefix("job:"), held.owner, None),
                    {"allocation": allocation.to_dict()},
                )
        self.jobs.reconciled()


def test_a_term_of_use_reports_exactly_the_gpu_hours_allocated(tmp_path, usage_url, capsys):
    # Given a term of servers and jobs starting and stopping at odd moments
    rng = random.Random(13)
    term = Term(tmp_path, usage_url)
    end = datetime(2026, 10, 5, 9, 0, tzinfo=UTC)  # past the term's last day
    crashed = False
    jobs = 0
    while term.now < end:
        term.now += timedelta(minutes=rng.randint(3, 95), microseconds=rng.randint(0, 999_999))
        if not crashed and term.now > datetime(2026, 9, 24, tzinfo=UTC):
            term.crash_and_restart(rng)
            crashed = True
        action = rng.random()
        owner = rng.choice(sorted(PEOPLE))
        if action < 0.35:
            term.start_server(owner, rng.choice(PEOPLE[owner]))
        elif action < 0.55:
            jobs += 1
            term.start_job(owner, rng.choice(FLAVORS), jobs)
        elif term.held:
            term.stop(rng.choice(sorted(term.held)))
    for key in sorted(term.held):
        term.stop(key)
    assert crashed and term.budget_refusals > 0 and term.budget_grants > 0
    assert {h.share for h in term.history} >= {Fraction(1, 7), Fraction(1, 4), Fraction(1, 2), 2}

    # When the term's report is printed as CSV, per user
    status = gpuspawner_cli(
        ["usage", "--db", usage_url, "--catalog", str(term.catalog), "--term", "autumn-2026"]
        + ["--by", "user", "--format", "csv"]
    )
    assert status == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))

    # Then each user's GPU-hours are exactly their shares times the time held in the term
    expected: dict[str, Fraction] = defaultdict(Fraction)
    for held in term.history:
        expected[held.owner] += held.hours(TERM_BEGIN, TERM_END, end)
    reported = {row["user"]: Fraction(row["gpu_hours_exact"]) for row in rows}
    assert reported == {user: hours for user, hours in expected.items() if hours}
    for row in rows:
        assert abs(Fraction(row["gpu_hours"]) - reported[row["user"]]) <= Fraction(1, 2_000_000)

    # and by course and research allocation, servers and jobs apart, as the test counted them
    # (by course, research use is listed under its allocation: "research allocation vision")
    for by, field in (("course", "course"), ("allocation", "allocation")):
        status = gpuspawner_cli(
            ["usage", "--db", usage_url, "--from", "2026-09-14", "--to", "2026-10-04"]
            + ["--catalog", str(term.catalog), "--by", by, "--format", "csv"]
        )
        assert status == 0
        lines = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
        for kind in ("server", "job"):
            counted: dict[str, Fraction] = defaultdict(Fraction)
            for held in term.history:
                if held.kind == kind:
                    name = getattr(held, field) or ""
                    if by == "course" and not name and held.allocation:
                        name = f"research allocation {held.allocation}"
                    counted[name] += held.hours(TERM_BEGIN, TERM_END, end)
            got = {line[by]: Fraction(line[f"{kind}_gpu_hours"]) for line in lines}
            for name, hours in counted.items():
                assert abs(got.get(name, Fraction(0)) - hours) <= Fraction(1, 2_000_000)


@pytest.mark.parametrize("by", ["group", "term"])
def test_reports_by_group_and_term_come_from_the_same_record(tmp_path, usage_url, by, capsys):
    # Given s1 held a quarter GPU for 3 h across the term's end, and r1 a whole one for 2 h
    term = Term(tmp_path, usage_url)
    term.now = datetime(2026, 10, 4, 20, 0, tzinfo=UTC)  # 22:00 in Zurich, last day
    term.start_server("s1", "cs101")
    term.start_server("r1", "vision")
    term.now += timedelta(hours=2)
    term.stop("server:r1/")
    term.now += timedelta(hours=1)
    term.stop("server:s1/")

    # When reported by group or term over the week around it
    status = gpuspawner_cli(
        ["usage", "--db", usage_url, "--catalog", str(term.catalog), "--by", by]
        + ["--from", "2026-09-28", "--to", "2026-10-11", "--format", "json"]
    )
    assert status == 0
    report = json.loads(capsys.readouterr().out)
    got = {row[by]: Fraction(row["gpu_hours_exact"]) for row in report["rows"]}

    # Then the groups split it by person, and the term holds only its own part (till midnight)
    if by == "group":
        assert got == {"students": Fraction(3, 4), "staff": Fraction(2)}
    else:
        assert got == {"autumn-2026": Fraction(1, 2) + Fraction(2)}
    assert Fraction(report["total"]["gpu_hours_exact"]) == Fraction(3, 4) + 2
