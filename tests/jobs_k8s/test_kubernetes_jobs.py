"""Scenarios: notebook jobs run as Kubernetes Jobs on the test cluster, their pods as real processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import nbformat
from kubernetes_asyncio import client

from gpuspawner.core.admission import GPUAdmission
from gpuspawner.core.allocation_record import ALLOCATION_ANNOTATION, devices_from_nodes
from gpuspawner.policy import GPUDevice, UserIdentity, load_catalog
from jupyter_to_job.executors.kube_client import KubeClient
from jupyter_to_job.k8s_objects import job_object_name
from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, JobStatus
from jupyter_to_job.runfiles import parse_compact_status
from jupyter_to_job.service.flavor_admission import FlavorAdmission, IdentityBook
from tests.support import eventually
from tests.support.job_managers import ManagerFactory, finished
from tests.support.notebooks import notebook, wait_for_file

from .conftest import job_pod


def gpu_capacity(
    tmp_path: Path, flavor: str, gpus: int, devices: list[GPUDevice]
) -> FlavorAdmission:
    """The job service's capacity: a catalog with one ``gpus``-GPU flavor open to everyone,
    over ``devices``, rendered for Kubernetes (whole GPUs) by the service's admission."""
    path = tmp_path / "catalog.yaml"
    path.write_text(
        f"flavors:\n  - {{id: {flavor}, title: {flavor}, gpu: {{count: {gpus}}}, "
        "access: {everyone: true}}\n"
    )
    identities = IdentityBook(tmp_path / "identities.json")
    identities.remember(UserIdentity("alice"))
    return FlavorAdmission(
        admission=GPUAdmission(fallback_catalog=load_catalog(path), target="kubernetes"),
        devices=devices,
        identities=identities,
    )


async def submit(manager: JobManager, nb: nbformat.NotebookNode, **fields: Any) -> str:
    request = CreateJob(input_path="train.ipynb", output_formats=["ipynb"], **fields)
    created = await manager.create("alice", request, notebook=nbformat.writes(nb))
    return created.job_id


def cell_lines(manager: JobManager, job_id: str) -> list[str]:
    return [
        line for line in manager.read_log(job_id).data.splitlines() if line.startswith("[cell ")
    ]


async def read_object(api: Any, path: str) -> dict[str, Any] | None:
    try:
        response = await api.call_api(
            path,
            "GET",
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
        )
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise
    if response.status == 404:
        return None
    return json.loads(await response.read())


def job_path(job_id: str) -> str:
    return f"/apis/batch/v1/namespaces/default/jobs/{job_object_name(job_id)}"


async def started_pod(manager: JobManager, k8s_api: Any, job_id: str, line: str) -> str:
    """The name of the job's pod, once the job's log shows ``line``."""
    await eventually(lambda: line in manager.read_log(job_id).data, what=line)
    pod = await job_pod(client.CoreV1Api(k8s_api), job_id)
    assert pod is not None
    return str(pod["metadata"]["name"])


BEFORE = "for i in range(40):\n    print('before', i)"
BEFORE_LINES = [f"[cell 0] before {i}" for i in range(40)]


def blocked(gate: Path) -> nbformat.NotebookNode:
    """Forty lines, then a cell that waits for ``gate``."""
    return notebook(BEFORE, "print('ready')\n" + wait_for_file(gate))


async def test_a_notebook_runs_in_a_kubernetes_job_and_its_log_is_kept_in_order(
    job_pods: Any, make_k8s_manager: ManagerFactory, k8s_api: Any, pods_dir: Path
) -> None:
    # Given the job service running jobs on Kubernetes
    manager = await make_k8s_manager(ttl_seconds_after_finished=7200)

    # When a three-cell notebook is submitted
    job_id = await submit(
        manager,
        notebook("print('one')", "for i in range(3):\n    print('two', i)", "print('three')"),
    )
    job = await finished(manager, job_id)

    # Then it completes, with every cell's output in order in the durable log
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert (job.cells_completed, job.cells_total, job.exit_code) == (3, 3, 0)
    assert job.status_message == "All 3 code cells ran."
    assert cell_lines(manager, job_id) == [
        "[cell 0] one",
        "[cell 1] two 0",
        "[cell 1] two 1",
        "[cell 1] two 2",
        "[cell 2] three",
    ]
    log = manager.read_log(job_id).data.splitlines()
    assert log[0] == "[job] created by alice from train.ipynb"
    assert f"[job] Kubernetes Job default/{job_object_name(job_id)} created" in log
    assert log[-1] == "[job] completed: All 3 code cells ran."
    assert not any("final status" in line for line in log)  # the status line is not shown

    # And the runner left its result where the kubelet reads the termination message
    [message] = pods_dir.rglob("fs/dev/termination-log")
    reported = parse_compact_status(message.read_text())
    assert reported is not None
    assert (reported.state, reported.cells_completed, reported.exit_code) == (
        JobStatus.COMPLETED,
        3,
        0,
    )

    # And only then did the Job get its time to live; its ConfigMap goes with it
    k8s_job = await read_object(k8s_api, job_path(job_id))
    assert k8s_job is not None and k8s_job["spec"]["ttlSecondsAfterFinished"] == 7200
    configmap = await read_object(
        k8s_api, f"/api/v1/namespaces/default/configmaps/{job_object_name(job_id)}"
    )
    assert configmap is not None
    assert configmap["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": job_object_name(job_id),
            "uid": k8s_job["metadata"]["uid"],
        }
    ]


