"""The job service's capacity hook: ``admit_job`` decides, a full GPU means "wait in the queue".

One simulated 24 GiB GPU; the course flavor takes half of it. Scenarios from the queue's
point of view: who starts, who waits (and the sentence they see), who can never start.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpuspawner.core.admission import GPUAdmission
from gpuspawner.core.ledger import AllocationLedger
from gpuspawner.policy import GPUDevice, UserIdentity, load_catalog
from jupyter_to_job.errors import JobRefused
from jupyter_to_job.job_admission import JobGranted, JobTicket, JobWaits
from jupyter_to_job.service.flavor_admission import FlavorAdmission, IdentityBook

GPU = [GPUDevice("sim-0", 0, "RTX 4090", 24576, simulated=True)]
NOW = datetime(2026, 10, 5, 12, 0, tzinfo=UTC)
STUDENT = frozenset({"ml101-students"})

CATALOG = f"""\
courses:
  - id: ml101
    title: ML 101
    instructors: [ines]
    enrolment: {{groups: [ml101-students]}}
    schedule:
      timezone: UTC
      term: {{first_day: {(NOW - timedelta(days=30)).date()}, last_day: {(NOW + timedelta(days=30)).date()}}}
      windows: [{{day: Mon, start: "10:00", end: "12:00"}}]
flavors:
  - id: half-gpu
    title: Half a GPU
    gpu: {{fraction: 1/2}}
    environment: {{variables: {{HF_HOME: /data/hf}}}}
    access: {{courses: [ml101]}}
  - id: two-gpus
    title: Two GPUs
    gpu: {{count: 2}}
    access: {{everyone: true}}
  - id: cpu-job
    title: CPU
    max_running_per_user: 1
    access: {{everyone: true}}
