"""On a real GPU: PyTorch in a 1/4 job is held to its quarter of the card's memory."""

from __future__ import annotations

from jupyter_to_job.models import JobStatus

from .gpu_jobs import needs_torch, printed, run_job

# Sizes relative to the card: 20 % fits in a quarter share, 30 % does not.
ALLOCATES = """
import os, torch
total = torch.cuda.get_device_properties(0).total_memory
print("fraction", os.environ.get("GPUSPAWNER_TORCH_MEMORY_FRACTION"))
fits = torch.empty(int(total * 0.20), dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("twenty yes")
del fits
torch.cuda.empty_cache()
try:
    big = torch.empty(int(total * 0.30), dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    print("thirty allowed")
except torch.cuda.OutOfMemoryError:
    print("thirty refused")
"""


@needs_torch
async def test_a_quarter_jobs_pytorch_is_refused_above_a_quarter_of_the_memory(gpu_manager):
    manager = await gpu_manager()

    # When a 1/4 job allocates 20 % of the card, then 30 %
    job, log = await run_job(manager, "alice", ALLOCATES)

    # Then the share is applied to PyTorch: 20 % fits, 30 % is refused, and the job goes on
    assert job.status is JobStatus.COMPLETED, log
    seen = printed(log)
    assert float(seen["fraction"]) == 0.25, log
    assert seen["twenty"] == "yes", log
    assert seen["thirty"] == "refused", log


@needs_torch
async def test_a_whole_gpu_jobs_pytorch_is_not_held_to_a_quarter(gpu_manager):
    # The same job on a whole GPU, so the quarter's refusal above is the share's doing
    manager = await gpu_manager()
    job, log = await run_job(manager, "alice", ALLOCATES, flavor="whole")
    assert job.status is JobStatus.COMPLETED, log
    assert printed(log)["thirty"] == "allowed", log