async def test_a_failing_cell_reports_its_error_from_inside_the_pod(
    job_pods: Any, make_k8s_manager: ManagerFactory
) -> None:
    manager = await make_k8s_manager()

    job_id = await submit(manager, notebook("print('fine')", "1 / 0", "print('never')"))
    job = await finished(manager, job_id)

    assert job.status is JobStatus.FAILED
    assert job.status_message == "Cell 2 raised ZeroDivisionError: division by zero"
    assert job.error is not None and (job.error.cell_index, job.error.ename) == (
        1,
        "ZeroDivisionError",
    )
    assert (job.cells_completed, job.cells_total, job.exit_code) == (1, 3, 1)
    assert "[cell 1] ZeroDivisionError: division by zero" in manager.read_log(job_id).data


async def test_a_pod_killed_for_memory_fails_the_job_and_keeps_its_output(
    job_pods: Any, make_k8s_manager: ManagerFactory, k8s_api: Any, tmp_path: Path
) -> None:
    # Given a job that has printed forty lines and is in its second cell
    manager = await make_k8s_manager()
    job_id = await submit(manager, blocked(tmp_path / "never"))
    pod = await started_pod(manager, k8s_api, job_id, "[cell 1] ready")

    # When the container is killed at its memory limit
    job_pods.oom_kill("default", pod)
    job = await finished(manager, job_id)

    # Then the job failed for memory, and every line written before the kill is kept
    assert job.status is JobStatus.FAILED
    assert job.status_message is not None
    assert "out of memory (the container was killed at its memory limit)" in job.status_message
    assert "after 1 of 2 code cells" in job.status_message
    assert job.error is not None and (job.error.ename, job.error.cell_index) == ("OutOfMemory", 1)
    assert job.exit_code == 137
    assert cell_lines(manager, job_id) == [*BEFORE_LINES, "[cell 1] ready"]


async def test_deleting_the_pod_mid_run_loses_no_line(
    job_pods: Any, make_k8s_manager: ManagerFactory, k8s_api: Any, tmp_path: Path
) -> None:
    manager = await make_k8s_manager()
    job_id = await submit(manager, blocked(tmp_path / "never"))
    pod = await started_pod(manager, k8s_api, job_id, "[cell 1] ready")

    # When someone deletes the pod (the runner gets SIGTERM, as from kubectl delete)
    await client.CoreV1Api(k8s_api).delete_namespaced_pod(pod, "default")
    job = await finished(manager, job_id)

    # Then the job failed saying so, and its log has every line, the runner's last words too
    assert job.status is JobStatus.FAILED
    assert job.status_message is not None
    assert job.status_message.startswith(
        "The job's Kubernetes pod was deleted outside the job service"
    )
    assert job.error is not None and job.error.ename == "PodDeleted"
    assert cell_lines(manager, job_id)[:41] == [*BEFORE_LINES, "[cell 1] ready"]
    log = manager.read_log(job_id).data
    assert "[job] stop requested (SIGTERM); interrupting the kernel" in log
    assert "[job] stopped: Stopped (SIGTERM) after 1 of 2 code cells" in log


async def test_deleting_the_job_mid_run_loses_no_line(
    job_pods: Any, make_k8s_manager: ManagerFactory, k8s_api: Any, tmp_path: Path
) -> None:
    manager = await make_k8s_manager()
    job_id = await submit(manager, blocked(tmp_path / "never"))
    await started_pod(manager, k8s_api, job_id, "[cell 1] ready")

    await client.BatchV1Api(k8s_api).delete_namespaced_job(
        job_object_name(job_id), "default", propagation_policy="Background"
    )
    job = await finished(manager, job_id)

    assert job.status is JobStatus.FAILED
    assert job.error is not None and job.error.ename == "JobDeleted"
    assert cell_lines(manager, job_id)[:41] == [*BEFORE_LINES, "[cell 1] ready"]
    assert "[job] stopped: Stopped (SIGTERM)" in manager.read_log(job_id).data


