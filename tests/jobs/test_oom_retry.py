"""Scenarios: a local job with a checkpoint runs out of its flavor's memory. When the flavor
sets ``oom_retry_memory`` it is started again from its checkpoint with that memory (its
cgroup's limit is the larger one) and completes; without it the job fails once, and its
message says to choose a flavor with more memory.

The limits are real control groups, so these scenarios need root (or a delegated cgroup
subtree); elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpuspawner.core.cgroups import CgroupsUnavailable, detect_hierarchy
from gpuspawner.policy import GPUDevice
from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, JobCheckpoint, JobStatus
from jupyter_to_job.retries import no_more_memory
from tests.support import eventually
from tests.support.job_capacity import catalog_capacity
from tests.support.job_managers import ManagerFactory, finished

from ..support.notebooks import notebook, wait_for_file

MiB = 1024**2
CATALOG = """
flavors:
  - id: small-retry
    title: Small, retried with more memory
    resources: {memory: 256MiB}
    oom_retry_memory: 1GiB
    access: {everyone: true}
  - id: small
    title: Small
    resources: {memory: 256MiB}
    access: {everyone: true}
  - id: gpu-retry
    title: One GPU, retried with more memory
    gpu: {count: 1}
    resources: {memory: 256MiB}
    oom_retry_memory: 1GiB
    access: {everyone: true}
