"""On a real GPU: the device utilisation the hub reads from NVML is high while a job works
the card and falls back to idle when it stops."""

from __future__ import annotations

from pathlib import Path

from gpuspawner.core.telemetry import DeviceReading, NVMLTelemetry
from jupyter_to_job.models import JobStatus

from ..support import eventually
from ..support.job_managers import finished
from .gpu_jobs import HANG_GUARD, busy_until, log_of, needs_torch, printed, start_job

BUSY = 50.0
IDLE = 5.0


def reading_of(telemetry: NVMLTelemetry, uuid: str) -> DeviceReading:
    (reading,) = [r for r in telemetry.read() if r.uuid == uuid]
    return reading


@needs_torch
async def test_device_utilisation_reads_busy_while_a_job_works_and_idle_after(
    gpu_manager, gpus, tmp_path: Path
):
    card = gpus[0]
    telemetry = NVMLTelemetry()
    manager = await gpu_manager(devices=[card])

    # Given the card idle (nothing of this test runs on it yet)
    await eventually(
        lambda: reading_of(telemetry, card.id).utilization_pct < IDLE,
        what=f"the card to read idle (below {IDLE} %)",
        timeout=HANG_GUARD,
    )

    # When a 1/4 job multiplies matrices on it
    stop = tmp_path / "stop"
    job = await start_job(manager, "alice", busy_until(stop))
    await eventually(
        lambda: "ready" in printed(log_of(manager, job.job_id)),
        what="the job to be busy on the GPU",
        timeout=HANG_GUARD,
    )

    # Then NVML reads the card busy
    await eventually(
        lambda: reading_of(telemetry, card.id).utilization_pct > BUSY,
        what=f"the card to read busy (above {BUSY} %)",
        timeout=HANG_GUARD,
    )

    # And once the job has stopped, idle again
    stop.touch()
    done = await finished(manager, job.job_id, timeout=HANG_GUARD)
    assert done.status is JobStatus.COMPLETED, log_of(manager, job.job_id)
    await eventually(
        lambda: reading_of(telemetry, card.id).utilization_pct < IDLE,
        what=f"the card to read idle again (below {IDLE} %)",
        timeout=HANG_GUARD,
    )
