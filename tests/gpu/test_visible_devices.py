"""On a real GPU: a job sees exactly the GPU it was granted, named by its UUID in
CUDA_VISIBLE_DEVICES (and, where PyTorch is installed, CUDA sees that one device)."""

from __future__ import annotations

import importlib.util

import pytest

from jupyter_to_job.models import JobStatus

from .gpu_jobs import printed, run_job

SEES = """
import os
print("visible", os.environ["CUDA_VISIBLE_DEVICES"])
try:
    import torch
except ImportError:
    print("torch none")
else:
    count = torch.cuda.device_count()
    uuid = getattr(torch.cuda.get_device_properties(0), "uuid", None) if count else None
    print("torch", count, f"GPU-{uuid}" if uuid is not None else "no-uuid")
"""


@pytest.mark.parametrize("flavor", ["quarter", "whole"])
async def test_a_job_sees_its_gpu_by_uuid(gpu_manager, gpus, flavor):
    manager = await gpu_manager()

    # When a job runs on a quarter of a GPU, or on a whole one
    job, log = await run_job(manager, "alice", SEES, flavor=flavor)

    # Then it completes seeing one GPU of this machine, named by its UUID (never an index,
    # which CUDA and NVML may number differently)
    assert job.status is JobStatus.COMPLETED, log
    seen = printed(log)
    assert seen["visible"] in {gpu.id for gpu in gpus}, log
    assert job.gpu is not None and job.gpu.device_ids == [seen["visible"]]
    # And CUDA, asked through PyTorch where it is installed, sees that one device
    if importlib.util.find_spec("torch") is not None:
        count, _, uuid = seen["torch"].partition(" ")
        assert count == "1", log
        assert uuid in (seen["visible"], "no-uuid"), log
