"""Scenarios for the job manager with local runner processes and real kernels."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import nbformat
import psutil
import pytest

from jupyter_to_job.errors import (
    InvalidJobRequest,
    JobNotDeletable,
    JobNotFound,
    JobNotStoppable,
    OutputNotFound,
)
from jupyter_to_job.executors import LocalExecutor
from jupyter_to_job.models import CreateJob, JobStatus, ListJobsQuery
from jupyter_to_job.runfiles import JobFiles, read_status
from jupyter_to_job.store import JobRow, JobStore
from tests.support import eventually
from tests.support.job_managers import ManagerFactory, finished

from ..support.notebooks import append_line, notebook, read_output, stream_text, wait_for_file


def save(home: Path, name: str, nb: nbformat.NotebookNode) -> str:
    path = home / name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return name


def request(input_path: str, **fields) -> CreateJob:  # type: ignore[no-untyped-def]
    return CreateJob(input_path=input_path, **{"output_formats": ["ipynb"], **fields})


async def test_a_job_runs_its_snapshot_and_keeps_outputs_and_log(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    path = save(home, "project/train.ipynb", notebook("print('version one')"))
    manager = await make_manager()

    created = await manager.create(
        "alice", request(path, output_formats=["ipynb", "html"]), source_root=home
    )
    save(home, path, notebook("print('edited after submitting')"))
    job = await finished(manager, created.job_id)

    assert created.created and created.job.owner == "alice" and created.job.name == "train"
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert (job.exit_code, job.cells_completed, job.cells_total) == (0, 1, 1)
    assert [(o.format, o.name) for o in job.outputs] == [
        ("ipynb", f"train-{job.job_id[:8]}.ipynb"),
        ("html", f"train-{job.job_id[:8]}.html"),
    ]
    executed = nbformat.read(manager.output_path(job.job_id, "ipynb"), as_version=4)
    assert stream_text(executed.cells[0]) == "version one\n"
    log = manager.read_log(job.job_id)
    assert "[cell 0] version one" in log.data
    assert log.complete and log.size == job.log_size
    assert manager.tail_log(job.job_id, lines=1).data.startswith("[job] completed")
    assert job.start_time and job.end_time and job.create_time.endswith("Z")


async def test_another_user_cannot_see_or_touch_the_job(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    manager = await make_manager()
    created = await manager.create("alice", request("a.ipynb"), notebook=notebook("1"))
    job_id = created.job_id

    for action in (
        lambda: manager.describe(job_id, owner="mallory"),
        lambda: manager.read_log(job_id, owner="mallory"),
        lambda: manager.output_path(job_id, "ipynb", owner="mallory"),
    ):
        with pytest.raises(JobNotFound):
            action()
    with pytest.raises(JobNotFound):
        await manager.stop(job_id, owner="mallory")
    with pytest.raises(JobNotFound):
        manager.describe("../../etc")
    assert manager.describe(job_id, owner="alice").job_id == job_id
    await finished(manager, job_id)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The manager's database: SQLite in the job root, or the throwaway PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'jobs.sqlite'}"
        return
    url = request.getfixturevalue("postgres_url")
    JobStore(url).drop_tables()
    yield url
    JobStore(url).drop_tables()


async def test_the_same_idempotency_token_twice_makes_one_job(
    make_manager: ManagerFactory, db_url: str
) -> None:
    manager = await make_manager(db_url=db_url)
    nb = notebook("print('once')")

    first = await manager.create("alice", request("a.ipynb", idempotency_token="k1"), notebook=nb)
    second = await manager.create("alice", request("a.ipynb", idempotency_token="k1"), notebook=nb)
    bobs = await manager.create("bob", request("a.ipynb", idempotency_token="k1"), notebook=nb)

    assert (first.created, second.created, bobs.created) == (True, False, True)
    assert second.job_id == first.job_id and bobs.job_id != first.job_id
    assert manager.list_jobs(ListJobsQuery(owner="alice")).total_count == 1
    await finished(manager, first.job_id)
    await finished(manager, bobs.job_id)


async def test_jobs_beyond_the_limit_queue_first_in_first_out(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    gate, runs = tmp_path / "gate", tmp_path / "runs.txt"
    manager = await make_manager(max_running_jobs=1)

    ids = []
    for name in ("first", "second", "third"):
        nb = notebook(append_line(runs, name), wait_for_file(gate))
        ids.append((await manager.create("alice", request(f"{name}.ipynb"), notebook=nb)).job_id)

    first, second, third = (manager.describe(i) for i in ids)
    assert first.status is JobStatus.RUNNING and first.queue_position is None
    assert (second.status, second.queue_position) == (JobStatus.QUEUED, 1)
    assert (third.status, third.queue_position) == (JobStatus.QUEUED, 2)
    assert second.status_message == (
        "Waiting for a free job slot: 1 job is running, and at most 1 run at a time."
    )
    assert third.status_message == "Waiting for the jobs ahead of it to start."
    listed = manager.list_jobs(ListJobsQuery(status=JobStatus.QUEUED, sort_order="asc"))
    assert [(j.name, j.queue_position) for j in listed.jobs] == [("second", 1), ("third", 2)]

    gate.touch()
    results = [await finished(manager, i) for i in ids]

    assert [r.status for r in results] == [JobStatus.COMPLETED] * 3
    assert runs.read_text() == "first\nsecond\nthird\n"


async def test_stopping_a_running_job_keeps_the_cells_that_ran(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    manager = await make_manager()
    nb = notebook("print('prepared the data')", wait_for_file(tmp_path / "never"), "print('x')")
    job_id = (await manager.create("alice", request("long.ipynb"), notebook=nb)).job_id
    await eventually(lambda: manager.describe(job_id).current_cell == 1, what="cell 1 to run")

    with pytest.raises(JobNotDeletable, match="still running; stop it first"):
        await manager.delete(job_id)
    stopping = await manager.stop(job_id, owner="alice")
    job = await finished(manager, job_id)

    assert stopping.status in (JobStatus.STOPPING, JobStatus.STOPPED)
    assert job.status is JobStatus.STOPPED
    assert job.status_message == (
        "Stopped on request after 1 of 3 code cells; the output notebook keeps them."
    )
    executed = read_output(manager.job_files(job_id))
    assert stream_text(executed.cells[0]) == "prepared the data\n"
    assert "[job] stop requested" in manager.read_log(job_id).data

    with pytest.raises(JobNotStoppable, match="already finished \\(stopped\\)"):
        await manager.stop(job_id)


async def test_a_job_that_ignores_the_interrupt_is_killed_with_its_kernel(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    manager = await make_manager(executor={"stop_grace_seconds": 1.0})
    stubborn = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n" + wait_for_file(
        tmp_path / "never"
    )
    job_id = (await manager.create("alice", request("a.ipynb"), notebook=notebook(stubborn))).job_id
    await eventually(lambda: manager.describe(job_id).current_cell == 0, what="the cell to run")
    kernel_pid = read_status(manager.job_files(job_id)).kernel_pid

    await manager.stop(job_id)
    job = await finished(manager, job_id)

    assert job.status is JobStatus.STOPPED
    assert job.status_message == (
        "Stopped on request after 0 of 1 code cells (it did not stop within 1 s and was killed)."
    )
    assert "[job] the job did not stop within 1 s; killing it" in manager.read_log(job_id).data
    await eventually(lambda: not _alive(kernel_pid), what="the kernel to be gone")


def _alive(pid: int | None) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_a_queued_job_stops_at_once_and_never_runs(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    gate, runs = tmp_path / "gate", tmp_path / "runs.txt"
    manager = await make_manager(max_running_jobs=1)
    running = await manager.create(
        "alice", request("a.ipynb"), notebook=notebook(wait_for_file(gate))
    )
    queued = await manager.create(
        "alice", request("b.ipynb"), notebook=notebook(append_line(runs, "b"))
    )

    stopped = await manager.stop(queued.job_id)
    gate.touch()
    await finished(manager, running.job_id)

    assert stopped.status is JobStatus.STOPPED
    assert stopped.status_message == "Stopped before it started."
    assert not runs.exists()
    with pytest.raises(OutputNotFound):
        manager.output_path(queued.job_id, "ipynb")


async def test_deleting_a_finished_job_removes_its_files(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    manager = await make_manager()
    job_id = (await manager.create("alice", request("a.ipynb"), notebook=notebook("1"))).job_id
    await finished(manager, job_id)
    files = manager.job_files(job_id)

    await manager.delete(job_id, owner="alice")

    assert not files.directory.exists()
    assert not manager.log_store.exists(job_id)
    with pytest.raises(JobNotFound):
        manager.describe(job_id)


async def test_a_job_past_its_deadline_fails_and_keeps_its_log(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    manager = await make_manager()
    nb = notebook("print('started')", wait_for_file(tmp_path / "never"))
    job_id = (
        await manager.create("alice", request("slow.ipynb", deadline_seconds=1), notebook=nb)
    ).job_id

    job = await finished(manager, job_id)

    assert job.status is JobStatus.FAILED
    assert job.status_message is not None
    assert job.status_message.startswith("The job ran past its deadline of 1 s")
    assert job.error is not None and job.error.evalue == "deadline of 1 s exceeded"
    log = manager.read_log(job_id).data
    assert "[job] the deadline of 1 s has passed" in log
    assert log.rstrip().endswith(job.status_message)


async def test_following_the_log_while_the_job_runs(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    manager = await make_manager()
    nb = notebook("print('epoch 1 done')", wait_for_file(gate), "print('epoch 2 done')")
    job_id = (await manager.create("alice", request("train.ipynb"), notebook=nb)).job_id

    followed = []
    async for chunk in manager.follow_log(job_id, owner="alice"):
        followed.append(chunk)
        if "epoch 1 done" in chunk.data:
            gate.touch()  # the job goes on only once the follower has seen its first output

    text = "".join(chunk.data for chunk in followed)
    assert text.index("[cell 0] epoch 1 done") < text.index("[cell 2] epoch 2 done")
    assert followed[-1].complete
    assert not any(chunk.complete for chunk in followed[:-1])
    # After the process is gone, the whole log is still there.
    assert manager.describe(job_id).status is JobStatus.COMPLETED
    assert manager.read_log(job_id).data == text


async def test_requests_without_a_runnable_notebook_are_refused(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "outside.ipynb").write_text("{}")
    (home / "link.ipynb").symlink_to(tmp_path / "outside.ipynb")
    (home / "broken.ipynb").write_text("this is not json")
    manager = await make_manager()

    with pytest.raises(InvalidJobRequest, match="There is no notebook 'missing.ipynb'"):
        await manager.create("alice", request("missing.ipynb"), source_root=home)
    with pytest.raises(InvalidJobRequest, match="outside your folder"):
        await manager.create("alice", request("link.ipynb"), source_root=home)
    with pytest.raises(InvalidJobRequest, match="is not a notebook that can run"):
        await manager.create("alice", request("broken.ipynb"), source_root=home)
    assert manager.list_jobs(ListJobsQuery()).total_count == 0


async def test_a_runner_that_cannot_start_fails_the_job_with_the_reason(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    manager = await make_manager()
    manager.executor_class = type(
        "BrokenExecutor", (LocalExecutor,), {"runner_command": ["/nonexistent/python"]}
    )

    created = await manager.create("alice", request("a.ipynb"), notebook=notebook("1"))
    job = await finished(manager, created.job_id)

    assert job.status is JobStatus.FAILED
    assert job.status_message is not None
    assert job.status_message.startswith("The job could not be started: [Errno 2]")
    assert "/nonexistent/python" in job.status_message


def test_jobs_see_their_gpu_share_but_not_the_services_secrets(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "secret")
    monkeypatch.setenv("DATABASE_PASSWORD", "secret")
    monkeypatch.setenv("LC_TIME", "de_CH.UTF-8")
    executor = LocalExecutor(
        job=JobRow(job_id="j1"),
        files=JobFiles(tmp_path),
        store=None,
        log_store=None,
        environment={"CUDA_VISIBLE_DEVICES": "1", "PATH": "/gpu/bin"},
        extra_environment={"HF_HUB_OFFLINE": "1"},
    )

    env = executor.job_environment()

    assert "JUPYTERHUB_API_TOKEN" not in env and "DATABASE_PASSWORD" not in env
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and env["PATH"] == "/gpu/bin"
    assert env["LC_TIME"] == "de_CH.UTF-8" and env["HF_HUB_OFFLINE"] == "1"
    assert env["JUPYTER_TO_JOB_ID"] == "j1"


def test_a_job_with_its_own_share_keeps_nothing_of_the_hosts_share(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Standalone: the user's server holds a share whose JAX fraction is under the new name.
    monkeypatch.setenv("XLA_CLIENT_MEM_FRACTION", "0.500")
    monkeypatch.setenv("GPUSPAWNER_GPU_SHARE", "1/2 of an H100")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    executor = LocalExecutor(
        job=JobRow(job_id="j1"),
        files=JobFiles(tmp_path),
        store=None,
        log_store=None,
        environment={
            "CUDA_VISIBLE_DEVICES": "1",
            "GPUSPAWNER_GPU_FRACTION": "1/4",
            "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.250",
        },
    )

    env = executor.job_environment()

    assert [n for n in env if n.endswith("MEM_FRACTION")] == ["XLA_PYTHON_CLIENT_MEM_FRACTION"]
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and "GPUSPAWNER_GPU_SHARE" not in env
