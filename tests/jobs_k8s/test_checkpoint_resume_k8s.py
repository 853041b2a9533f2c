"""Scenarios: a job with a checkpoint on Kubernetes. Its pod evicted (``DisruptionTarget``),
the cluster starts it again and it resumes from its checkpoint in its owner's home; a job
that fails by itself is not started again; one evicted more often than its retries allow
ends FAILED, saying so.

The Job's own pod failure policy does the retrying (``k8s_objects.pod_failure_policy``), so
these scenarios evict pods through the Eviction API, as ``kubectl drain`` does, and the
job's pods run the real runner as local processes, with the home PVC one local folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
from kubernetes_asyncio import client

from jupyter_to_job.k8s_objects import job_selector
from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, JobCheckpoint, JobStatus
from jupyter_to_job.retries import exhausted
from tests.support import eventually
from tests.support.checkpoint_training import (
    attempt_noting_cell,
    take_away_two_attempts,
    training_cell,
)
from tests.support.job_managers import ManagerFactory, finished
from tests.support.k8s_job_pods import PodProcesses
from tests.support.notebooks import notebook

EVICTED = "its pod was evicted (its node was drained, or an admin evicted it)"
SEPARATOR = (
    "[job] ---- attempt {n} of {m}: " + EVICTED + "; starting again from its checkpoint ----"
)


@pytest.fixture
def manager(home_claim_manager: JobManager) -> JobManager:
    """The job service running Kubernetes Jobs in alice's home (z2jh's ``claim-alice``)."""
    return home_claim_manager


@pytest.fixture
def project(pod_processes: PodProcesses) -> Path:
    """The folder "project" in alice's home, where her notebook is saved."""
    folder = pod_processes.claim_folder("default", "claim-alice") / "project"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


async def submit(manager: JobManager, *sources: str, retries: int, folder: str) -> str:
    request = CreateJob(
        input_path="project/train.ipynb",
        output_formats=["ipynb"],
        checkpoint=JobCheckpoint(folder=folder, retries=retries),
    )
    created = await manager.create("alice", request, notebook=nbformat.writes(notebook(*sources)))
    return created.job_id


async def pods(k8s_api: Any, job_id: str) -> list[dict[str, Any]]:
    response = await client.CoreV1Api(k8s_api).list_namespaced_pod(
        "default", label_selector=job_selector(job_id), _preload_content=False
    )
    return list(json.loads(await response.read())["items"])


async def evict_running_pod(k8s_api: Any, job_id: str) -> str:
    """Evict the job's running pod, as ``kubectl drain`` does; returns its name."""

    async def running() -> dict[str, Any] | None:
        return next(
            (
                pod
                for pod in await pods(k8s_api, job_id)
                if pod["status"].get("phase") == "Running"
                and not pod["metadata"].get("deletionTimestamp")
            ),
            None,
        )

    pod = await eventually(running, what="the job's running pod")
    name = pod["metadata"]["name"]
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": "default"},
    }
    response = await client.CoreV1Api(k8s_api).create_namespaced_pod_eviction(
        name, "default", eviction, _preload_content=False
    )
    assert response.status == 201, await response.text()  # unread, an error does not raise
    return str(name)


async def test_an_evicted_job_resumes_from_its_checkpoint_on_a_new_pod_and_completes(
    manager: JobManager, project: Path, k8s_api: Any
) -> None:
    # Given a job that checkpoints every step in its notebook's folder, with two retries
    job_id = await submit(manager, training_cell(hold_at=7), retries=2, folder="checkpoints/train")
    folder = project / "checkpoints" / "train"
    job = manager.describe(job_id)
    assert (job.attempt, job.max_attempts, job.checkpoint_folder) == (1, 3, "checkpoints/train")

    # When its pod is evicted after step 7
    await eventually(lambda: (folder / "held-1").exists(), what="the first attempt at step 7")
    await eventually(
        lambda: "attempt 1 starts after step 0" in manager.read_log(job_id).data,
        what="the first attempt's output in the log",
    )
    first_pod = await evict_running_pod(k8s_api, job_id)
    job = await finished(manager, job_id)

    # Then the cluster started it again on a new pod, from its checkpoint, and it completed
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert (job.attempt, job.max_attempts) == (2, 3)
    # every step ran exactly once over both attempts: 1 + 2 + … + 20
    assert (folder / "steps.txt").read_text().split() == [str(n) for n in range(1, 21)]
    log = manager.read_log(job_id).data
    assert "total 210" in log
    assert "attempt 2 starts after step 7" in log
    separator = SEPARATOR.format(n=2, m=3)
    assert log.count("---- attempt") == 1
    assert (
        log.index("attempt 1 starts after step 0")
        < log.index(separator)
        < log.index("attempt 2 starts after step 7")
    )
    assert f"pod {first_pod} started on" in log
    second_pods = {p["metadata"]["name"] for p in await pods(k8s_api, job_id)} - {first_pod}
    assert len(second_pods) == 1 and f"pod {second_pods.pop()} started on" in log
    assert manager.store.job_attempts(job_id).history[0]["reason"] == EVICTED  # type: ignore[union-attr]


