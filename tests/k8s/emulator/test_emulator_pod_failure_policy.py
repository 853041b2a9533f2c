"""The simulated Job controller's pod failure policy, and the Eviction API that marks pods
``DisruptionTarget``: what a batch/v1 client sees, as on a real cluster."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.support.k8s_cluster import wait_for
from tests.support.k8s_emulator import PodMatch, ProcessRunner
from tests.support.k8s_emulator.jobs import match_pod_failure_policy
from tests.support.k8s_manifests import job

DISRUPTION_COUNTS = {
    "rules": [
        {"action": "Count", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {
            "action": "FailJob",
            "onExitCodes": {"containerName": "main", "operator": "NotIn", "values": [0]},
        },
    ]
}
DISRUPTION_IGNORED = {
    "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
}


# A container that says it has ``started`` and runs until the file ``done`` appears in its
# folder; on SIGTERM it
# writes ``terminating`` and waits for ``saved`` before it ends with 143, as a program
# saving its work does. Each pod's container has a folder of its own (``pod_folder``).
SAVES_ON_SIGTERM = [
    sys.executable,
    "-c",
    "import pathlib, signal, sys, time\n"
    "def stop(*_):\n"
    "    pathlib.Path('terminating').touch()\n"
    "    while not pathlib.Path('saved').exists():\n"
    "        time.sleep(0.02)\n"
    "    sys.exit(143)\n"
    "signal.signal(signal.SIGTERM, stop)\n"
    "pathlib.Path('started').touch()\n"
    "while not pathlib.Path('done').exists():\n"
    "    time.sleep(0.02)\n",
]


def pod_folder(tmp_path: Path, pod: dict[str, Any]) -> Path:
    return tmp_path / "pods" / "default" / pod["metadata"]["name"] / "main"


async def evict_and_let_it_end(api: Any, tmp_path: Path, pod: dict[str, Any]) -> None:
    """Evict the pod, and let it save and end once it got its SIGTERM."""
    folder = pod_folder(tmp_path, pod)
    await evict(api, pod["metadata"]["name"])
    await wait_for(lambda: (folder / "terminating").exists(), what="the SIGTERM")
    (folder / "saved").touch()


async def read_job(batch: client.BatchV1Api, name: str) -> dict[str, Any]:
    response = await batch.read_namespaced_job(name, "default", _preload_content=False)
    return json.loads(await response.read())


async def job_pods(core: client.CoreV1Api, name: str) -> list[dict[str, Any]]:
    response = await core.list_namespaced_pod(
        "default", label_selector=f"batch.kubernetes.io/job-name={name}", _preload_content=False
    )
    pods = json.loads(await response.read())["items"]
    return sorted(pods, key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None
    )


async def until_job(batch: client.BatchV1Api, name: str, kind: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        current = await read_job(batch, name)
        found = condition(current, kind)
        return current if found and found["status"] == "True" else None

    return await wait_for(check, timeout=30, what=f"job {name} {kind}")


async def started_pod(
    core: client.CoreV1Api, name: str, tmp_path: Path, before: tuple[dict[str, Any], ...] = ()
) -> dict[str, Any]:
    """The Job's pod, other than those ``before``, once its program has started."""
    seen = {pod["metadata"]["uid"] for pod in before}

    async def check() -> dict[str, Any] | None:
        for pod in await job_pods(core, name):
            if pod["metadata"]["uid"] not in seen:
                if (pod_folder(tmp_path, pod) / "started").exists():
                    return pod
        return None

    return await wait_for(check, timeout=30, what=f"a new pod of {name} running")


