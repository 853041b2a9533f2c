"""The Run as Job dialog warms a job up: asking for the flavors starts a runner ahead for the
person asking, and their job of the default flavor then runs in it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from traitlets.config import Config

from gpuspawner.core.admission import GPUAdmission
from gpuspawner.policy import GPUDevice, UserIdentity
from jupyter_to_job.access import Caller
from jupyter_to_job.jobs_api import JobsAPI
from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, JobStatus
from jupyter_to_job.scopes import WRITE_JOBS_SCOPE
from jupyter_to_job.service.flavor_admission import FlavorAdmission, IdentityBook

from ..support import WAIT
from ..support.hubprocess import REPO_ROOT
from ..support.notebooks import notebook_json

GPU = [GPUDevice("sim-0", 0, "RTX 4090", 24576, simulated=True)]
NOW = datetime(2026, 10, 7, 8, 0, tzinfo=UTC)
CATALOG = """\
flavors:
  - {id: cpu-job, title: CPU job, access: {everyone: true}}
  - {id: quarter-gpu, title: A quarter GPU, gpu: {fraction: 1/4}, access: {everyone: true}}
"""


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[JobsAPI]:
    """The job service's API over a running manager whose jobs run locally."""
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(CATALOG)
    admission = GPUAdmission(catalog_path=str(catalog), target="local")
    book = IdentityBook(tmp_path / "identities.json")
    book.remember(UserIdentity("rita"))
    book.remember(UserIdentity("sam"))
    capacity = FlavorAdmission(admission=admission, devices=GPU, identities=book, clock=lambda: NOW)
    config = Config()
    config.JobManager.root_dir = str(tmp_path / "jobs")
    config.LocalExecutor.extra_environment = {"PYTHONPATH": str(REPO_ROOT)}
    manager = JobManager(config=config, capacity=capacity)
    await manager.start()
    try:
        yield JobsAPI(manager, mode="hub", catalog=admission.catalog_in_force, clock=lambda: NOW)
    finally:
        await asyncio.wait_for(manager.shutdown(stop_jobs=True), WAIT)


def caller(name: str) -> Caller:
    return Caller(name, scopes=frozenset({f"{WRITE_JOBS_SCOPE}!user={name}"}))


async def test_opening_the_run_as_job_dialog_starts_a_runner_for_the_next_job(api: JobsAPI):
    manager = api.manager
    assert manager.warm_pool is not None
    # When rita opens the Run as Job dialog, which asks for her flavors
    await api.flavors(caller("rita"))

    # Then a runner is started ahead for her, for the default flavor, and only one
    assert await manager.warm_pool.wait_ready("rita", "cpu-job") == 1
    (runner,) = manager.warm_pool.runners("rita", "cpu-job")
    await api.flavors(caller("rita"))
    assert [r.pid for r in manager.warm_pool.runners("rita", "cpu-job")] == [runner.pid]

    # And her job of that flavor runs in it, with the flavor's own environment
    request = CreateJob(input_path="job.ipynb", output_formats=["ipynb"])
    code = "import os\nprint('profile', os.environ.get('GPUSPAWNER_PROFILE'))"
    created = await api.create(caller("rita"), request, notebook_json(code))
    job = await asyncio.wait_for(manager.wait(created.job_id), WAIT)
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert manager.store.get(created.job_id).pid == runner.pid
    log = manager.log_store.path(created.job_id).read_text()
    assert "[cell 0] profile cpu-job" in log


# A cell telling whether its kernel was started before the job was submitted (the one
# started ahead) and which GPU it sees. Both times count from the machine's boot: the
# process's start in clock ticks (/proc), the submission on CLOCK_BOOTTIME.
KERNEL_CELL = (
    "import os, time\n"
    "ticks = int(open('/proc/self/stat').read().rpartition(')')[2].split()[19])\n"
    "started = ticks / os.sysconf('SC_CLK_TCK')\n"
    "print('kernel started ahead:', started < float(os.environ['SUBMITTED_AT']))\n"
    "print('gpu:', repr(os.environ.get('CUDA_VISIBLE_DEVICES')), "
    "os.environ.get('GPUSPAWNER_PROFILE'))"
)


async def run_kernel_cell(api: JobsAPI, name: str, flavor: str) -> tuple[str, int]:
    """Submit KERNEL_CELL as ``name``'s job of ``flavor``: (its log, its runner's pid)."""
    manager = api.manager
    submitted = f"{time.clock_gettime(time.CLOCK_BOOTTIME)}"
    code = f"import os\nos.environ['SUBMITTED_AT'] = {submitted!r}\n{KERNEL_CELL}"
    request = CreateJob(input_path="job.ipynb", output_formats=["ipynb"], flavor=flavor)
    created = await api.create(caller(name), request, notebook_json(code))
    job = await asyncio.wait_for(manager.wait(created.job_id), WAIT)
    assert job.status is JobStatus.COMPLETED, job.status_message
    log = manager.log_store.path(created.job_id).read_text()
    return log, manager.store.get(created.job_id).pid


async def test_in_the_job_service_the_job_runs_in_the_kernel_started_ahead(api: JobsAPI):
    # Given rita opened the Run as Job dialog (the flavors), so a runner waits for her
    manager = api.manager
    await api.flavors(caller("rita"))
    assert await manager.warm_pool.wait_ready("rita", "cpu-job") == 1
    (runner,) = manager.warm_pool.runners("rita", "cpu-job")

    # When she submits a CPU job: the hub's grant adds its own variables (the profile, no
    # GPU), and they are given to the kernel that was started ahead with the same GPU
    log, pid = await run_kernel_cell(api, "rita", "cpu-job")

    # Then the job ran in that runner and in its kernel, with no GPU and its own profile
    assert pid == runner.pid
    assert "[cell 0] kernel started ahead: True" in log
    assert "[cell 0] gpu: '' cpu-job" in log


async def test_a_gpu_job_keeps_the_warm_kernel_only_on_the_gpu_it_was_started_for(
    api: JobsAPI,
):
    manager = api.manager
    # Given rita's runner for a quarter GPU, started ahead with the GPU a job would get now
    assert manager.prewarm(
        "rita",
        "quarter-gpu",
        environment=manager.capacity.expected_environment("rita", "quarter-gpu"),
    )
    assert await manager.warm_pool.wait_ready("rita", "quarter-gpu") == 1

    # When her quarter-GPU job is granted that GPU
    log, _ = await run_kernel_cell(api, "rita", "quarter-gpu")

    # Then it runs in the kernel started ahead, which sees that GPU
    assert "[cell 0] kernel started ahead: True" in log
    assert "[cell 0] gpu: '0' quarter-gpu" in log

    # And sam's runner, started ahead for another GPU than the one his job is granted:
    # his job gets a kernel of its own, on its own GPU (never one that sees another GPU)
    assert manager.prewarm("sam", "quarter-gpu", environment={"CUDA_VISIBLE_DEVICES": "7"})
    assert await manager.warm_pool.wait_ready("sam", "quarter-gpu") == 1
    log, _ = await run_kernel_cell(api, "sam", "quarter-gpu")
    assert "[cell 0] kernel started ahead: False" in log
    assert "[cell 0] gpu: '0' quarter-gpu" in log
