"""Warm starts: a runner started ahead for a person takes their next job, and only theirs.

Real runner processes and kernels; nothing here measures time (see benchmarks/jobs.py).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import psutil
import pytest

from gpuspawner.core.cgroups import CgroupLimits, ResourceLimits
from jupyter_to_job.job_admission import JobAdmission, JobGranted, JobTicket
from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, JobStatus
from tests.support import eventually
from tests.support.job_managers import ManagerFactory, finished

from ..support.notebooks import notebook

# What the job sees: where its kernel runs, which job it is, and which GPUs it was given.
SEES = (
    "import os\n"
    "print('pid', os.getpid())\n"
    "print('cwd', os.getcwd())\n"
    "print('job', os.environ.get('JUPYTER_TO_JOB_ID'))\n"
    "print('gpus', os.environ.get('CUDA_VISIBLE_DEVICES', 'none'))"
)


def save(home: Path, nb: nbformat.NotebookNode) -> str:
    home.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, home / "job.ipynb")
    return "job.ipynb"


async def submit(manager: JobManager, owner: str, home: Path) -> str:
    request = CreateJob(input_path=save(home, notebook(SEES, "print('second cell')")))
    created = await manager.create(owner, request, source_root=home)
    return created.job_id


def printed(manager: JobManager, job_id: str) -> dict[str, str]:
    """What the job's first cell printed, from its log: ``{"pid": ..., "cwd": ...}``."""
    seen = {}
    for line in manager.log_store.path(job_id).read_text().splitlines():
        if line.startswith("[cell 0] "):
            key, _, value = line.removeprefix("[cell 0] ").partition(" ")
            seen[key] = value
    return seen


async def warm_runner_of(manager: JobManager, owner: str, flavor: str | None = None) -> int:
    """The pid of the one warm runner waiting for ``owner``, once it is ready."""
    assert manager.warm_pool is not None
    assert await manager.warm_pool.wait_ready(owner, flavor) == 1
    (runner,) = manager.warm_pool.runners(owner, flavor)
    return runner.pid


def log_of(manager: JobManager, job_id: str) -> str:
    return manager.log_store.path(job_id).read_text()


