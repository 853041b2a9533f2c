"""Scenarios: jobs take their GPU share from the hub's capacity pool, or wait for one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuspawner.core.admission import GPUAdmission
from gpuspawner.policy import GPUDevice, UserIdentity, load_catalog
from jupyter_to_job.errors import JobRefused
from jupyter_to_job.job_admission import JobGranted, JobTicket, JobWaits
from jupyter_to_job.models import CreateJob, JobStatus
from jupyter_to_job.service.flavor_admission import FlavorAdmission, IdentityBook

from ..support import eventually
from ..support.job_managers import ManagerFactory, finished
from ..support.notebooks import notebook, wait_for_file

REPO = Path(__file__).resolve().parents[2]

GPU = GPUDevice("sim-0", 0, "RTX 4090", 24576, simulated=True)
CATALOG = """
flavors:
  - {id: cpu, title: CPU, max_running_per_user: 5, access: {everyone: true}}
  - {id: 1gpu, title: One GPU, gpu: {count: 1}, access: {everyone: true}}
  - {id: quarter, title: A quarter, gpu: {fraction: 1/4}, access: {everyone: true}}
  - {id: 2gpu, title: Two GPUs, gpu: {count: 2}, access: {everyone: true}}
"""


@pytest.fixture
def pool_capacity(tmp_path: Path):  # type: ignore[no-untyped-def]
    """``pool_capacity()``: a job service's capacity over one GPU (a new one each call,
    as after a restart), asking the admission with the catalog above."""
    (tmp_path / "catalog.yaml").write_text(CATALOG)
    catalog = load_catalog(tmp_path / "catalog.yaml")

    def make() -> FlavorAdmission:
        identities = IdentityBook(tmp_path / "identities.json")
        for name in ("alice", "bob", "carol"):
            identities.remember(UserIdentity(name))
        return FlavorAdmission(
            admission=GPUAdmission(fallback_catalog=catalog), devices=[GPU], identities=identities
        )

    return make


def allocations(capacity: FlavorAdmission) -> list[str]:
    with capacity.current_pool() as pool:
        return list(pool.allocations)


def test_a_granted_share_becomes_the_jobs_gpu_environment(pool_capacity) -> None:
    capacity = pool_capacity()

    grant = capacity.acquire(JobTicket("j1", "alice", "quarter"))

    assert isinstance(grant, JobGranted)
    assert grant.environment["CUDA_VISIBLE_DEVICES"] == "0"
    assert grant.environment["GPUSPAWNER_GPU_FRACTION"] == "1/4"
    assert grant.gpu is not None and grant.gpu["device_ids"] == ["sim-0"]
    assert grant.grant is not None and grant.grant.subject == "quarter"
    assert "job:j1" in allocations(capacity)


def test_a_job_without_gpu_sees_none(pool_capacity) -> None:
    grant = pool_capacity().acquire(JobTicket("j1", "alice", "cpu"))

    assert isinstance(grant, JobGranted)
    assert grant.environment["CUDA_VISIBLE_DEVICES"] == ""
    assert grant.gpu is None


def test_a_full_gpu_means_waiting_and_release_frees_it(pool_capacity) -> None:
    capacity = pool_capacity()
    first = JobTicket("j1", "alice", "1gpu")
    capacity.acquire(first)

    waiting = capacity.acquire(JobTicket("j2", "bob", "quarter"))

    assert isinstance(waiting, JobWaits)
    assert waiting.reason.startswith("All GPUs are taken right now")
    capacity.release(first)
    assert isinstance(capacity.acquire(JobTicket("j2", "bob", "quarter")), JobGranted)


@pytest.mark.parametrize(
    ("flavor", "complaint"),
    [("huge", "There is no job flavor 'huge' here"), ("2gpu", "asks for 2 whole GPUs")],
)
def test_a_flavor_that_can_never_run_is_refused_up_front(
    pool_capacity, flavor: str, complaint: str
) -> None:
    with pytest.raises(JobRefused, match=complaint):
        pool_capacity().validate(JobTicket("j1", "alice", flavor))


def test_a_running_jobs_share_is_restored_after_a_restart(pool_capacity) -> None:
    before = pool_capacity()
    grant = before.acquire(JobTicket("j1", "alice", "1gpu"))
    assert isinstance(grant, JobGranted)

    after = pool_capacity()
    after.restore(JobTicket("j1", "alice", "1gpu"), grant.gpu)

    assert isinstance(after.acquire(JobTicket("j2", "bob", "quarter")), JobWaits)


async def test_a_job_waits_in_the_queue_for_the_gpu_and_then_gets_it(
    make_manager: ManagerFactory, tmp_path: Path, pool_capacity
) -> None:
    gate = tmp_path / "gate"
    capacity = pool_capacity()
    manager = await make_manager(max_running_jobs=5, capacity=capacity)
    show_gpu = "import os\nprint('GPU:', os.environ['CUDA_VISIBLE_DEVICES'])"
    holder = await manager.create(
        "alice",
        CreateJob(input_path="big.ipynb", flavor="1gpu", output_formats=["ipynb"]),
        notebook=notebook(show_gpu, wait_for_file(gate)),
    )
    waiter = await manager.create(
        "bob",
        CreateJob(input_path="small.ipynb", flavor="quarter", output_formats=["ipynb"]),
        notebook=notebook(show_gpu),
    )

    assert holder.job.status is JobStatus.RUNNING
    assert holder.job.gpu is not None and holder.job.gpu.device_ids == ["sim-0"]
    waiting = manager.describe(waiter.job_id)
    assert (waiting.status, waiting.queue_position) == (JobStatus.QUEUED, 1)
    assert waiting.status_message is not None
    assert waiting.status_message.startswith("Waiting for GPU capacity: All GPUs are taken")
    with pytest.raises(JobRefused):
        await manager.create("carol", CreateJob(input_path="x.ipynb", flavor="2gpu"), notebook={})

    await eventually(lambda: "GPU: 0" in manager.read_log(holder.job_id).data, what="GPU line")
    gate.touch()
    done = await finished(manager, waiter.job_id)

    assert done.status is JobStatus.COMPLETED
    assert "[cell 0] GPU: 0" in manager.read_log(waiter.job_id).data
    await finished(manager, holder.job_id)
    await eventually(lambda: not allocations(capacity), what="all shares to be released")


async def test_a_fractional_job_keeps_the_sites_packages_on_its_pythonpath(
    make_manager: ManagerFactory, tmp_path: Path, pool_capacity
) -> None:
    # Given a site that provides packages only through PYTHONPATH (environment modules on an
    # HPC system), PyTorch among them
    site = tmp_path / "site-packages"
    (site / "campus_site_probe").mkdir(parents=True)
    (site / "campus_site_probe" / "__init__.py").write_text("WHERE = 'the site'\n")
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(
        "class cuda:\n"
        "    is_available = staticmethod(lambda: True)\n"
        "    device_count = staticmethod(lambda: 1)\n"
        "    limits = []\n"
        "    @staticmethod\n"
        "    def set_per_process_memory_fraction(fraction, device):\n"
        "        cuda.limits.append((fraction, device))\n"
    )
    manager = await make_manager(
        capacity=pool_capacity(),
        executor={"extra_environment": {"PYTHONPATH": f"{site}{os.pathsep}{REPO}"}},
    )

    # When a job on a quarter of the GPU imports them
    created = await manager.create(
        "alice",
        CreateJob(input_path="site.ipynb", flavor="quarter", output_formats=["ipynb"]),
        notebook=notebook(
            "import campus_site_probe, torch\n"
            "print('probe from', campus_site_probe.WHERE)\n"
            "print('torch limits', torch.cuda.limits)"
        ),
    )
    job = await finished(manager, created.job_id)

    # Then it completes, with the site's packages and the share applied to PyTorch
    log = manager.read_log(created.job_id).data
    assert job.status is JobStatus.COMPLETED, log
    assert "[cell 0] probe from the site" in log
    assert "[cell 0] torch limits [(0.25, 0)]" in log