async def test_deleting_the_job_after_its_end_loses_nothing(
    job_pods: Any, make_k8s_manager: ManagerFactory, k8s_api: Any
) -> None:
    manager = await make_k8s_manager()
    job_id = await submit(manager, notebook(BEFORE))
    job = await finished(manager, job_id)
    assert job.status is JobStatus.COMPLETED, job.status_message
    log_before = manager.read_log(job_id).data

    await client.BatchV1Api(k8s_api).delete_namespaced_job(
        job_object_name(job_id), "default", propagation_policy="Background"
    )

    async def pod_gone() -> bool:
        return await job_pod(client.CoreV1Api(k8s_api), job_id) is None

    await eventually(pod_gone, what="the pod to be deleted with its Job")
    assert manager.read_log(job_id).data == log_before
    assert cell_lines(manager, job_id) == BEFORE_LINES
    assert manager.describe(job_id).status is JobStatus.COMPLETED


async def test_stopping_a_job_deletes_its_kubernetes_job_after_the_runner_wrapped_up(
    job_pods: Any, make_k8s_manager: ManagerFactory, k8s_api: Any, tmp_path: Path
) -> None:
    manager = await make_k8s_manager()
    job_id = await submit(manager, blocked(tmp_path / "never"))
    await started_pod(manager, k8s_api, job_id, "[cell 1] ready")

    await manager.stop(job_id)
    job = await finished(manager, job_id)

    assert job.status is JobStatus.STOPPED, job.status_message
    assert job.status_message is not None
    assert job.status_message.startswith("Stopped on request after 1 of 2 code cells")
    assert cell_lines(manager, job_id)[:41] == [*BEFORE_LINES, "[cell 1] ready"]
    assert await read_object(k8s_api, job_path(job_id)) is None


async def test_a_restarted_service_follows_the_job_on_without_repeating_a_line(
    job_pods: Any, make_k8s_manager: ManagerFactory, k8s_api: Any, tmp_path: Path
) -> None:
    # Given a job waiting in its second cell
    gate = tmp_path / "gate"
    root = tmp_path / "root"
    manager = await make_k8s_manager(root=root)
    job_id = await submit(
        manager,
        notebook(BEFORE, "print('ready')\n" + wait_for_file(gate), "print('after the restart')"),
    )
    await started_pod(manager, k8s_api, job_id, "[cell 1] ready")

    # When the job service stops (the Job runs on) and a new one starts on the same store
    await manager.shutdown()
    second = await make_k8s_manager(root=root)
    assert second.reconcile_report is not None and second.reconcile_report.adopted == [job_id]
    gate.touch()
    job = await finished(second, job_id)

    # Then the job completes, and each line is in the log exactly once
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert cell_lines(second, job_id) == [
        *BEFORE_LINES,
        "[cell 1] ready",
        "[cell 1] gate gate opened",
        "[cell 2] after the restart",
    ]
    log = second.read_log(job_id).data
    assert "[job] the job service restarted; following Kubernetes Job" in log


async def test_a_job_the_cluster_cannot_place_fails_with_the_schedulers_reason(
    job_pods: Any, make_k8s_manager: ManagerFactory, k8s_api: Any, tmp_path: Path
) -> None:
    # Given a flavor asking for more GPUs than any node has
    # (the service's pool believes in eight GPUs that the cluster does not have)
    manager = await make_k8s_manager(scheduling_timeout_seconds=2.0, pin_to_node=False)
    imagined = [GPUDevice(f"gpu-node-0/{n}", n, "A100-SXM4-80GB", 81920) for n in range(8)]
    manager.capacity = gpu_capacity(tmp_path, "eight-gpus", 8, imagined)

    # When a job on it is submitted
    job_id = await submit(manager, notebook("print('never')"), flavor="eight-gpus")

    # Then while it waits, its status says why, in the scheduler's words
    waiting = await eventually(
        lambda: (
            (manager.describe(job_id).status_message or "").startswith("Waiting for room")
            and manager.describe(job_id).status_message
        ),
        what="the waiting message",
    )
    assert "0/1 nodes are available: 1 Insufficient nvidia.com/gpu" in waiting

    # And after the scheduling timeout it fails with that reason, and its Job is gone
    job = await finished(manager, job_id)
    assert job.status is JobStatus.FAILED
    assert job.status_message is not None
    assert job.status_message.startswith("The cluster could not place the job within 2 s: 0/1")
    assert "Insufficient nvidia.com/gpu" in job.status_message
    assert job.error is not None and job.error.ename == "Unschedulable"

    async def job_gone() -> bool:
        return await read_object(k8s_api, job_path(job_id)) is None

    await eventually(job_gone, what="the Job to be deleted")


