"""Scenarios: a fair job queue among students.

A job waiting on its owner's own limit never holds back other people's jobs; the next
free slot goes to the person with the fewest running jobs; per-user limits hold for CPU
flavors too; and one person cannot fill the queue (a 429 with a sentence).

The jobs here run in a stand-in executor that ends a job when the test lets it, so the
scenarios are about the queue, not about kernels.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import ClassVar

import pytest

from gpuspawner.core.admission import GPUAdmission
from gpuspawner.policy import GPUDevice, UserIdentity, load_catalog
from jupyter_to_job.errors import JobQueueFull
from jupyter_to_job.executors import JobExecutor, JobOutcome, StopReason
from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, JobStatus
from jupyter_to_job.rest import as_api_error
from jupyter_to_job.runfiles import RunnerStatus
from jupyter_to_job.service.flavor_admission import FlavorAdmission, IdentityBook

from ..support import eventually
from ..support.job_managers import ManagerFactory, finished
from ..support.notebooks import notebook

GPUS = [
    GPUDevice("sim-0", 0, "RTX 4090", 24576, simulated=True),
    GPUDevice("sim-1", 1, "RTX 4090", 24576, simulated=True),
]
CATALOG = """\
flavors:
  - id: one-gpu
    title: One GPU
    gpu: {count: 1}
    max_running_per_user: 1
    access: {everyone: true}
  - id: cpu
    title: CPU only
    max_running_per_user: 1
    access: {everyone: true}
