"""On a real GPU: JAX in a 1/4 job keeps the GPU and stays inside its quarter (issue 30)."""

from __future__ import annotations

import importlib.util

import pytest

from jupyter_to_job.models import CreateJob, JobStatus

from ..support.job_managers import finished
from ..support.notebooks import notebook

HANG_GUARD = 300

# Sizes relative to the share: 60 % of it fits, 120 % of it does not.
JAX_CELL = """
import os
import jax, jax.numpy as jnp
share = int(os.environ["GPUSPAWNER_GPU_MEMORY_MIB"]) * 2**20
print("platform", jax.devices()[0].platform)
print("names", sorted(n for n in os.environ if n.endswith("MEM_FRACTION")))
small = jnp.ones((int(share * 0.6) // 4,), dtype=jnp.float32)
small.block_until_ready()
print("allocated GiB", round(small.nbytes / 2**30, 1))
del small
try:
    big = jnp.ones((int(share * 1.2) // 4,), dtype=jnp.float32)
    big.block_until_ready()
    print("refused no")
except Exception as error:
    print("refused yes", type(error).__name__, "RESOURCE_EXHAUSTED" in str(error))
"""


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs JAX installed")
async def test_a_quarter_jobs_jax_sees_the_gpu_and_is_held_to_its_quarter(gpu_manager, gpus):
    if gpus[0].memory_mib < 80 * 1024:
        pytest.skip("the check is written for a GPU of 80 GiB or more")
    manager = await gpu_manager()

    created = await manager.create(
        "alice",
        CreateJob(input_path="jax.ipynb", flavor="quarter", output_formats=["ipynb"]),
        notebook=notebook(JAX_CELL),
    )
    job = await finished(manager, created.job_id, timeout=HANG_GUARD)
    log = manager.log_store.read(created.job_id).data

    assert job.status is JobStatus.COMPLETED, log
    assert "platform gpu" in log, log
    assert "names ['XLA_CLIENT_MEM_FRACTION']" in log or (
        "names ['XLA_PYTHON_CLIENT_MEM_FRACTION']" in log
    ), log
    assert "allocated GiB" in log and "refused yes" in log, log