"""


@pytest.fixture
def book(tmp_path):
    identities = IdentityBook(tmp_path / "identities.json")
    for name in ("alice", "bob", "carl"):
        identities.remember(UserIdentity(name, STUDENT))
    return identities


def make_capacity(tmp_path, book, **kwargs):
    (tmp_path / "catalog.yaml").write_text(CATALOG)
    catalog = load_catalog(tmp_path / "catalog.yaml")
    return FlavorAdmission(
        admission=GPUAdmission(fallback_catalog=catalog),
        devices=GPU,
        identities=book,
        clock=lambda: NOW,
        **kwargs,
    )


def ticket(number: int, owner: str, flavor: str = "half-gpu") -> JobTicket:
    return JobTicket(f"job-{number}", owner, flavor)


def test_jobs_take_gpu_shares_until_the_gpu_is_full_then_wait_with_the_reason(tmp_path, book):
    capacity = make_capacity(tmp_path, book)
    # Given alice and bob's jobs each holding half of the one GPU
    first, second = capacity.acquire(ticket(1, "alice")), capacity.acquire(ticket(2, "bob"))
    assert isinstance(first, JobGranted) and isinstance(second, JobGranted)
    assert first.environment["CUDA_VISIBLE_DEVICES"] == "0"
    assert first.environment["HF_HOME"] == "/data/hf"  # the flavor's own variables
    assert first.gpu and first.gpu["device_ids"] == ["sim-0"]
    # When carl's job asks for another half, it waits, and is told why
    waiting = capacity.acquire(ticket(3, "carl"))
    assert isinstance(waiting, JobWaits) and "All GPUs are taken" in waiting.reason
    # Then it starts once alice's job has ended
    capacity.release(ticket(1, "alice"))
    assert isinstance(capacity.acquire(ticket(3, "carl")), JobGranted)


def test_a_second_job_of_the_same_person_waits_for_the_first(tmp_path, book):
    capacity = make_capacity(tmp_path, book)
    assert isinstance(capacity.acquire(ticket(1, "alice")), JobGranted)
    again = capacity.acquire(ticket(2, "alice"))
    assert isinstance(again, JobWaits) and "waits in the queue" in again.reason


def test_a_cpu_flavor_honours_the_per_user_limit_and_waits_on_its_owner_only(tmp_path, book):
    capacity = make_capacity(tmp_path, book)
    # Given alice running one job on a CPU flavor that allows one per person
    assert isinstance(capacity.acquire(ticket(1, "alice", "cpu-job")), JobGranted)
    # When she starts a second one, it waits on her own limit
    again = capacity.acquire(ticket(2, "alice", "cpu-job"))
    assert isinstance(again, JobWaits) and again.own_limit
    assert "You already have 1 job running on CPU" in again.reason
    # while bob's CPU job starts
    assert isinstance(capacity.acquire(ticket(3, "bob", "cpu-job")), JobGranted)
    # Then alice's second job starts once her first has ended
    capacity.release(ticket(1, "alice", "cpu-job"))
    assert isinstance(capacity.acquire(ticket(2, "alice", "cpu-job")), JobGranted)


def test_running_jobs_adopted_after_a_restart_count_toward_the_limit(tmp_path, book):
    # Given a restarted service that adopts alice's running CPU job
    capacity = make_capacity(tmp_path, book)
    capacity.restore(ticket(1, "alice", "cpu-job"), None)
    # Then her next CPU job waits for it
    waiting = capacity.acquire(ticket(2, "alice", "cpu-job"))
    assert isinstance(waiting, JobWaits) and waiting.own_limit


def test_a_full_gpu_is_a_wait_for_everyone_not_an_own_limit(tmp_path, book):
    capacity = make_capacity(tmp_path, book)
    capacity.acquire(ticket(1, "alice"))
    capacity.acquire(ticket(2, "bob"))
    full = capacity.acquire(ticket(3, "carl"))
    assert isinstance(full, JobWaits) and not full.own_limit


def test_jobs_that_can_never_start_are_refused(tmp_path, book):
    capacity = make_capacity(tmp_path, book)
    with pytest.raises(JobRefused) as too_large:
        capacity.validate(ticket(1, "alice", "two-gpus"))
    assert too_large.value.code == "too-large"
    with pytest.raises(JobRefused) as outsider:  # not enrolled: the policy refuses for good
        capacity.acquire(ticket(2, "mallory"))
    assert outsider.value.code == "not-entitled"
    with pytest.raises(JobRefused) as gone:
        capacity.validate(ticket(3, "alice", "removed-flavor"))
    assert gone.value.code == "unknown-flavor"


def test_a_cpu_flavor_sees_no_gpu(tmp_path, book):
    grant = make_capacity(tmp_path, book).acquire(ticket(1, "alice", "cpu-job"))
    assert isinstance(grant, JobGranted) and grant.gpu is None
    assert grant.environment["CUDA_VISIBLE_DEVICES"] == ""


def test_owner_identities_survive_a_restart_of_the_service(tmp_path, book):
    reloaded = IdentityBook(tmp_path / "identities.json")
    assert reloaded.get("alice") == UserIdentity("alice", STUDENT)
    assert reloaded.get("stranger") == UserIdentity("stranger")


def test_jobs_and_servers_share_one_allocation_ledger(tmp_path, book):
    # Given two processes' views of the same ledger (the hub's spawner and this service)
    ledger = str(tmp_path / "gpu-allocations.json")
    service = make_capacity(tmp_path, book, ledger_path=ledger)
    other = make_capacity(tmp_path, book, ledger_path=ledger)
    assert isinstance(service.acquire(ticket(1, "alice")), JobGranted)
    assert isinstance(other.acquire(ticket(2, "bob")), JobGranted)
    # Then the GPU is full for both
    assert isinstance(service.acquire(ticket(3, "carl")), JobWaits)
    other.release(ticket(2, "bob"))
    assert isinstance(service.acquire(ticket(3, "carl")), JobGranted)


OWN_SERVER_CATALOG = """\
standing:
  - id: dev
    title: Development share
    gpu: {fraction: 1/4}
flavors:
  - id: whole-gpu
    title: One whole GPU
    gpu: {count: 1}
    access: {everyone: true}
  - id: cpu-job
    title: CPU
    access: {everyone: true}
