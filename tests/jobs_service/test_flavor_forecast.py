"""The Run as Job dialog's forecast: the flavor list says, for the person asking, whether
a job would start now or wait, and why, without booking anything."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from traitlets.config import Config

from gpuspawner.core.admission import GPUAdmission
from gpuspawner.core.ledger import AllocationLedger
from gpuspawner.policy import GPUDevice, UserIdentity
from jupyter_to_job.access import Caller
from jupyter_to_job.jobs_api import JobsAPI
from jupyter_to_job.manager import JobManager
from jupyter_to_job.scopes import WRITE_JOBS_SCOPE
from jupyter_to_job.service.flavor_admission import FlavorAdmission, IdentityBook

GPU = [GPUDevice("sim-0", 0, "RTX 4090", 24576, simulated=True)]
NOW = datetime(2026, 10, 7, 8, 0, tzinfo=UTC)
CATALOG = """\
research:
  - id: vision-dev
    title: Vision lab development share
    users: [rita]
    expires: 2027-06-30
    gpu: {fraction: 1/4}
flavors:
  - {id: whole-gpu, title: One whole GPU, gpu: {count: 1}, access: {everyone: true}}
  - {id: cpu-job, title: CPU job, access: {everyone: true}}
"""


@pytest.fixture
def service(tmp_path):
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(CATALOG)
    ledger = tmp_path / "gpu-allocations.json"
    admission = GPUAdmission(catalog_path=str(catalog), target="local")
    book = IdentityBook(tmp_path / "identities.json")
    for name in ("rita", "sam"):
        book.remember(UserIdentity(name))
    capacity = FlavorAdmission(
        admission=admission,
        devices=GPU,
        identities=book,
        ledger_path=str(ledger),
        clock=lambda: NOW,
    )
    config = Config()
    config.JobManager.root_dir = str(tmp_path / "jobs")
    manager = JobManager(config=config, capacity=capacity)
    manager.store.create_tables()
    api = JobsAPI(manager, mode="hub", catalog=admission.catalog_in_force, clock=lambda: NOW)
    yield api, admission, ledger
    manager.store.close()


def caller(name: str) -> Caller:
    return Caller(name, scopes=frozenset({f"{WRITE_JOBS_SCOPE}!user={name}"}))


async def test_the_flavor_list_says_a_job_would_wait_behind_the_researchers_own_server(service):
    api, admission, ledger = service
    # Given rita's development server holds a quarter of the only GPU
    share = admission.catalog().research_by_id["vision-dev"].share
    with AllocationLedger(ledger).transaction(GPU) as pool:
        pool.allocate(
            "server:rita/", owner="rita", profile_id="vision-dev", course_id=None, share=share
        )

    # When she opens the Run as Job dialog
    flavors = {f.id: f for f in (await api.flavors(caller("rita"))).flavors}

    # Then the whole-GPU flavor says it would wait behind her own server, and why
    whole = flavors["whole-gpu"]
    assert whole.starts_now is False
    assert whole.forecast and whole.forecast.startswith(
        "Your own server (Vision lab development share) holds the GPU this job needs"
    )
    # And the CPU flavor would start now
    assert flavors["cpu-job"].starts_now is True
    # And sam, asking the same, hears that the GPU is in use, not about rita's server
    sams = {f.id: f for f in (await api.flavors(caller("sam"))).flavors}["whole-gpu"]
    assert sams.starts_now is False and sams.forecast
    assert "All GPUs are taken right now" in sams.forecast and "rita" not in sams.forecast

    # When her server stops, the list says the job would start now
    with AllocationLedger(ledger).transaction(GPU) as pool:
        pool.release("server:rita/")
    whole = {f.id: f for f in (await api.flavors(caller("rita"))).flavors}["whole-gpu"]
    assert (whole.starts_now, whole.forecast) == (True, "Starts now on a free GPU.")
