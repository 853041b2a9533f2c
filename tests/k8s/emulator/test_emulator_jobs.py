"""The simulated Job controller, as a batch/v1 client sees it."""

from __future__ import annotations

import json
import sys

import pytest
from kubernetes_asyncio import client

from tests.support.k8s_cluster import wait_for
from tests.support.k8s_emulator import PodMatch, ProcessRunner
from tests.support.k8s_manifests import job


async def read_job(batch: client.BatchV1Api, name: str) -> dict:
    response = await batch.read_namespaced_job(name, "default", _preload_content=False)
    return json.loads(await response.read())


async def job_pods(core: client.CoreV1Api, name: str) -> list[dict]:
    response = await core.list_namespaced_pod(
        "default", label_selector=f"batch.kubernetes.io/job-name={name}", _preload_content=False
    )
    return json.loads(await response.read())["items"]


def conditions(job_object: dict) -> dict[str, tuple[str, str]]:
    return {
        c["type"]: (c["status"], c.get("reason", ""))
        for c in job_object["status"].get("conditions") or []
    }


async def until_job(
    batch: client.BatchV1Api, name: str, condition: str, timeout: float = 5.0
) -> dict:
    async def check():
        current = await read_job(batch, name)
        return current if conditions(current).get(condition, ("False",))[0] == "True" else None

    return await wait_for(check, timeout=timeout, what=f"job {name} {condition}")


@pytest.fixture
def apis(k8s_api, k8s_controls):
    k8s_controls.add_gpu_nodes(2)
    return client.CoreV1Api(k8s_api), client.BatchV1Api(k8s_api)


async def test_a_successful_job_completes_and_releases_its_pod(apis, k8s_controls):
    core, batch = apis
    k8s_controls.script(PodMatch(labels="job-name=ok"), exit_code=0, after=0.05, output="done\n")
    created = await batch.create_namespaced_job("default", job("ok"))
    uid = created.metadata.uid
    assert created.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    assert (
        created.spec.backoff_limit == 6
        and created.spec.completions == 1
        and created.spec.parallelism == 1
    )
    done = await until_job(batch, "ok", "Complete")
    assert conditions(done) == {
        "SuccessCriteriaMet": ("True", "CompletionsReached"),
        "Complete": ("True", "CompletionsReached"),
    }
    status = done["status"]
    assert status["succeeded"] == 1 and "failed" not in status and "active" not in status
    assert status["startTime"] and status["completionTime"]
    (p,) = await job_pods(core, "ok")
    assert p["metadata"]["name"].startswith("ok-")
    assert p["metadata"]["labels"] == {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "ok",
        "controller-uid": uid,
        "job-name": "ok",
    }
    assert p["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "ok",
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert p["spec"]["restartPolicy"] == "Never" and p["status"]["phase"] == "Succeeded"
    assert not p["metadata"].get("finalizers"), (
        "the job-tracking finalizer is released once counted"
    )
    assert await core.read_namespaced_pod_log(p["metadata"]["name"], "default") == "done\n"
    events = await core.list_namespaced_event("default", field_selector="involvedObject.kind=Job")
    assert {e.reason for e in events.items} == {"SuccessfulCreate", "Completed"}


async def test_failed_pods_are_replaced_until_the_backoff_limit(apis, k8s_controls):
    core, batch = apis
    k8s_controls.script(PodMatch(labels="job-name=flaky"), exit_code=1, after=0.01)
    await batch.create_namespaced_job("default", job("flaky", backoffLimit=2))
    failed = await until_job(batch, "flaky", "Failed")
    assert conditions(failed) == {
        "FailureTarget": ("True", "BackoffLimitExceeded"),
        "Failed": ("True", "BackoffLimitExceeded"),
    }
    assert failed["status"]["failed"] == 3
    pods = await job_pods(core, "flaky")
    assert len(pods) == 3 and {p["status"]["phase"] for p in pods} == {"Failed"}
    message = next(c["message"] for c in failed["status"]["conditions"] if c["type"] == "Failed")
    assert message == "Job has reached the specified backoff limit"


async def test_a_job_past_its_deadline_fails_and_its_pods_are_deleted(apis):
    core, batch = apis
    await batch.create_namespaced_job("default", job("slow", activeDeadlineSeconds=1))
    await wait_for(lambda: job_pods(core, "slow"), what="a pod")
    failed = await until_job(batch, "slow", "Failed", timeout=6)
    assert conditions(failed)["Failed"] == ("True", "DeadlineExceeded")
    assert await wait_for(lambda: _none(job_pods(core, "slow")), what="pod deletion")


async def _none(pods_coroutine) -> bool:
    return not await pods_coroutine


async def test_a_suspended_job_has_no_pods_until_resumed(apis):
    core, batch = apis
    await batch.create_namespaced_job("default", job("later", suspend=True))
    suspended = await until_job(batch, "later", "Suspended")
    assert conditions(suspended)["Suspended"] == ("True", "JobSuspended")
    assert await job_pods(core, "later") == []
    await batch.patch_namespaced_job("later", "default", {"spec": {"suspend": False}})
    await wait_for(lambda: job_pods(core, "later"), what="a pod after resuming")
    resumed = await wait_for(
        lambda: _resumed(batch, "later"), what="the Suspended condition to turn False"
    )
    assert conditions(resumed)["Suspended"] == ("False", "JobResumed")
    await batch.patch_namespaced_job("later", "default", {"spec": {"suspend": True}})
    await wait_for(lambda: _none(job_pods(core, "later")), what="the pod deleted on suspension")
    assert "failed" not in (await read_job(batch, "later"))["status"], "suspension is not a failure"


async def _resumed(batch: client.BatchV1Api, name: str) -> dict | None:
    current = await read_job(batch, name)
    return current if conditions(current)["Suspended"][0] == "False" else None


async def test_a_finished_job_is_deleted_after_its_ttl_with_its_pods(apis, k8s_controls):
    core, batch = apis
    k8s_controls.script(PodMatch(labels="job-name=short-lived"), exit_code=0)
    await batch.create_namespaced_job("default", job("short-lived", ttlSecondsAfterFinished=0))

    async def gone() -> bool:
        try:
            await batch.read_namespaced_job("short-lived", "default")
        except client.ApiException as error:
            return error.status == 404
        return False

    await wait_for(gone, what="TTL deletion")
    assert await wait_for(lambda: _none(job_pods(core, "short-lived")), what="cascade to the pods")


async def test_a_job_can_run_a_real_process_and_keep_its_log(apis, k8s_controls, tmp_path):
    core, batch = apis
    k8s_controls.run_processes(
        ProcessRunner(match=PodMatch(labels="job-name=notebook"), workdir=tmp_path)
    )
    code = "import pathlib; pathlib.Path('out.txt').write_text('42'); print('executed cell 1'); print('executed cell 2')"
    await batch.create_namespaced_job(
        "default", job("notebook", command=[sys.executable, "-c", code], backoffLimit=0)
    )
    done = await until_job(batch, "notebook", "Complete")
    assert done["status"]["succeeded"] == 1
    (p,) = await job_pods(core, "notebook")
    assert (
        await core.read_namespaced_pod_log(p["metadata"]["name"], "default")
        == "executed cell 1\nexecuted cell 2\n"
    )
    assert (tmp_path / "default" / p["metadata"]["name"] / "main" / "out.txt").read_text() == "42"
