"""Scenario: a job's GPU slice lives with the job's own process, not with the job service.

With the allocation ledger the hub shares, the slice a running job holds is recorded as
held by its runner process: it stays while the service restarts (or dies with a crashed
hub), and it is free again as soon as the runner is gone, whoever notices.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from gpuspawner.core.admission import GPUAdmission
from gpuspawner.core.ledger import AllocationLedger, ProcessHolder
from gpuspawner.policy import GPUDevice, GPUShare, UserIdentity, load_catalog
from jupyter_to_job.executors import JobExecutor, JobOutcome, StopReason
from jupyter_to_job.job_admission import JobAdmission, JobGranted, JobTicket
from jupyter_to_job.models import CreateJob, JobStatus
from jupyter_to_job.runfiles import RunnerStatus, read_status
from jupyter_to_job.service.flavor_admission import FlavorAdmission, IdentityBook
from tests.support import eventually
from tests.support.job_managers import ManagerFactory, finished

from ..support.notebooks import notebook, wait_for_file

GPU = GPUDevice("sim-0", 0, "RTX 4090", 24576, simulated=True)
WHOLE_GPU = GPUShare(count=1)
CATALOG = """\
flavors:
  - id: one-gpu
    title: One GPU
    gpu: {count: 1}
    access: {everyone: true}
"""


def flavor_capacity(tmp_path: Path, ledger: Path) -> FlavorAdmission:
    (tmp_path / "catalog.yaml").write_text(CATALOG)
    catalog = load_catalog(tmp_path / "catalog.yaml")
    identities = IdentityBook(tmp_path / "identities.json")
    for name in ("alice", "bob"):
        identities.remember(UserIdentity(name))
    return FlavorAdmission(
        admission=GPUAdmission(fallback_catalog=catalog),
        devices=[GPU],
        identities=identities,
        ledger_path=str(ledger),
    )


def gpu_job(name: str) -> CreateJob:
    return CreateJob(input_path=f"{name}.ipynb", flavor="one-gpu", output_formats=["ipynb"])


def runner_of(manager, job_id: str) -> ProcessHolder:  # type: ignore[no-untyped-def]
    status = read_status(manager.job_files(job_id))
    assert status is not None and status.runner_pid is not None
    holder = ProcessHolder.of_pid(status.runner_pid)
    assert holder is not None
    return holder


async def test_a_running_jobs_slice_is_held_by_its_runner_across_a_restart_of_the_service(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given a job service sharing the hub's ledger, running alice's job on the one GPU
    ledger_path = tmp_path / "gpu-allocations.json"
    ledger = AllocationLedger(ledger_path)
    root, gate = tmp_path / "root", tmp_path / "gate"
    before = await make_manager(root=root, capacity=flavor_capacity(tmp_path, ledger_path))
    job = await before.create("alice", gpu_job("a"), notebook=notebook(wait_for_file(gate)))
    await eventually(lambda: before.describe(job.job_id).current_cell == 0, what="the job to run")
    key = f"job:{job.job_id}"

    # When the service stops (its jobs run on) and a new instance starts
    await before.shutdown()
    runner = runner_of(before, job.job_id)
    assert ledger.holders() == {key: runner}
    after = await make_manager(root=root, capacity=flavor_capacity(tmp_path, ledger_path))

    # Then the new instance adopts the job, whose runner still holds the GPU
    assert after.reconcile_report is not None
    assert after.reconcile_report.adopted == [job.job_id]
    assert ledger.holders() == {key: runner}
    waiting = await after.create("bob", gpu_job("b"), notebook=notebook("print('bob')"))
    await eventually(
        lambda: (after.describe(waiting.job_id).status_message or "").startswith(
            "Waiting for GPU capacity: All GPUs are taken"
        ),
        what="bob's job to wait for the GPU",
    )

    # When that service stops too, and alice's runner dies meanwhile (killed outright)
    await after.shutdown()
    status = read_status(after.job_files(job.job_id))
    assert status is not None and status.kernel_pid is not None
    os.killpg(runner.pid, signal.SIGKILL)
    os.killpg(status.kernel_pid, signal.SIGKILL)
    await eventually(lambda: not runner.is_alive(), what="alice's runner to die")

    # Then the GPU is free in the ledger, with no service running to release it
    assert ledger.snapshot([GPU]).how_many_fit(WHOLE_GPU) == 1
    # And the next service instance finds alice's job lost and gives the GPU to bob's
    last = await make_manager(root=root, capacity=flavor_capacity(tmp_path, ledger_path))
    assert (await finished(last, job.job_id)).status is JobStatus.FAILED
    assert (await finished(last, waiting.job_id)).status is JobStatus.COMPLETED
    assert ledger.holders() == {}


class RecordingCapacity(JobAdmission):
    """Every job may start; records which process each job's slice is handed to."""

    def __init__(self) -> None:
        self.held: list[tuple[str, int, float]] = []

    def acquire(self, ticket: JobTicket) -> JobGranted:
        return JobGranted()

    def hold(self, ticket: JobTicket, pid: int, start_time: float) -> None:
        self.held.append((ticket.job_id, pid, start_time))


class ReportingExecutor(JobExecutor):
    """A job "process" that is this test's own, reported as an executor reports its runner."""

    async def execute(self) -> JobOutcome:
        me = ProcessHolder.this_process()
        self.process_started(me.pid, me.start_time)
        return JobOutcome(
            RunnerStatus(job_id=self.job_id, state=JobStatus.COMPLETED, message="done")
        )

    async def reattach(self) -> JobOutcome:
        return JobOutcome(None, vanished=True)

    async def still_running(self) -> bool:
        return False

    async def stop(self, reason: StopReason = StopReason.REQUEST) -> None:
        self.stop_reason = reason


async def test_an_executor_reporting_its_process_hands_the_jobs_slice_to_it(
    make_manager: ManagerFactory,
) -> None:
    # Given a manager whose executor reports the process it started
    capacity = RecordingCapacity()
    manager = await make_manager(capacity=capacity, executor_class=ReportingExecutor)
    # When a job runs
    created = await manager.create("alice", CreateJob(input_path="a.ipynb"), notebook=notebook("1"))
    assert (await finished(manager, created.job_id)).status is JobStatus.COMPLETED
    # Then the capacity hook heard which process holds that job's slice
    me = ProcessHolder.this_process()
    assert capacity.held == [(created.job_id, me.pid, me.start_time)]


def test_a_job_slice_is_not_held_without_a_shared_ledger(tmp_path: Path) -> None:
    # The service's own pool ends with the service: nothing to hand over
    (tmp_path / "catalog.yaml").write_text(CATALOG)
    catalog = load_catalog(tmp_path / "catalog.yaml")
    capacity = FlavorAdmission(
        admission=GPUAdmission(fallback_catalog=catalog),
        devices=[GPU],
        identities=IdentityBook(tmp_path / "identities.json"),
    )
    ticket = JobTicket("j1", "alice", "one-gpu")
    assert isinstance(capacity.acquire(ticket), JobGranted)
    capacity.hold(ticket, os.getpid(), ProcessHolder.this_process().start_time)
    assert not (tmp_path / "gpu-allocations.json").exists()