async def evict(api: Any, name: str, body_name: str | None = None) -> tuple[int, dict[str, Any]]:
    """POST pods/{name}/eviction as kubectl drain does; returns (HTTP status, body)."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": body_name or name, "namespace": "default"},
    }
    try:
        response = await client.CoreV1Api(api).create_namespaced_pod_eviction(
            name, "default", body, _preload_content=False
        )
    except client.ApiException as error:
        return error.status, json.loads(error.body)
    return response.status, json.loads(await response.read())


@pytest.fixture
def apis(k8s_api: Any, k8s_controls: Any) -> tuple[client.CoreV1Api, client.BatchV1Api]:
    k8s_controls.add_gpu_nodes(1)
    return client.CoreV1Api(k8s_api), client.BatchV1Api(k8s_api)


@pytest.fixture
def processes(k8s_controls: Any, tmp_path: Path) -> None:
    k8s_controls.run_processes(
        ProcessRunner(match=PodMatch(labels="app=policy"), workdir=tmp_path / "pods")
    )


def policy_job(name: str, command: list[str], **spec: Any) -> dict[str, Any]:
    return job(name, command=command, labels={"app": "policy"}, **spec)


# -- the rules, as the Job controller matches them -----------------------------------------


def failed_pod(*, exit_code: int | None = None, conditions: tuple[str, ...] = ()) -> dict:
    statuses = []
    if exit_code is not None:
        statuses.append(
            {"name": "main", "state": {"terminated": {"exitCode": exit_code, "reason": "Error"}}}
        )
    return {
        "metadata": {"name": "train-x7k2p", "namespace": "default"},
        "status": {
            "phase": "Failed",
            "containerStatuses": statuses,
            "conditions": [{"type": kind, "status": "True"} for kind in conditions],
        },
    }


def test_the_first_matching_rule_decides_and_no_match_counts() -> None:
    # A disrupted pod whose container ended with 143 meets the Count rule before FailJob
    assert match_pod_failure_policy(
        DISRUPTION_COUNTS, failed_pod(exit_code=143, conditions=("DisruptionTarget",))
    ) == (None, True, "Count")
    # A container that failed by itself fails the Job, saying which rule matched
    assert match_pod_failure_policy(DISRUPTION_COUNTS, failed_pod(exit_code=1)) == (
        "Container main for pod default/train-x7k2p failed with exit code 1 matching FailJob "
        "rule at index 1",
        True,
        "FailJob",
    )
    # An ignored disruption is not counted
    assert match_pod_failure_policy(
        DISRUPTION_IGNORED, failed_pod(exit_code=143, conditions=("DisruptionTarget",))
    ) == (None, False, "Ignore")
    # Exit code 0 never matches onExitCodes; a pod no rule matches is counted
    assert match_pod_failure_policy(DISRUPTION_COUNTS, failed_pod(exit_code=0)) == (
        None,
        True,
        None,
    )
    assert match_pod_failure_policy(DISRUPTION_IGNORED, failed_pod(exit_code=1)) == (
        None,
        True,
        None,
    )
    # onExitCodes of another container, or a condition with another status, do not match
    other = {
        "rules": [
            {
                "action": "Ignore",
                "onExitCodes": {"containerName": "sidecar", "operator": "In", "values": [1]},
            }
        ]
    }
    assert match_pod_failure_policy(other, failed_pod(exit_code=1))[2] is None
    false_status = {
        "rules": [
            {
                "action": "FailJob",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "False"}],
            }
        ]
    }
    assert (
        match_pod_failure_policy(false_status, failed_pod(conditions=("DisruptionTarget",)))[2]
        is None
    )
    # A condition rule says which condition matched
    fail_on_disruption = {
        "rules": [
            {
                "action": "FailJob",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
            }
        ]
    }
    assert (
        match_pod_failure_policy(fail_on_disruption, failed_pod(conditions=("DisruptionTarget",)))[
            0
        ]
        == "Pod default/train-x7k2p has condition DisruptionTarget matching FailJob rule at index 0"
    )


# -- the Eviction API --------------------------------------------------------------------


async def test_an_evicted_pod_is_marked_as_disrupted_then_deleted(
    apis: Any, k8s_api: Any, processes: None, tmp_path: Path
) -> None:
    # Given a Job's running pod whose program saves its work on SIGTERM
    core, batch = apis
    await batch.create_namespaced_job(
        "default", policy_job("drained", SAVES_ON_SIGTERM, podFailurePolicy=DISRUPTION_COUNTS)
    )
    pod = await started_pod(core, "drained", tmp_path)
    name = pod["metadata"]["name"]

    # When it is evicted (kubectl drain)
    code, body = await evict(k8s_api, name)

    # Then the API answers 201 Success, and the pod is marked and being deleted
    assert code == 201 and body["status"] == "Success"
    response = await core.read_namespaced_pod(name, "default", _preload_content=False)
    marked = json.loads(await response.read())
    disrupted = condition(marked, "DisruptionTarget")
    assert disrupted is not None
    assert (disrupted["status"], disrupted["reason"], disrupted["message"]) == (
        "True",
        "EvictionByEvictionAPI",
        "Eviction API: evicting",
    )
    assert marked["metadata"]["deletionTimestamp"]
    (pod_folder(tmp_path, pod) / "saved").touch()


async def test_an_eviction_names_its_pod(apis: Any, k8s_api: Any, processes: None) -> None:
    core, _ = apis
    code, body = await evict(k8s_api, "nobody-here")
    assert (code, body["reason"]) == (404, "NotFound")
    await core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "lonely", "labels": {"app": "other"}},
            "spec": {"containers": [{"name": "main", "image": "python:3.12-slim"}]},
        },
    )
    code, body = await evict(k8s_api, "lonely", body_name="someone-else")
    assert (code, body["message"]) == (400, "name in URL does not match name in Eviction object")


# -- the Job controller -------------------------------------------------------------------


async def test_disruptions_are_counted_and_replaced_after_the_pod_ended(
    apis: Any, k8s_api: Any, processes: None, tmp_path: Path
) -> None:
    # Given a Job that counts disruptions, with one retry
    core, batch = apis
    await batch.create_namespaced_job(
        "default",
        policy_job("train", SAVES_ON_SIGTERM, backoffLimit=1, podFailurePolicy=DISRUPTION_COUNTS),
    )
    created = await read_job(batch, "train")
    assert created["spec"]["podReplacementPolicy"] == "Failed"
    assert created["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"] == [
        {"type": "DisruptionTarget", "status": "True"}
    ]
    first = await started_pod(core, "train", tmp_path)

    # When its pod is evicted and takes its time to stop
    await evict(k8s_api, first["metadata"]["name"])
    folder = pod_folder(tmp_path, first)
    await wait_for(lambda: (folder / "terminating").exists(), what="the SIGTERM")

    async def terminating() -> dict[str, Any] | None:
        current = await read_job(batch, "train")
        return current if current["status"].get("terminating") == 1 else None

    await wait_for(terminating, timeout=30, what="the Job counting its terminating pod")
    # Then no pod replaces it while it is still stopping
    assert [p["metadata"]["name"] for p in await job_pods(core, "train")] == [
        first["metadata"]["name"]
    ]

    # And once it has ended (Failed, exit 143) it is counted and replaced
    (folder / "saved").touch()
    second = await started_pod(core, "train", tmp_path, before=(first,))
    current = await read_job(batch, "train")
    assert current["status"]["failed"] == 1 and condition(current, "Failed") is None

    # When the second pod is evicted too, the retry is used up
    await evict_and_let_it_end(k8s_api, tmp_path, second)
    failed = await until_job(batch, "train", "Failed")
    assert condition(failed, "Failed")["reason"] == "BackoffLimitExceeded"  # type: ignore[index]
    assert failed["status"]["failed"] == 2
    assert "active" not in failed["status"]


async def test_a_pod_that_fails_by_itself_fails_the_job_at_once(apis: Any, processes: None) -> None:
    # Given a Job with retries left whose container fails with exit code 3
    core, batch = apis
    command = [sys.executable, "-c", "import sys; print('bad data'); sys.exit(3)"]
    await batch.create_namespaced_job(
        "default",
        policy_job("broken", command, backoffLimit=5, podFailurePolicy=DISRUPTION_COUNTS),
    )

    # Then the FailJob rule ends it after one pod, saying why
    failed = await until_job(batch, "broken", "Failed")
    (pod,) = await job_pods(core, "broken")
    reason = condition(failed, "Failed")
    assert reason is not None and reason["reason"] == "PodFailurePolicy"
    assert reason["message"] == (
        f"Container main for pod default/{pod['metadata']['name']} failed with exit code 3 "
        "matching FailJob rule at index 1"
    )
    assert condition(failed, "FailureTarget")["reason"] == "PodFailurePolicy"  # type: ignore[index]
    assert failed["status"]["failed"] == 1


async def test_an_ignored_disruption_does_not_count_toward_the_backoff_limit(
    apis: Any, k8s_api: Any, processes: None, tmp_path: Path
) -> None:
    # Given a Job with no retries at all that ignores disruptions
    core, batch = apis
    await batch.create_namespaced_job(
        "default",
        policy_job(
            "patient", SAVES_ON_SIGTERM, backoffLimit=0, podFailurePolicy=DISRUPTION_IGNORED
        ),
    )

    # When its pod is evicted twice
    pods = [await started_pod(core, "patient", tmp_path)]
    for _ in range(2):
        await evict_and_let_it_end(k8s_api, tmp_path, pods[-1])
        pods.append(await started_pod(core, "patient", tmp_path, before=tuple(pods)))

    # Then it is still running on a third pod, and no failure was counted
    current = await read_job(batch, "patient")
    assert "failed" not in current["status"] and condition(current, "Failed") is None
    (pod_folder(tmp_path, pods[-1]) / "done").touch()
    done = await until_job(batch, "patient", "Complete")
    assert "failed" not in done["status"] and done["status"]["succeeded"] == 1


# -- what the API server refuses ------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (
            {"restartPolicy": "OnFailure"},
            "spec.template.spec.restartPolicy",
            'Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is '
            "specified",
        ),
        (
            {"rule": {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0, 3]}}},
            "spec.podFailurePolicy.rules[0].onExitCodes.values[0]",
            "Invalid value: 0: must not be 0 for the In operator",
        ),
        (
            {"rule": {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3, 1]}}},
            "spec.podFailurePolicy.rules[0].onExitCodes.values",
            "Invalid value: []int32{3, 1}: must be ordered",
        ),
        (
            {
                "rule": {
                    "action": "FailJob",
                    "onExitCodes": {"containerName": "runner", "operator": "In", "values": [1]},
                }
            },
            "spec.podFailurePolicy.rules[0].onExitCodes.containerName",
            'Invalid value: "runner": must be one of the container or initContainer names in '
            "the pod template",
        ),
        (
            {"rule": {"action": "Retry", "onPodConditions": [{"type": "DisruptionTarget"}]}},
            "spec.podFailurePolicy.rules[0].action",
            'Unsupported value: "Retry": supported values: "Count", "FailIndex", "FailJob", '
            '"Ignore"',
        ),
        (
            {"rule": {"action": "Ignore"}},
            "spec.podFailurePolicy.rules[0]",
            "Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
        ),
        (
            {"replacement": "TerminatingOrFailed"},
            "spec.podReplacementPolicy",
            'Unsupported value: "TerminatingOrFailed": supported values: "Failed"',
        ),
    ],
)
async def test_a_pod_failure_policy_is_validated_as_the_api_server_does(
    apis: Any, change: dict[str, Any], field: str, message: str
) -> None:
    _, batch = apis
    manifest = job("refused", podFailurePolicy=json.loads(json.dumps(DISRUPTION_COUNTS)))
    if "restartPolicy" in change:
        manifest["spec"]["template"]["spec"]["restartPolicy"] = change["restartPolicy"]
    if "rule" in change:
        manifest["spec"]["podFailurePolicy"]["rules"] = [change["rule"]]
    if "replacement" in change:
        manifest["spec"]["podReplacementPolicy"] = change["replacement"]
    with pytest.raises(client.ApiException) as refused:
        await batch.create_namespaced_job("default", manifest)
    assert refused.value.status == 422
    causes = json.loads(refused.value.body)["details"]["causes"]
    assert (field, message) in {(cause["field"], cause["message"]) for cause in causes}


async def test_a_pending_pod_evicted_before_it_was_placed_is_failed_and_replaced(
    apis: Any, k8s_api: Any
) -> None:
    # Given a Job whose pod waits for a node that does not exist
    core, batch = apis
    manifest = policy_job(
        "waiting",
        [sys.executable, "-c", "pass"],
        backoffLimit=1,
        podFailurePolicy=DISRUPTION_COUNTS,
    )
    manifest["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "gone"}
    await batch.create_namespaced_job("default", manifest)
    (pending,) = await wait_for(lambda: job_pods(core, "waiting"), what="its pod")

    # When it is evicted before it was ever placed
    code, _ = await evict(k8s_api, pending["metadata"]["name"])
    assert code == 201

    # Then the pod garbage collector fails it (no kubelet will), and the Job counts the
    # disruption and replaces it
    async def replaced() -> dict[str, Any] | None:
        current = await read_job(batch, "waiting")
        names = [p["metadata"]["name"] for p in await job_pods(core, "waiting")]
        if current["status"].get("failed") == 1 and pending["metadata"]["name"] not in names:
            return current
        return None

    current = await wait_for(replaced, timeout=30, what="the evicted pod counted and replaced")
    assert current["status"].get("active") == 1 and condition(current, "Failed") is None
