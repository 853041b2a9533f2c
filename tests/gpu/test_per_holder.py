"""On a real GPU: four 1/4 jobs on one card, two working it and two idle; each job's own
use is read from NVML's per-process readings, attributed to the job through the allocation
ledger's holders (its runner, whose process tree the kernel runs in), as the course-sessions
service and the hub's metrics read it.

Where NVML names processes by pids of another PID namespace (the test runs in a container
whose processes the driver numbers otherwise), per-holder numbers cannot be told on this
machine: the scenario then checks that every holder gets the card's numbers, said to be
device-wide and why, and is skipped saying so."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuspawner.core.ledger import AllocationLedger
from gpuspawner.core.telemetry import NVMLTelemetry
from gpuspawner.holder_use import HolderUse, use_by_holder
from gpuspawner.process_owners import ledger_telemetry
from jupyter_to_job.models import JobStatus

from ..support import eventually
from ..support.job_managers import finished
from .gpu_jobs import (
    HANG_GUARD,
    LEDGER,
    busy_until,
    idle_until,
    log_of,
    needs_torch,
    printed,
    start_job,
)

BUSY = 20.0
IDLE = 5.0
WORKING = ("alice", "bob")
RESTING = ("carol", "dave")


@needs_torch
async def test_two_busy_and_two_idle_quarter_jobs_are_each_measured_for_themselves(
    gpu_manager, gpus, tmp_path: Path
):
    card = gpus[0]
    manager = await gpu_manager(devices=[card], ledger=True)
    stop = tmp_path / "stop"

    # Given four 1/4 jobs on one card: alice's and bob's multiply matrices, carol's and
    # dave's hold 1 GiB and run nothing
    jobs = {owner: await start_job(manager, owner, busy_until(stop)) for owner in WORKING}
    jobs |= {owner: await start_job(manager, owner, idle_until(stop)) for owner in RESTING}
    for owner, job in jobs.items():
        await eventually(
            lambda job=job: "ready" in printed(log_of(manager, job.job_id)),
            what=f"{owner}'s job to be ready on the GPU",
            timeout=HANG_GUARD,
        )
    keys = {owner: f"job:{job.job_id}" for owner, job in jobs.items()}
    ledger = tmp_path / LEDGER
    telemetry = ledger_telemetry(NVMLTelemetry(), ledger)

    def uses() -> dict[str, HolderUse]:
        pool = AllocationLedger(ledger).snapshot([card])
        return use_by_holder(telemetry.read(), pool)

    try:
        found = uses()
        if all(found[key].device_wide for key in keys.values()):
            reasons = {found[key].device_wide for key in keys.values()}
            if any(reason and "PID namespace" in reason for reason in reasons):
                # NVML's pids are of another PID namespace: the fallback is device-wide
                assert all(found[key].utilization_pct is not None for key in keys.values())
                pytest.skip(
                    "NVML names this card's processes by pids of another PID namespace here "
                    f"(a container): per-holder use cannot be told; checked the fallback: "
                    f"{sorted(r for r in reasons if r)[0]}"
                )

        # When the jobs' use is read until the working ones show theirs
        def told_apart() -> dict[str, HolderUse] | None:
            found = uses()
            working = all((found[keys[o]].utilization_pct or 0) > BUSY for o in WORKING)
            return found if working else None

        found = await eventually(
            told_apart, what="the working jobs' own utilisation", timeout=HANG_GUARD
        )

        # Then each job is measured for itself: the working ones busy, the resting ones idle
        # though they share the busy card, each with the memory it holds
        for owner in (*WORKING, *RESTING):
            use = found[keys[owner]]
            assert use.measured == "holder", (owner, use)
        for owner in RESTING:
            use = found[keys[owner]]
            assert use.utilization_pct is not None and use.utilization_pct < IDLE, (owner, use)
            if use.memory_used_mib is not None:  # the driver may not say, in a container
                assert use.memory_used_mib >= 1024, (owner, use)
    finally:
        stop.touch()
        for job in jobs.values():
            done = await finished(manager, job.job_id, timeout=HANG_GUARD)
            assert done.status is JobStatus.COMPLETED, log_of(manager, job.job_id)
