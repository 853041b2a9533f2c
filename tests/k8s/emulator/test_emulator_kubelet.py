"""The simulated scheduler and kubelet: placement, events, container outcomes, processes."""

from __future__ import annotations

import json
import sys

import pytest
from kubernetes_asyncio import client

from tests.support.k8s_cluster import wait_for
from tests.support.k8s_emulator import PodMatch, ProcessRunner, gpu_node, node
from tests.support.k8s_manifests import pod


async def read(core: client.CoreV1Api, name: str, namespace: str = "default") -> dict:
    response = await core.read_namespaced_pod(name, namespace, _preload_content=False)
    return json.loads(await response.read())


async def until(
    core: client.CoreV1Api, name: str, predicate, what: str, timeout: float = 5.0
) -> dict:
    async def check():
        current = await read(core, name)
        return current if predicate(current) else None

    return await wait_for(check, timeout=timeout, what=f"pod {name}: {what}")


def running(p: dict) -> bool:
    return p["status"]["phase"] == "Running"


async def events_for(core: client.CoreV1Api, name: str) -> list[dict]:
    response = await core.list_namespaced_event(
        "default", field_selector=f"involvedObject.name={name}", _preload_content=False
    )
    items = json.loads(await response.read())["items"]
    return sorted(
        items,
        key=lambda e: (
            e["lastTimestamp"] or e["eventTime"],
            e["metadata"]["creationTimestamp"],
            int(e["metadata"]["resourceVersion"]),
        ),
    )


async def test_a_gpu_pod_is_bound_started_and_reported_ready(k8s_api, k8s_controls):
    k8s_controls.add_gpu_nodes(2, gpu_count=4)
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_pod("default", pod("trainer", gpus=2))
    current = await until(core, "trainer", running, "Running")
    status = current["status"]
    assert current["spec"]["nodeName"] in ("gpu-node-0", "gpu-node-1")
    assert status["podIP"].startswith("127.0.") and status["hostIP"].startswith("10.0.")
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "Ready": "True",
        "ContainersReady": "True",
        "PodScheduled": "True",
    }
    (container,) = status["containerStatuses"]
    assert container["ready"] and container["started"] and "running" in container["state"]
    assert container["containerID"].startswith("containerd://")
    events = await events_for(core, "trainer")
    assert [e["reason"] for e in events] == ["Scheduled", "Pulling", "Pulled", "Created", "Started"]
    scheduled, pulling, *_ = events
    assert (
        scheduled["message"]
        == f"Successfully assigned default/trainer to {current['spec']['nodeName']}"
    )
    assert (
        scheduled["reportingComponent"] == "default-scheduler"
        and scheduled["eventTime"]
        and scheduled["lastTimestamp"] is None
    )
    assert pulling["source"] == {"component": "kubelet", "host": current["spec"]["nodeName"]}
    assert pulling["involvedObject"]["fieldPath"] == "spec.containers{main}"
    assert pulling["message"] == 'Pulling image "python:3.12-slim"'