"""

PREPARE = (
    "import json, os, pathlib\n"
    "folder = pathlib.Path(os.environ['JUPYTER_TO_JOB_CHECKPOINT_DIR'])\n"
    "attempt = int(os.environ['JUPYTER_TO_JOB_ATTEMPT'])\n"
    "checkpoint = folder / 'prepared.json'\n"
    "if not checkpoint.exists():\n"
    "    checkpoint.write_text(json.dumps({'by': attempt}))\n"
    "prepared = json.loads(checkpoint.read_text())\n"
    "print(f'attempt {attempt} goes on from the preparation of attempt {prepared[\"by\"]}')\n"
)

# The limit the job's own control group has, as the job reads it (cgroup v1 or v2).
READ_LIMIT = (
    "def own_memory_limit():\n"
    "    lines = open('/proc/self/cgroup').read().splitlines()\n"
    "    for line in lines:\n"
    "        _, controllers, path = line.split(':', 2)\n"
    "        if 'memory' in controllers.split(','):\n"
    "            return open(f'/sys/fs/cgroup/memory{path}/memory.limit_in_bytes').read()\n"
    "    for line in lines:\n"
    "        _, controllers, path = line.split(':', 2)\n"
    "        if controllers == '':\n"
    "            return open(f'/sys/fs/cgroup{path}/memory.max').read()\n"
    "print('memory limit', own_memory_limit().strip(), flush=True)\n"
)

ALLOCATE = "block = bytearray(600 * 1024 * 1024)\nprint('allocated', len(block) // 2**20, 'MiB')\n"


@pytest.fixture(autouse=True)
def real_cgroups() -> None:
    try:
        detect_hierarchy()
    except CgroupsUnavailable as error:
        pytest.skip(f"needs cgroups to enforce the flavor's memory: {error}")


@pytest.fixture
async def manager(make_manager: ManagerFactory, tmp_path: Path) -> JobManager:
    """The job service: the catalog above, admitted by the same admission as servers."""
    capacity = catalog_capacity(
        tmp_path,
        CATALOG,
        ["alice", "bob"],
        devices=[GPUDevice("sim-0", 0, "RTX 4090", 24576, simulated=True)],
    )
    return await make_manager(capacity=capacity, executor={"warm_pool_size": 0})


async def run(manager: JobManager, flavor: str, *before: str) -> str:
    created = await manager.create(
        "alice",
        CreateJob(
            input_path="train.ipynb",
            flavor=flavor,
            output_formats=["ipynb"],
            checkpoint=JobCheckpoint(folder="ckpt", retries=2),
        ),
        notebook=notebook(PREPARE, *before, READ_LIMIT, ALLOCATE),
    )
    return created.job_id


async def test_a_job_out_of_memory_starts_again_with_more_and_completes(
    manager: JobManager,
) -> None:
    # Given a flavor of 256 MiB that allows a retry with 1 GiB, and a job that prepares a
    # checkpoint, then allocates 600 MiB
    job_id = await run(manager, "small-retry")

    # When it runs
    done = await finished(manager, job_id)

    # Then it ran out on attempt 1, started again with 1 GiB from its checkpoint, completed
    assert done.status is JobStatus.COMPLETED, done.status_message
    assert (done.attempt, done.max_attempts) == (2, 3)
    log = manager.read_log(job_id).data
    assert (
        "[job] ---- attempt 2 of 3: the job ran out of its 256 MiB of memory; "
        "starting again with 1 GiB from its checkpoint ----"
    ) in log
    assert f"memory limit {256 * MiB}" in log
    assert f"memory limit {1024 * MiB}" in log  # the second attempt's own cgroup
    assert "attempt 2 goes on from the preparation of attempt 1" in log
    assert log.count("allocated 600 MiB") == 1


async def test_without_oom_retry_memory_a_job_out_of_memory_fails_once_saying_what_to_do(
    manager: JobManager,
) -> None:
    # Given a flavor of 256 MiB without a retry with more memory
    job_id = await run(manager, "small")

    # When the job runs out of it
    done = await finished(manager, job_id)

    # Then it failed on its first attempt, and says to choose a flavor with more memory
    assert done.status is JobStatus.FAILED
    assert done.attempt == 1
    assert done.error is not None and done.error.ename == "OutOfMemory"
    assert done.status_message is not None
    assert "256 MiB" in done.status_message
    assert done.status_message.endswith(no_more_memory(None))
    assert "choose a flavor with more memory" in done.status_message
    assert "---- attempt 2" not in manager.read_log(job_id).data


async def test_a_retry_with_more_memory_waits_in_the_queue_for_the_gpu_as_any_job(
    manager: JobManager, tmp_path: Path
) -> None:
    # Given alice's job on the machine's only GPU, which will run out of its 256 MiB once
    # bob's job, for the same GPU, waits in the queue behind it
    alice_goes_on, bob_goes_on = tmp_path / "alice-goes-on", tmp_path / "bob-goes-on"
    hold_first = f"if attempt == 1:\n{textwrap.indent(wait_for_file(alice_goes_on), '    ')}"
    alice = await run(manager, "gpu-retry", hold_first)
    assert manager.describe(alice).status is JobStatus.RUNNING
    bob = await manager.create(
        "bob",
        CreateJob(input_path="wait.ipynb", flavor="gpu-retry", output_formats=["ipynb"]),
        notebook=notebook(wait_for_file(bob_goes_on)),
    )
    assert manager.describe(bob.job_id).status is JobStatus.QUEUED

    # When alice's job runs out of memory
    alice_goes_on.touch()

    # Then bob's job gets the GPU, and her retry waits for it, as any job would
    def alice_waits() -> bool:
        job = manager.describe(alice)
        return (
            job.status is JobStatus.QUEUED
            and job.attempt == 2
            and (job.status_message or "").startswith("Waiting for GPU capacity")
        )

    await eventually(alice_waits, what="alice's retry waiting for the GPU")
    assert manager.describe(bob.job_id).status is JobStatus.RUNNING
    # and once bob's job is done, hers completes with 1 GiB from its checkpoint
    bob_goes_on.touch()
    done = await finished(manager, alice)
    assert done.status is JobStatus.COMPLETED, done.status_message
    assert (await finished(manager, bob.job_id)).status is JobStatus.COMPLETED
    assert f"memory limit {1024 * MiB}" in manager.read_log(alice).data
