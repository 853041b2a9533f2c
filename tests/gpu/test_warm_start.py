"""On a real GPU: a 1/4 job handed a runner started ahead for its owner (a warm start) runs
its first cell on the GPU it was granted, in the kernel started ahead."""

from __future__ import annotations

import importlib.util

from jupyter_to_job.models import JobStatus

from .gpu_jobs import printed, run_job

FIRST_CELL = """
import os
print("visible", os.environ["CUDA_VISIBLE_DEVICES"])
print("fraction", os.environ.get("GPUSPAWNER_TORCH_MEMORY_FRACTION"))
try:
    import torch
except ImportError:
    print("product none")
else:
    a = torch.ones(1024, 1024, device="cuda")
    print("product", int((a @ a)[0, 0].item()))
"""


async def test_a_warm_started_quarter_jobs_first_cell_runs_on_its_gpu(gpu_manager, gpus):
    card = gpus[0]
    manager = await gpu_manager(devices=[card])
    # Given alice opened the Run as Job dialog: a runner was started ahead for her next
    # 1/4 job, its kernel with the GPU share such a job is expected to get
    expected = manager.capacity.expected_environment("alice", "quarter")
    assert expected is not None and expected["CUDA_VISIBLE_DEVICES"] == card.id
    assert manager.prewarm("alice", "quarter", environment=expected) == 1
    assert manager.warm_pool is not None
    assert await manager.warm_pool.wait_ready("alice", "quarter") == 1

    # When she submits a 1/4 job
    job, log = await run_job(manager, "alice", FIRST_CELL, "print('second cell')")

    # Then it ran warm, and its first cell printed from the GPU it was granted
    assert job.status is JobStatus.COMPLETED, log
    assert "the kernel was started ahead of the job (a warm start)" in log, log
    seen = printed(log)
    assert seen["visible"] == card.id, log
    assert float(seen["fraction"]) == 0.25, log
    if importlib.util.find_spec("torch") is not None:
        assert seen["product"] == "1024", log
    assert "[cell 1] second cell" in log