async def test_insufficient_gpus_fail_scheduling_in_the_real_schedulers_words(
    k8s_api, k8s_controls
):
    k8s_controls.add_gpu_nodes(3, gpu_count=1)
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_pod("default", pod("greedy", gpus=2))
    expected = (
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. "
        "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    )
    pending = await until(
        core, "greedy", lambda p: p["status"].get("conditions"), "PodScheduled=False"
    )
    assert pending["status"]["phase"] == "Pending"
    assert pending["status"]["conditions"][0] | {"lastTransitionTime": None} == {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": expected,
        "lastProbeTime": None,
        "lastTransitionTime": None,
    }
    (event,) = await wait_for(lambda: events_for(core, "greedy"), what="FailedScheduling")
    assert (event["type"], event["reason"], event["message"]) == (
        "Warning",
        "FailedScheduling",
        expected,
    )

    k8s_controls.add_node(gpu_node("big-node", gpu_count=8, address="10.0.9.1"))
    placed = await until(core, "greedy", running, "Running once a big node joins")
    assert placed["spec"]["nodeName"] == "big-node"


async def test_requests_are_counted_against_allocatable_until_pods_finish(k8s_api, k8s_controls):
    k8s_controls.add_node(gpu_node("only", gpu_count=2, cpu="4", memory="8Gi"))
    core = client.CoreV1Api(k8s_api)
    for name in ("first", "second"):
        await core.create_namespaced_pod("default", pod(name, gpus=1))
        await until(core, name, running, "Running")
    await core.create_namespaced_pod(
        "default", pod("third", gpus=1, resources={"requests": {"cpu": "8"}})
    )
    pending = await until(core, "third", lambda p: p["status"].get("conditions"), "unschedulable")
    assert pending["status"]["conditions"][0]["message"].startswith(
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient nvidia.com/gpu."
    )
    await core.create_namespaced_pod("default", pod("fourth", gpus=1))
    await core.delete_namespaced_pod("first", "default", grace_period_seconds=0)
    await until(core, "fourth", running, "Running after a GPU was freed")


async def test_node_selectors_taints_and_scheduler_names(k8s_api, k8s_controls):
    k8s_controls.add_node(
        gpu_node(
            "tainted",
            product="Tesla-T4",
            taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        )
    )
    k8s_controls.add_node(node("plain", address="10.0.8.1"))
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_pod("default", pod("intolerant", gpus=1))
    message = (
        await until(core, "intolerant", lambda p: p["status"].get("conditions"), "unschedulable")
    )["status"]["conditions"][0]["message"]
    assert message.startswith(
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint {nvidia.com/gpu: present}."
    )
    assert message.endswith(
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
    )

    tolerant = pod(
        "tolerant",
        gpus=1,
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    )
    await core.create_namespaced_pod("default", tolerant)
    assert (await until(core, "tolerant", running, "Running"))["spec"]["nodeName"] == "tainted"

    await core.create_namespaced_pod(
        "default",
        pod("wrong-model", nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
    )
    message = (
        await until(core, "wrong-model", lambda p: p["status"].get("conditions"), "unschedulable")
    )["status"]["conditions"][0]["message"]
    assert message.startswith(
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {nvidia.com/gpu: present}. preemption: "
    )

    await core.create_namespaced_pod("default", pod("for-hami", schedulerName="hami-scheduler"))
    assert (await read(core, "for-hami"))["status"] == {
        "phase": "Pending",
        "qosClass": "BestEffort",
    }
    k8s_controls.set_scheduler_names({"default-scheduler", "hami-scheduler"})
    assert (await until(core, "for-hami", running, "Running once hami-scheduler is served"))[
        "spec"
    ]["nodeName"] == "plain"
    assert await events_for(core, "for-hami")


async def test_an_unpullable_image_backs_off(k8s_api, k8s_controls):
    k8s_controls.add_gpu_nodes(1)
    k8s_controls.fail_image_pull("quay.io/example/typo:latest")
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_pod("default", pod("typo", image="quay.io/example/typo:latest"))
    stuck = await until(
        core,
        "typo",
        lambda p: "ImagePullBackOff" in json.dumps(p["status"].get("containerStatuses")),
        "ImagePullBackOff",
    )
    assert stuck["status"]["phase"] == "Pending"
    reasons = [(e["reason"], e["message"].split(":")[0]) for e in await events_for(core, "typo")]
    assert ("Failed", "Error") in reasons and (
        "BackOff",
        'Back-off pulling image "quay.io/example/typo',
    ) in reasons


@pytest.mark.parametrize(
    ("restart_policy", "phase", "restarts"),
    [("Never", "Failed", 0), ("OnFailure", "Running", 1), ("Always", "Running", 1)],
)
async def test_an_oom_kill_follows_the_restart_policy(
    k8s_api, k8s_controls, restart_policy, phase, restarts
):
    k8s_controls.add_gpu_nodes(1)
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_pod(
        "default",
        pod("hungry", restart_policy=restart_policy, resources={"limits": {"memory": "1Gi"}}),
    )
    await until(core, "hungry", running, "Running")
    k8s_controls.oom_kill("default", "hungry")
    after = await until(
        core,
        "hungry",
        lambda p: (
            p["status"]["phase"] == phase
            and p["status"]["containerStatuses"][0]["restartCount"] == restarts
            and (phase != "Running" or p["status"]["containerStatuses"][0]["ready"])
        ),
        f"{phase} with {restarts} restarts",
    )
    (container,) = after["status"]["containerStatuses"]
    terminated = (
        container["state"]["terminated"] if restarts == 0 else container["lastState"]["terminated"]
    )
    assert (terminated["exitCode"], terminated["reason"]) == (137, "OOMKilled")


@pytest.mark.parametrize(
    ("code", "phase", "reason"), [(0, "Succeeded", "Completed"), (3, "Failed", "Error")]
)
async def test_a_completed_container_ends_a_never_restarting_pod(
    k8s_api, k8s_controls, code, phase, reason
):
    k8s_controls.add_gpu_nodes(1)
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_pod("default", pod("batch", restart_policy="Never"))
    await until(core, "batch", running, "Running")
    k8s_controls.complete_container("default", "batch", exit_code=code)
    done = await until(core, "batch", lambda p: p["status"]["phase"] == phase, phase)
    terminated = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (code, reason)
    ready = next(c for c in done["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "PodCompleted")


async def test_a_bound_pod_terminates_gracefully_and_an_unbound_one_at_once(k8s_api, k8s_controls):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_pod("default", pod("unbound"))
    await core.delete_namespaced_pod("unbound", "default")
    with pytest.raises(client.ApiException):
        await core.read_namespaced_pod("unbound", "default")

    k8s_controls.add_gpu_nodes(1)
    await core.create_namespaced_pod("default", pod("server"))
    await until(core, "server", running, "Running")
    deleted = await core.delete_namespaced_pod("server", "default")
    assert (
        deleted.metadata.deletion_timestamp is not None
        and deleted.metadata.deletion_grace_period_seconds == 30
    )

    async def gone() -> bool:
        try:
            await core.read_namespaced_pod("server", "default")
        except client.ApiException as error:
            return error.status == 404
        return False

    await wait_for(gone, what="the kubelet to finish the graceful delete")
    assert "Killing" in [e["reason"] for e in await events_for(core, "server")]


async def test_pvcs_must_exist_and_become_bound_when_the_pod_is_scheduled(k8s_api, k8s_controls):
    k8s_controls.add_gpu_nodes(1)
    core = client.CoreV1Api(k8s_api)
    volume = [{"name": "home", "persistentVolumeClaim": {"claimName": "claim-alice"}}]
    await core.create_namespaced_pod("default", pod("alice", volumes=volume))
    message = (
        await until(core, "alice", lambda p: p["status"].get("conditions"), "unschedulable")
    )["status"]["conditions"][0]["message"]
    assert message.startswith(
        '0/1 nodes are available: persistentvolumeclaim "claim-alice" not found.'
    )
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    await core.create_namespaced_persistent_volume_claim(
        "default", {"metadata": {"name": "unused"}, "spec": spec}
    )
    await core.create_namespaced_persistent_volume_claim(
        "default", {"metadata": {"name": "claim-alice"}, "spec": spec}
    )
    await until(core, "alice", running, "Running once its claim exists")
    claim = await core.read_namespaced_persistent_volume_claim("claim-alice", "default")
    assert claim.status.phase == "Bound" and claim.status.capacity == {"storage": "10Gi"}
    unused = await core.read_namespaced_persistent_volume_claim("unused", "default")
    assert unused.status.phase == "Pending", "claims bind when their first consumer is scheduled"


async def test_the_process_runner_executes_the_container_command_with_its_env(
    k8s_api, k8s_controls, tmp_path
):
    k8s_controls.add_gpu_nodes(1)
    k8s_controls.run_processes(
        ProcessRunner(match=PodMatch(labels="run=process"), workdir=tmp_path)
    )
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_secret(
        "default", {"metadata": {"name": "creds"}, "stringData": {"token": "s3cret"}}
    )
    script = "import os, sys; print('hello from', os.environ['POD'], os.getcwd()); print('token', os.environ['TOKEN']); sys.exit(int(os.environ['CODE']))"
    manifest = pod(
        "real",
        labels={"run": "process"},
        command=[sys.executable, "-c", script],
        restart_policy="Never",
    )
    manifest["spec"]["containers"][0]["env"] = [
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
        {"name": "CODE", "value": "4"},
    ]
    await core.create_namespaced_pod("default", manifest)
    done = await until(
        core,
        "real",
        lambda p: p["status"]["phase"] == "Failed",
        "Failed with the process's exit code",
    )
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 4
    workdir = tmp_path / "default" / "real" / "main"
    assert (
        await core.read_namespaced_pod_log("real", "default")
        == f"hello from real {workdir}\ntoken s3cret\n"
    )


async def test_init_containers_run_before_the_main_containers(k8s_api, k8s_controls):
    k8s_controls.add_gpu_nodes(1)
    core = client.CoreV1Api(k8s_api)
    manifest = pod("with-init", initContainers=[{"name": "fetch", "image": "busybox"}])
    await core.create_namespaced_pod("default", manifest)
    current = await until(core, "with-init", running, "Running")
    (init,) = current["status"]["initContainerStatuses"]
    assert init["state"]["terminated"]["reason"] == "Completed"
    assert (
        next(c for c in current["status"]["conditions"] if c["type"] == "Initialized")["status"]
        == "True"
    )