async def test_a_job_that_fails_by_itself_is_not_started_again(
    manager: JobManager, project: Path, k8s_api: Any
) -> None:
    # Given a job with retries whose third cell raises
    broken = await submit(
        manager,
        "x = 1",
        "print('loading')",
        "raise ValueError('the data is bad')",
        retries=2,
        folder="ck",
    )

    # When it runs
    job = await finished(manager, broken)

    # Then it failed on its one pod, and was not started again
    assert job.status is JobStatus.FAILED
    assert job.error is not None
    assert (job.error.ename, job.error.cell_index) == ("ValueError", 2)
    assert (job.attempt, job.max_attempts) == (1, 3)
    assert len(await pods(k8s_api, broken)) == 1
    assert "---- attempt" not in manager.read_log(broken).data
    # its checkpoint folder was made for it all the same, in alice's home
    assert (project / "ck").is_dir()


async def test_a_job_evicted_more_often_than_its_retries_allow_ends_failed_saying_so(
    manager: JobManager, project: Path, k8s_api: Any, tmp_path: Path
) -> None:
    # Given a job with one retry that waits on each attempt, noting the attempt it is
    job_id = await submit(
        manager, attempt_noting_cell(tmp_path / "never"), retries=1, folder="ckpt"
    )

    # When its pod is evicted on its first attempt and again on its second
    await take_away_two_attempts(
        project / "ckpt" / "held.txt", lambda: evict_running_pod(k8s_api, job_id)
    )
    job = await finished(manager, job_id)

    # Then it failed as preempted, saying its retries are used up
    assert job.status is JobStatus.FAILED
    assert (job.attempt, job.max_attempts) == (2, 2)
    assert job.status_message is not None
    assert job.status_message.startswith(f"The job was preempted: {EVICTED}.")
    assert job.status_message.endswith(exhausted(2))
    assert job.error is not None and job.error.ename == "Preempted"
    log = manager.read_log(job_id).data
    assert log.count("---- attempt") == 1
    assert SEPARATOR.format(n=2, m=2) in log


async def test_a_job_evicted_while_the_service_is_away_resumes_and_is_counted_once(
    manager: JobManager,
    make_k8s_manager: ManagerFactory,
    project: Path,
    k8s_api: Any,
    tmp_path: Path,
) -> None:
    # Given a job holding at step 5 of its first attempt, and a job service that goes away
    job_id = await submit(manager, training_cell(hold_at=5), retries=2, folder="checkpoints/a")
    folder = project / "checkpoints" / "a"
    await eventually(lambda: (folder / "held-1").exists(), what="the first attempt at step 5")
    await manager.shutdown()

    # When its pod is evicted meanwhile, and the cluster starts it again by itself
    await evict_running_pod(k8s_api, job_id)
    await eventually(lambda: (folder / "attempt-2").exists(), what="the second attempt")
    # and the job service comes back
    back = await make_k8s_manager(root=tmp_path / "root", home_pvc_name_template="claim-{username}")
    job = await finished(back, job_id)

    # Then the job completed from its checkpoint, its second attempt counted once
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert (job.attempt, job.max_attempts) == (2, 3)
    assert (folder / "steps.txt").read_text().split() == [str(n) for n in range(1, 21)]
    log = back.read_log(job_id).data
    assert log.count("---- attempt") == 1
    assert (
        "[job] ---- attempt 2 of 3: the cluster took its pod away while the job service was not "
        "following it; starting again from its checkpoint ----"
    ) in log
    assert "total 210" in log


async def test_a_checkpoint_needs_a_home_to_keep_it_in(
    job_pods: Any, make_k8s_manager: ManagerFactory
) -> None:
    # Given jobs that get no home volume on this cluster
    manager = await make_k8s_manager(home_pvc_name_template="")

    # When a job asks for a checkpoint folder
    job_id = await submit(manager, "x = 1", retries=1, folder="ckpt")
    job = await finished(manager, job_id)

    # Then it is refused with what to do, before any pod runs
    assert job.status is JobStatus.FAILED
    assert job.status_message is not None
    assert job.status_message.startswith(
        "This job asks for a checkpoint folder, but jobs on this cluster get no home volume"
    )
    assert "Submit it without a checkpoint" in job.status_message


async def test_a_job_run_again_after_it_was_taken_away_continues_from_the_checkpoint(
    manager: JobManager, project: Path, k8s_api: Any
) -> None:
    # Given a job without retries, taken away at step 5
    first = await submit(manager, training_cell(hold_at=5), retries=0, folder="checkpoints/b")
    folder = project / "checkpoints" / "b"
    await eventually(lambda: (folder / "held-1").exists(), what="the job at step 5")
    await evict_running_pod(k8s_api, first)
    ended = await finished(manager, first)
    assert ended.status is JobStatus.FAILED
    assert ended.status_message is not None and ended.status_message.endswith("Run the job again.")

    # When its owner runs it again with the same checkpoint folder
    again = await submit(manager, training_cell(hold_at=5), retries=0, folder="checkpoints/b")
    job = await finished(manager, again)

    # Then the new job is its own first attempt, and it goes on from step 5 to the end
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert (job.attempt, job.max_attempts) == (1, 1)
    log = manager.read_log(again).data
    assert "attempt 1 starts after step 5" in log and "total 210" in log
    assert (folder / "steps.txt").read_text().split() == [str(n) for n in range(1, 21)]
