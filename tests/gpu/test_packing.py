"""On a real GPU: four 1/4 jobs share one card, and a fifth waits in the queue until one of
them ends."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from jupyter_to_job.models import JobStatus

from ..support import eventually
from ..support.job_managers import finished
from ..support.notebooks import wait_for_file
from .gpu_jobs import HANG_GUARD, log_of, printed, start_job

OWNERS = ("alice", "bob", "carol", "dave", "erin")

# Each job names its GPU and, where PyTorch is installed, makes a CUDA context on it (so
# the driver lists it as one of the card's processes); then it waits for its gate.
USES_THE_CARD = """
import os
print("visible", os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
try:
    import torch
except ImportError:
    print("context none", flush=True)
else:
    held = torch.ones(1, device="cuda")
    torch.cuda.synchronize()
    print("context yes", flush=True)
"""


def compute_processes(uuid: str) -> int:
    """How many processes the driver lists on the card (pids need not be visible here)."""
    import pynvml

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        return len(pynvml.nvmlDeviceGetComputeRunningProcesses(handle))
    finally:
        pynvml.nvmlShutdown()


async def test_four_quarter_jobs_share_one_card_and_a_fifth_waits_for_one_to_end(
    gpu_manager, gpus, tmp_path: Path
):
    # Given the job service hands out one card of this machine
    card = gpus[0]
    manager = await gpu_manager(devices=[card])
    gates = {owner: tmp_path / f"gate-{owner}" for owner in OWNERS}

    # When five people each submit a 1/4 job that holds the GPU until its gate opens
    jobs = {
        owner: await start_job(manager, owner, USES_THE_CARD, wait_for_file(gates[owner]))
        for owner in OWNERS
    }

    # Then the first four run on that card, each seeing it by its UUID,
    for owner in OWNERS[:4]:
        await eventually(
            lambda owner=owner: "visible" in printed(log_of(manager, jobs[owner].job_id)),
            what=f"{owner}'s job to start on the card",
            timeout=HANG_GUARD,
        )
        assert printed(log_of(manager, jobs[owner].job_id))["visible"] == card.id
    if importlib.util.find_spec("torch") is not None:
        # with a CUDA context each, as the driver lists them
        for owner in OWNERS[:4]:
            await eventually(
                lambda owner=owner: "context" in printed(log_of(manager, jobs[owner].job_id)),
                what=f"{owner}'s CUDA context",
                timeout=HANG_GUARD,
            )
        assert compute_processes(card.id) >= 4
    # and the fifth waits in the queue, saying why
    waiting = manager.describe(jobs["erin"].job_id)
    assert waiting.status is JobStatus.QUEUED
    assert waiting.queue_position == 1
    assert waiting.status_message is not None
    assert waiting.status_message.startswith("Waiting for GPU capacity"), waiting.status_message

    # When alice's job ends
    gates["alice"].touch()
    assert (await finished(manager, jobs["alice"].job_id, timeout=HANG_GUARD)).status is (
        JobStatus.COMPLETED
    )

    # Then the fifth starts on the quarter she freed, on the same card
    await eventually(
        lambda: "visible" in printed(log_of(manager, jobs["erin"].job_id)),
        what="erin's job to start",
        timeout=HANG_GUARD,
    )
    assert printed(log_of(manager, jobs["erin"].job_id))["visible"] == card.id
    for owner in OWNERS[1:]:
        gates[owner].touch()
    for owner in OWNERS[1:]:
        done = await finished(manager, jobs[owner].job_id, timeout=HANG_GUARD)
        assert done.status is JobStatus.COMPLETED, log_of(manager, jobs[owner].job_id)
