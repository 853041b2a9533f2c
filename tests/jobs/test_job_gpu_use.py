"""Scenario: each job's own GPU use, on one machine with the allocation ledger the hub
shares. The ledger records each job's runner as its slice's holder; the kernel that does
the work runs under the runner, and the readings (here the simulated file, in NVML's shape:
pid, SM utilisation, memory) name the kernel. What tests/gpu/test_per_holder.py checks on
a real GPU, with simulated devices and real runners and kernels."""

from __future__ import annotations

from pathlib import Path

from gpuspawner.core.admission import GPUAdmission
from gpuspawner.core.ledger import AllocationLedger
from gpuspawner.core.telemetry import (
    DeviceReading,
    ProcessReading,
    SimulatedTelemetry,
    write_readings,
)
from gpuspawner.holder_use import HolderUse, use_by_holder
from gpuspawner.policy import GPUDevice, UserIdentity, load_catalog
from gpuspawner.process_owners import ledger_telemetry
from jupyter_to_job.models import CreateJob, JobStatus
from jupyter_to_job.service.flavor_admission import FlavorAdmission, IdentityBook
from tests.support import eventually
from tests.support.job_managers import ManagerFactory, finished

from ..support.notebooks import notebook, wait_for_file

GPU = GPUDevice("sim-0", 0, "H200", 143771, simulated=True)
CATALOG = """\
flavors:
  - {id: quarter, title: A quarter of a GPU, gpu: {fraction: 1/4}, access: {everyone: true}}
"""
KERNEL_PID = "import os\nprint('kernel', os.getpid(), flush=True)"


def ledger_capacity(tmp_path: Path, ledger: Path) -> FlavorAdmission:
    (tmp_path / "catalog.yaml").write_text(CATALOG)
    identities = IdentityBook(tmp_path / "identities.json")
    for name in ("alice", "bob"):
        identities.remember(UserIdentity(name))
    return FlavorAdmission(
        admission=GPUAdmission(fallback_catalog=load_catalog(tmp_path / "catalog.yaml")),
        devices=[GPU],
        identities=identities,
        ledger_path=str(ledger),
    )


def kernel_pid(log: str) -> int | None:
    for line in log.splitlines():
        if line.startswith("[cell 0] kernel "):
            return int(line.rsplit(" ", 1)[1])
    return None


async def test_each_jobs_kernel_is_counted_for_its_job_through_the_ledger(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given alice's and bob's 1/4 jobs running on one card, sharing the hub's ledger
    ledger = tmp_path / "gpu-allocations.json"
    gate = tmp_path / "gate"
    manager = await make_manager(max_running_jobs=2, capacity=ledger_capacity(tmp_path, ledger))
    jobs = {}
    for owner in ("alice", "bob"):
        created = await manager.create(
            owner,
            CreateJob(input_path=f"{owner}.ipynb", flavor="quarter", output_formats=["ipynb"]),
            notebook=notebook(KERNEL_PID, wait_for_file(gate)),
        )
        jobs[owner] = created.job_id
    kernels = {
        owner: await eventually(
            lambda job_id=job_id: kernel_pid(manager.read_log(job_id).data),
            what=f"{owner}'s kernel",
        )
        for owner, job_id in jobs.items()
    }

    # When the card reads busy because of alice's kernel alone
    readings = tmp_path / "gpus.json"
    processes = (
        ProcessReading(kernels["alice"], 83.0, 5000),
        ProcessReading(kernels["bob"], 0.0, 1200),
    )
    write_readings(readings, [DeviceReading("sim-0", 0, 83.0, 6200, 143771, 60.0, processes)])
    telemetry = ledger_telemetry(SimulatedTelemetry(readings), ledger, simulated=True)
    uses = use_by_holder(telemetry.read(), AllocationLedger(ledger).snapshot([GPU]))

    # Then each kernel counts for its own job: alice's busy, bob's idle, per holder
    assert uses == {
        f"job:{jobs['alice']}": HolderUse(f"job:{jobs['alice']}", 83.0, 5000),
        f"job:{jobs['bob']}": HolderUse(f"job:{jobs['bob']}", 0.0, 1200),
    }

    gate.touch()
    for job_id in jobs.values():
        assert (await finished(manager, job_id)).status is JobStatus.COMPLETED
