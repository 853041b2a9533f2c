"""GPU-hour budgets on the job side: the job service's capacity hook records each job's
share × time, the flavor list tells the student what is left on the flavor's course
budget, and a job past the budget is refused at once with the sentence (HTTP 409)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from gpuspawner.accounting.store import UsageStore, close_shared_usage_store
from gpuspawner.core.admission import GPUAdmission
from gpuspawner.policy import GPUDevice, UserIdentity
from jupyter_to_job.access import Caller
from jupyter_to_job.errors import JobRefused
from jupyter_to_job.job_admission import JobGranted, JobTicket
from jupyter_to_job.jobs_api import JobsAPI
from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, JobStatus
from jupyter_to_job.scopes import WRITE_JOBS_SCOPE
from jupyter_to_job.service.flavor_admission import FlavorAdmission, IdentityBook

CATALOG = """\
courses:
  - id: cs101
    title: CS101
    enrolment: {users: [ana]}
    budget: {gpu_hours_per_student_per_week: 1}
    schedule:
      timezone: Europe/Zurich
      term: {first_day: 2026-09-01, last_day: 2026-12-31}
      windows: [{days: [Mon, Tue, Wed, Thu, Fri, Sat, Sun], start: "00:00", end: "23:59"}]
flavors:
  - {id: half-job, title: Half-GPU job, gpu: {fraction: 1/2}, access: {courses: [cs101]}}
  - {id: cpu-job, title: CPU job, access: {everyone: true}}
"""
WEDNESDAY = datetime(2026, 10, 7, 8, 0, tzinfo=UTC)


@pytest.fixture
def service(tmp_path):
    """The job service's parts as its app wires them: one admission with a usage record."""
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(CATALOG)
    url = f"sqlite:///{tmp_path / 'usage.sqlite'}"
    admission = GPUAdmission(catalog_path=str(catalog), usage_db_url=url, target="local")
    clock = [WEDNESDAY]
    book = IdentityBook(tmp_path / "identities.json")
    book.remember(UserIdentity("ana"))
    capacity = FlavorAdmission(
        admission=admission,
        devices=[GPUDevice("sim-0", 0, "RTX 4090", 24576, simulated=True)],
        identities=book,
        clock=lambda: clock[0],
    )
    config = Config()
    config.JobManager.root_dir = str(tmp_path / "jobs")
    manager = JobManager(config=config, capacity=capacity)
    manager.store.create_tables()
    api = JobsAPI(
        manager,
        mode="hub",
        catalog=admission.catalog_in_force,
        budget=admission.job_budget,
        clock=lambda: clock[0],
    )
    yield api, capacity, clock, url
    manager.store.close()
    close_shared_usage_store(url)


async def test_a_student_sees_her_budget_and_a_job_past_it_is_refused(service):
    api, capacity, clock, url = service
    ana = Caller("ana", scopes=frozenset({f"{WRITE_JOBS_SCOPE}!user=ana"}))

    # Given ana's half-GPU job ran for 1 h 30 min this week
    ticket = JobTicket("job-1", "ana", "half-job")
    assert isinstance(capacity.acquire(ticket), JobGranted)
    clock[0] += timedelta(hours=1, minutes=30)
    capacity.release(ticket)

    # Then the usage record holds 3/4 of a GPU-hour, charged to CS101
    (interval,) = UsageStore(url).intervals()
    assert (interval.kind, interval.course, interval.gpu_hours(now=clock[0])) == (
        "job",
        "cs101",
        0.75,
    )

    # and the Run as Job dialog's flavor list says what is left of the week's budget
    flavors = {f.id: f for f in (await api.flavors(ana)).flavors}
    assert flavors["half-job"].budget == (
        "0.2 of your 1 GPU-hours left this week (renews Monday 00:00, Europe/Zurich)"
    )
    assert not flavors["half-job"].budget_exhausted
    assert flavors["cpu-job"].budget is None
    # with the renewal as a moment, for the dialog to tell in its reader's zone
    assert flavors["half-job"].budget_pattern == (
        "0.2 of your 1 GPU-hours left this week (renews {0})"
    )
    (renewal,) = flavors["half-job"].budget_moments
    renews = datetime.fromisoformat(renewal)
    assert renewal.endswith("Z") and renews > clock[0]
    in_zurich = renews.astimezone(ZoneInfo("Europe/Zurich"))
    assert (in_zurich.strftime("%A %H:%M"), renews - clock[0] <= timedelta(days=7)) == (
        "Monday 00:00",
        True,
    )
    assert flavors["cpu-job"].budget_pattern is None and flavors["cpu-job"].budget_moments == []

    # When her next job runs 30 minutes (the budget is used up) and she submits another
    second = JobTicket("job-2", "ana", "half-job")
    assert isinstance(capacity.acquire(second), JobGranted)
    clock[0] += timedelta(minutes=30)
    capacity.release(second)
    notebook = nbformat.writes(new_notebook(cells=[new_code_cell("1 + 1")]))
    with pytest.raises(JobRefused) as refused:
        await api.manager.create(
            "ana", CreateJob(input_path="train.ipynb", flavor="half-job"), notebook=notebook
        )

    # Then it is refused at once with the sentence, and the list marks the flavor as used up
    assert refused.value.status == 409 and refused.value.code == "budget"
    assert refused.value.args[0] == (
        "You have used 1.0 of your 1 GPU-hours for CS101 this week; the budget renews on "
        "Monday 00:00 (Europe/Zurich). Ask your instructor if you need more, or run the job "
        "on a flavor without a GPU."
    )
    flavors = {f.id: f for f in (await api.flavors(ana)).flavors}
    assert flavors["half-job"].budget_exhausted
    assert api.manager.store.count(*JobStatus) == 0  # nothing was queued