async def test_the_owners_next_job_runs_in_the_runner_started_for_them(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given alice opened the Run as Job dialog, so a runner was started ahead for her
    manager = await make_manager()
    assert manager.prewarm("alice") == 1
    warm_pid = await warm_runner_of(manager, "alice")

    # When she submits a notebook
    job_id = await submit(manager, "alice", tmp_path / "alice")
    job = await finished(manager, job_id)

    # Then it completes with its output, run by that runner, in a kernel started ahead that
    # was moved into the job's folder and knows the job
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert manager.store.get(job_id).pid == warm_pid
    assert "the kernel was started ahead of the job (a warm start)" in log_of(manager, job_id)
    assert "[cell 1] second cell" in log_of(manager, job_id)
    seen = printed(manager, job_id)
    assert seen["cwd"] == str(manager.job_files(job_id).work)
    assert seen["job"] == job_id
    output = nbformat.read(manager.output_path(job_id, "ipynb"), as_version=4)
    assert [c.execution_count for c in output.cells] == [1, 2]

    # And the runner served that one job only: it is gone, and a new one waits for her next
    assert not psutil.pid_exists(warm_pid) or psutil.Process(warm_pid).status() == "zombie"
    next_pid = await eventually(
        lambda: [r.pid for r in manager.warm_pool.runners("alice", None)],
        what="a new warm runner for alice",
    )
    assert next_pid != [warm_pid]


async def test_a_runner_started_for_one_person_never_runs_anothers_job(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given a runner waits for alice
    manager = await make_manager()
    manager.prewarm("alice")
    alices_runner = await warm_runner_of(manager, "alice")

    # When bob submits a job
    job_id = await submit(manager, "bob", tmp_path / "bob")
    job = await finished(manager, job_id)

    # Then bob's job ran in a runner of its own, started cold
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert manager.store.get(job_id).pid != alices_runner
    assert "warm start" not in log_of(manager, job_id)
    # And alice's runner still waits for her
    assert [r.pid for r in manager.warm_pool.runners("alice", None)] == [alices_runner]


async def test_an_idle_warm_runner_is_released_with_its_kernel(
    make_manager: ManagerFactory,
) -> None:
    # Given warm runners wait only briefly for a job
    manager = await make_manager(executor={"warm_idle_seconds": 1.0})
    manager.prewarm("alice")
    warm_pid = await warm_runner_of(manager, "alice")
    runner = manager.warm_pool.runners("alice", None)[0]
    kernels = psutil.Process(warm_pid).children(recursive=True)
    assert kernels, "the warm runner has a kernel running"

    # When no job comes
    await eventually(
        lambda: not manager.warm_pool.runners("alice", None) and not runner.running(),
        what="the idle warm runner to end",
    )

    # Then the runner, its kernel and its folder are gone
    await eventually(
        lambda: not any(k.is_running() for k in kernels), what="the warm kernel to end"
    )
    await eventually(lambda: not runner.folder.exists(), what="the warm folder to go")


async def test_a_job_granted_another_gpu_gets_a_kernel_with_that_gpu(
    make_manager: ManagerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the job service hands its jobs GPU 1, and a runner was started ahead for alice
    # expecting GPU 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    manager = await make_manager()
    manager.prewarm("alice", environment={"CUDA_VISIBLE_DEVICES": "0"})
    warm_pid = await warm_runner_of(manager, "alice")

    # When her job is granted GPU 1
    job_id = await submit(manager, "alice", tmp_path / "alice")
    job = await finished(manager, job_id)

    # Then the job does not run in the kernel started with GPU 0: its kernel started after
    # admission, with the job's own environment
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert manager.store.get(job_id).pid == warm_pid
    assert "warm start" not in log_of(manager, job_id)
    seen = printed(manager, job_id)
    assert seen["gpus"] == "1"
    assert seen["job"] == job_id
    assert seen["cwd"] == str(manager.job_files(job_id).work)


async def test_a_job_with_other_limits_than_the_warm_runners_starts_cold(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given a runner was started ahead for alice within one CPU and 1 GiB
    manager = await make_manager()
    manager.prewarm("alice", limits=ResourceLimits(cpu=1, memory_bytes=1 << 30))
    warm_pid = await warm_runner_of(manager, "alice")

    # When her job comes without those limits
    job_id = await submit(manager, "alice", tmp_path / "alice")
    job = await finished(manager, job_id)

    # Then it starts cold in a runner of its own; the warm one waits on
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert manager.store.get(job_id).pid != warm_pid
    assert [r.pid for r in manager.warm_pool.runners("alice", None)] == [warm_pid]


async def test_warm_runners_end_when_the_manager_shuts_down(
    make_manager: ManagerFactory,
) -> None:
    # Given a runner waits for alice
    manager = await make_manager()
    manager.prewarm("alice")
    warm_pid = await warm_runner_of(manager, "alice")
    runner = manager.warm_pool.runners("alice", None)[0]

    # When the job service stops
    await manager.shutdown()

    # Then the runner has ended, and its folder is gone
    assert not runner.running()
    assert not psutil.pid_exists(warm_pid) or psutil.Process(warm_pid).status() == "zombie"
    assert not runner.folder.exists()


async def test_a_warm_runner_within_the_flavors_limits_hands_its_cgroup_to_the_job(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    if CgroupLimits().hierarchy() is None:
        pytest.skip("needs cgroups this process can make (root, or a delegated subtree)")
    # Given a runner was started ahead for alice within her flavor's CPU and memory
    limits = ResourceLimits(cpu=1, memory_bytes=1 << 30)
    capacity = LimitedCapacity(limits)
    manager = await make_manager(capacity=capacity)
    manager.prewarm("alice", "small", limits=limits)
    warm_pid = await warm_runner_of(manager, "alice", "small")

    # When her job of that flavor comes, asking where its kernel runs
    home = tmp_path / "alice"
    nbformat.write(notebook("print('cgroup', open('/proc/self/cgroup').read())"), home_of(home))
    request = CreateJob(input_path="job.ipynb", flavor="small")
    created = await manager.create("alice", request, source_root=home)
    job = await finished(manager, created.job_id)

    # Then the warm runner ran it, its kernel in the job's own group with the flavor's limits
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert manager.store.get(created.job_id).pid == warm_pid
    assert f"job-{created.job_id}" in log_of(manager, created.job_id)
    assert "limited to" in log_of(manager, created.job_id)


class LimitedCapacity(JobAdmission):
    """Every job may start at once, within ``limits`` (as a flavor's CPU and memory)."""

    def __init__(self, limits: ResourceLimits):
        self.limits = limits

    def acquire(self, ticket: JobTicket) -> JobGranted:
        return LimitedGrant(self.limits)


class LimitedGrant(JobGranted):
    """A grant without a GPU, within ``limits``."""

    def __init__(self, limits: ResourceLimits):
        super().__init__(None)
        object.__setattr__(self, "_limits", limits)

    @property
    def limits(self) -> ResourceLimits:
        return self._limits  # type: ignore[attr-defined,no-any-return]


def home_of(home: Path) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    return home / "job.ipynb"


async def test_a_job_that_comes_while_its_runner_starts_waits_for_that_kernel(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given a runner was just started ahead for alice, and is still starting its kernel
    manager = await make_manager()
    manager.prewarm("alice")
    (runner,) = manager.warm_pool.runners("alice", None)
    assert not runner.ready.is_set()

    # When her job comes at once
    job_id = await submit(manager, "alice", tmp_path / "alice")
    job = await finished(manager, job_id)

    # Then that runner takes it and its kernel, started ahead, runs the job: nothing failed
    log = log_of(manager, job_id)
    assert job.status is JobStatus.COMPLETED, log
    assert manager.store.get(job_id).pid == runner.pid
    assert "the kernel was started ahead of the job (a warm start)" in log
    assert "failed" not in log
    # And its folder is gone with the job
    assert not runner.folder.exists()


async def test_a_runner_whose_kernel_died_tells_the_pool_and_the_job_goes_elsewhere(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given a ready runner for alice whose kernel then dies
    manager = await make_manager()
    manager.prewarm("alice")
    warm_pid = await warm_runner_of(manager, "alice")
    (kernel,) = psutil.Process(warm_pid).children(recursive=True)
    kernel.kill()

    # Then the runner says so and leaves the pool before any job is handed to it
    await eventually(
        lambda: warm_pid not in [r.pid for r in manager.warm_pool.runners("alice", None)],
        what="the runner without a kernel to leave the pool",
    )

    # And her next job runs, without a word of the dead kernel
    job_id = await submit(manager, "alice", tmp_path / "alice")
    job = await finished(manager, job_id)
    log = log_of(manager, job_id)
    assert job.status is JobStatus.COMPLETED, log
    assert manager.store.get(job_id).pid != warm_pid
    assert "failed" not in log and "had ended" not in log
