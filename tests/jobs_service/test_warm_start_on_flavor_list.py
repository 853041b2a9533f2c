"""The Run as Job dialog warms a job up: asking for the flavors starts a runner ahead for the
person asking, and their job of the default flavor then runs in it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from traitlets.config import Config

from gpuspawner.grant import GPUAdmission
from gpuspawner.policy import GPUDevice, UserIdentity
from jupyter_to_job.access import Caller
from jupyter_to_job.jobs_api import JobsAPI
from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, JobStatus
from jupyter_to_job.scopes import WRITE_JOBS_SCOPE
from jupyter_to_job.service.capacity import FlavorCapacity, IdentityBook

from ..support import WAIT
from ..support.hubprocess import REPO_ROOT
from ..support.notebooks import notebook_json

GPU = [GPUDevice("sim-0", 0, "RTX 4090", 24576, simulated=True)]
NOW = datetime(2026, 10, 7, 8, 0, tzinfo=UTC)
CATALOG = """\
flavors:
  - {id: cpu-job, title: CPU job, access: {everyone: true}}
"""


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[JobsAPI]:
    """The job service's API over a running manager whose jobs run locally."""
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(CATALOG)
    admission = GPUAdmission(catalog_path=str(catalog), target="local")
    book = IdentityBook(tmp_path / "identities.json")
    book.remember(UserIdentity("rita"))
    capacity = FlavorCapacity(admission=admission, devices=GPU, identities=book, clock=lambda: NOW)
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
    assert "[cell 0] profile cpu-job" in manager.log_store.path(created.job_id).read_text()