"""


def test_a_job_behind_its_owners_own_server_says_so_before_and_after_submitting(tmp_path, book):
    # Given carl's development server holds a quarter of the only GPU (in the ledger the
    # hub's LocalGPUSpawner shares with this service)
    ledger = tmp_path / "gpu-allocations.json"
    (tmp_path / "catalog.yaml").write_text(OWN_SERVER_CATALOG)
    admission = GPUAdmission(fallback_catalog=load_catalog(tmp_path / "catalog.yaml"))
    capacity = FlavorAdmission(
        admission=admission,
        devices=GPU,
        identities=book,
        clock=lambda: NOW,
        ledger_path=str(ledger),
    )
    with AllocationLedger(ledger).transaction(GPU) as pool:
        dev = admission.catalog().standing_by_id["dev"]
        pool.allocate(
            "server:carl/", owner="carl", profile_id="dev", course_id=None, share=dev.share
        )

    # When carl opens the Run as Job dialog
    mine = capacity.forecasts("carl", {"whole-gpu": 0}).get("whole-gpu")
    # Then it tells him, before he submits, that the job would wait behind his own server
    assert mine is not None and mine.starts_now is False
    assert mine.message.startswith(
        "Your own server (Development share) holds the GPU this job needs, so the job "
        "waits in the queue and starts by itself when your server stops."
    )
    assert "stop your server" in mine.message
    # And a CPU job would start at once
    cpu = capacity.forecasts("carl", {"cpu-job": 0}).get("cpu-job")
    assert cpu is not None and cpu.starts_now and cpu.message == "Starts now: it needs no GPU."
    # And alice, whose own server holds nothing, is told the GPU is in use, for a job
    theirs = capacity.forecasts("alice", {"whole-gpu": 0}).get("whole-gpu")
    assert theirs is not None and theirs.starts_now is False
    assert "All GPUs are taken right now" in theirs.message
    assert "The job waits in the queue and starts by itself when one frees up." in theirs.message
    assert "Try again" not in theirs.message and "profile without a GPU" not in theirs.message

    # When he submits anyway, the queued job says the same
    waiting = capacity.acquire(ticket(1, "carl", "whole-gpu"))
    assert isinstance(waiting, JobWaits) and waiting.reason == mine.message
    # And nothing was booked by asking
    assert [a.key for a in AllocationLedger(ledger).snapshot(GPU).allocations.values()] == [
        "server:carl/"
    ]

    # When his server stops, the same job starts
    with AllocationLedger(ledger).transaction(GPU) as pool:
        pool.release("server:carl/")
    after = capacity.forecasts("carl", {"whole-gpu": 0}).get("whole-gpu")
    assert after is not None and after.starts_now and after.message == "Starts now on a free GPU."
    assert isinstance(capacity.acquire(ticket(1, "carl", "whole-gpu")), JobGranted)


def test_a_flavor_on_several_nodes_is_refused_on_one_machine_saying_why(tmp_path, book):
    # Given a hub on one machine whose catalog has a job flavor on two nodes
    (tmp_path / "catalog.yaml").write_text(
        CATALOG + "  - {id: two-nodes, title: Two nodes, gpu: {count: 1, nodes: 2}, "
        "access: {everyone: true}}\n"
    )
    capacity = FlavorAdmission(
        admission=GPUAdmission(fallback_catalog=load_catalog(tmp_path / "catalog.yaml")),
        devices=GPU,
        identities=book,
        clock=lambda: NOW,
    )
    # When a job of it is submitted, it is refused at once (a 4xx), saying why
    with pytest.raises(JobRefused) as refused:
        capacity.validate(ticket(1, "alice", "two-nodes"))
    assert 400 <= refused.value.status < 500
    assert str(refused.value) == (
        "This flavor asks for 2 nodes, but a job on 2 nodes needs jobs to run on Kubernetes: "
        "on one machine a job runs as one process on that machine, so it cannot span several "
        "nodes. Choose a flavor on one node, or ask the hub admins to run this one on their "
        "cluster."
    )