"""


class GatedExecutor(JobExecutor):
    """A job that runs until the test lets the job of its name end (or it is stopped)."""

    may_end: ClassVar[set[str]] = set()

    async def execute(self) -> JobOutcome:
        while self.job.name not in self.may_end and self.stop_reason is None:
            await asyncio.sleep(0.02)
        return JobOutcome(
            RunnerStatus(job_id=self.job_id, state=JobStatus.COMPLETED, message="done")
        )

    async def reattach(self) -> JobOutcome:
        return JobOutcome(None, vanished=True)

    async def still_running(self) -> bool:
        return False

    async def stop(self, reason: StopReason = StopReason.REQUEST) -> None:
        self.stop_reason = reason


@pytest.fixture(autouse=True)
def no_job_may_end_yet():
    GatedExecutor.may_end.clear()
    yield
    GatedExecutor.may_end.clear()


def flavor_capacity(tmp_path: Path) -> FlavorAdmission:
    (tmp_path / "catalog.yaml").write_text(CATALOG)
    catalog = load_catalog(tmp_path / "catalog.yaml")
    identities = IdentityBook(tmp_path / "identities.json")
    for name in ("alice", "bob", "carl"):
        identities.remember(UserIdentity(name))
    return FlavorAdmission(
        admission=GPUAdmission(fallback_catalog=catalog), devices=GPUS, identities=identities
    )


async def submit(manager: JobManager, owner: str, name: str, flavor: str | None = None) -> str:
    request = CreateJob(input_path=f"{name}.ipynb", flavor=flavor, output_formats=["ipynb"])
    created = await manager.create(owner, request, notebook=notebook("1"))
    return created.job_id


def running(manager: JobManager, job_id: str) -> bool:
    return manager.describe(job_id).status is JobStatus.RUNNING


async def test_a_job_waiting_on_its_owners_limit_does_not_hold_back_others(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given two GPUs, and alice with one GPU job running and nine more queued behind it
    manager = await make_manager(
        max_running_jobs=4, capacity=flavor_capacity(tmp_path), executor_class=GatedExecutor
    )
    alices = [await submit(manager, "alice", f"alice-{n}", "one-gpu") for n in range(10)]
    assert running(manager, alices[0])
    waiting = manager.describe(alices[1])
    assert waiting.status is JobStatus.QUEUED
    # Then her queued jobs say they wait on her own limit, not on the jobs ahead
    assert waiting.status_message == (
        "You already have 1 job running on One GPU; each person may run 1 at a time there. "
        "This job waits in the queue and starts when one of yours ends."
    )
    assert manager.describe(alices[9]).status_message == waiting.status_message

    # When bob submits a GPU job and carl a CPU job
    bobs = await submit(manager, "bob", "bob-0", "one-gpu")
    carls = await submit(manager, "carl", "carl-0", "cpu")

    # Then both start at once, on the free GPU and without one
    assert running(manager, bobs) and running(manager, carls)
    assert manager.describe(bobs).gpu is not None
    # and alice's queued jobs show their places, in her own order
    assert [manager.describe(i).queue_position for i in alices[1:]] == list(range(1, 10))

    # When her first job ends, her next one starts
    GatedExecutor.may_end.add("alice-0")
    await finished(manager, alices[0])
    await eventually(lambda: running(manager, alices[1]), what="alice's second job to start")
    assert manager.describe(alices[2]).status is JobStatus.QUEUED


async def test_the_next_free_slot_goes_to_the_student_with_fewest_running_jobs(
    make_manager: ManagerFactory,
) -> None:
    # Given one job slot, held by alice's first job, and nine more of hers queued
    manager = await make_manager(max_running_jobs=1, executor_class=GatedExecutor)
    alices = [await submit(manager, "alice", f"alice-{n}") for n in range(10)]
    assert running(manager, alices[0])
    # When bob submits one job
    bobs = await submit(manager, "bob", "bob-0")
    # Then it is first in line, with the slot as its reason, and alice's follow it
    bob = manager.describe(bobs)
    assert (bob.status, bob.queue_position) == (JobStatus.QUEUED, 1)
    assert bob.status_message == (
        "Waiting for a free job slot: 1 job is running, and at most 1 run at a time."
    )
    assert [manager.describe(i).queue_position for i in alices[1:]] == list(range(2, 11))
    assert manager.describe(alices[1]).status_message == (
        "Waiting for the jobs ahead of it to start."
    )

    # When alice's running job ends, bob's job takes the free slot
    GatedExecutor.may_end.add("alice-0")
    await finished(manager, alices[0])
    await eventually(lambda: running(manager, bobs), what="bob's job to start")
    assert manager.describe(alices[1]).status is JobStatus.QUEUED
    assert manager.describe(alices[1]).queue_position == 1


async def test_a_cpu_flavor_honours_the_per_user_limit(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given a CPU flavor that lets each person run one job, and slots for three
    manager = await make_manager(
        max_running_jobs=3, capacity=flavor_capacity(tmp_path), executor_class=GatedExecutor
    )
    # When alice submits three CPU jobs
    jobs = [await submit(manager, "alice", f"cpu-{n}", "cpu") for n in range(3)]
    # Then one runs and the others wait on her limit
    assert [manager.describe(i).status for i in jobs] == [
        JobStatus.RUNNING,
        JobStatus.QUEUED,
        JobStatus.QUEUED,
    ]
    assert "each person may run 1 at a time" in (manager.describe(jobs[1]).status_message or "")
    # and they run one after the other
    for name, job_id in zip(("cpu-0", "cpu-1"), jobs, strict=False):
        GatedExecutor.may_end.add(name)
        await finished(manager, job_id)
    await eventually(lambda: running(manager, jobs[2]), what="alice's third job to start")


async def test_one_student_cannot_fill_the_queue(make_manager: ManagerFactory) -> None:
    # Given one slot, taken by alice's job, and a cap of ten queued jobs per person
    manager = await make_manager(
        max_running_jobs=1, max_queued_jobs_per_user=10, executor_class=GatedExecutor
    )
    for n in range(11):  # one running, ten queued
        await submit(manager, "alice", f"alice-{n}")
    # When she submits one more
    with pytest.raises(JobQueueFull) as refused:
        await submit(manager, "alice", "alice-11")
    # Then it is refused with 429 and a sentence that says what to do
    answer = as_api_error(refused.value)
    assert (answer.status, answer.reason) == (429, "queue-full")
    assert answer.message == (
        "You already have 10 jobs waiting in the queue, and each person may have 10 queued "
        "at a time. Submit this job again when one of them has started, or stop a queued "
        "job you no longer need."
    )
    # while bob may still queue his
    bobs = await submit(manager, "bob", "bob-0")
    assert manager.describe(bobs).queue_position == 1