async def test_a_notebook_too_large_for_the_cluster_fails_with_what_to_do(
    job_pods: Any, make_k8s_manager: ManagerFactory
) -> None:
    manager = await make_k8s_manager(max_job_files_bytes=4096)

    job_id = await submit(manager, notebook("x = '" + "y" * 8000 + "'"))
    job = await finished(manager, job_id)

    assert job.status is JobStatus.FAILED
    assert job.status_message is not None
    assert job.status_message.startswith("The notebook is 0.0 MiB, but a job on this cluster")
    assert "ReadWriteMany" in job.status_message


async def test_a_broken_log_stream_is_reopened_without_losing_or_repeating_a_line(
    job_pods: Any, make_k8s_manager: ManagerFactory, monkeypatch: Any
) -> None:
    # Given log streams that break after two chunks, twice
    original = KubeClient.stream
    follows: list[int] = []

    async def breaking(self: KubeClient, path: str, query: Any, **options: Any) -> Any:
        following = ("follow", "true") in query
        if following:
            follows.append(1)
        chunks = 0
        async for chunk in original(self, path, query, **options):
            yield chunk
            chunks += 1
            if following and len(follows) <= 2 and chunks == 2:
                raise aiohttp.ClientPayloadError("connection reset by peer")

    monkeypatch.setattr(KubeClient, "stream", breaking)
    manager = await make_k8s_manager(log_reconnect_seconds=0.05)

    # When a job prints sixty lines over a while
    job_id = await submit(
        manager,
        notebook("import time\nfor i in range(60):\n    print('tick', i)\n    time.sleep(0.02)"),
    )
    job = await finished(manager, job_id)

    # Then the log was reopened, and has every line exactly once, in order
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert len(follows) >= 3
    assert cell_lines(manager, job_id) == [f"[cell 0] tick {i}" for i in range(60)]


async def test_a_job_past_its_deadline_is_stopped_by_the_job_controller(
    job_pods: Any, make_k8s_manager: ManagerFactory, tmp_path: Path
) -> None:
    # Given a job with a 3-second deadline whose notebook never ends
    manager = await make_k8s_manager()
    job_id = await submit(manager, blocked(tmp_path / "never"), deadline_seconds=3)

    # When the Job controller enforces activeDeadlineSeconds
    job = await finished(manager, job_id)

    # Then the job failed for its deadline, keeping what it printed
    assert job.status is JobStatus.FAILED
    assert job.status_message is not None
    assert job.status_message.startswith("The job ran past its deadline of 3 s and was stopped")
    assert job.error is not None and job.error.ename == "DeadlineExceeded"
    printed = cell_lines(manager, job_id)[:41]
    assert printed == [*BEFORE_LINES, "[cell 1] ready"][: len(printed)]
    assert "[job] the deadline of 3 s has passed" in manager.read_log(job_id).data


async def test_a_gpu_job_gets_the_share_the_capacity_pool_chose_on_that_gpus_node(
    job_pods: Any, make_k8s_manager: ManagerFactory, k8s_api: Any, tmp_path: Path
) -> None:
    # Given the hub's capacity pool over the cluster's GPUs, and a whole-GPU flavor
    nodes = await client.CoreV1Api(k8s_api).list_node(_preload_content=False)
    devices = devices_from_nodes(json.loads(await nodes.read())["items"])
    manager = await make_k8s_manager()
    manager.capacity = gpu_capacity(tmp_path, "a100", 1, devices)

    # When a job on it runs
    job_id = await submit(
        manager,
        notebook("import os\nprint(os.environ['GPUSPAWNER_GPU_SHARE'])"),
        flavor="a100",
    )
    job = await finished(manager, job_id)

    # Then its pod asked for that GPU's node and model, and the notebook saw its share
    assert job.status is JobStatus.COMPLETED, job.status_message
    assert cell_lines(manager, job_id) == ["[cell 0] 1 whole NVIDIA A100-SXM4-80GB, 80 GiB"]
    k8s_job = await read_object(k8s_api, job_path(job_id))
    assert k8s_job is not None
    pod_spec = k8s_job["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "kubernetes.io/hostname": "gpu-node-0",
    }
    assert pod_spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    allocation = json.loads(k8s_job["metadata"]["annotations"][ALLOCATION_ANNOTATION])
    assert allocation["device_ids"] == [devices[0].id] and allocation["key"] == f"job:{job_id}"
