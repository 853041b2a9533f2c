"""The Kubernetes objects of a job, compared with literal manifests (KubeSpawner's test_objects style)."""

from __future__ import annotations

import kubernetes_validate
import pytest
from kubespawner.slugs import safe_slug as kubespawners

from gpuspawner.backends import cpu_only_plan, make_backend
from gpuspawner.policy.catalog_models import JobFlavor
from jupyter_to_job.executors.pod_status import disruption
from jupyter_to_job.k8s_objects import (
    JobFilesTooLarge,
    PodCheckpoint,
    PodUser,
    UserFiles,
    job_object_name,
    kubespawner_safe_slug,
    make_configmap,
    make_job,
    make_upload_secret,
    notebook_folder,
    safe_slug,
    user_volume_names,
)

JOB_ID = "3f2a1b4c-0000-4000-8000-000000000001"
NAME = f"j2j-{JOB_ID}"
A100 = "NVIDIA A100-SXM4-80GB"

RUNNER = [
    "python",
    "-m",
    "jupyter_to_job.runner",
    "--job-dir",
    "/job",
    "--log-file",
    "/dev/stdout",
    "--termination-log",
    "/dev/termination-log",
]
POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "runAsGroup": 100,
    "fsGroup": 100,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
MOUNTS = [
    {"name": "job", "mountPath": "/job"},
    {"name": "job-files", "mountPath": "/job/job.json", "subPath": "job.json", "readOnly": True},
    {
        "name": "job-files",
        "mountPath": "/job/input.ipynb",
        "subPath": "input.ipynb",
        "readOnly": True,
    },
    {"name": "dshm", "mountPath": "/dev/shm"},
]
VOLUMES = [
    {"name": "job", "emptyDir": {}},
    {"name": "job-files", "configMap": {"name": NAME, "defaultMode": 0o444}},
    {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
]


def flavor(**fields) -> JobFlavor:  # type: ignore[no-untyped-def]
    return JobFlavor.model_validate({"title": fields["id"], **fields})


def test_a_quarter_gpu_job_under_hami_is_this_manifest() -> None:
    # Given a flavor with 1/4 of an A100, 2 CPUs and 8 GiB, on a HAMi cluster
    quarter = flavor(
        id="a100-quarter",
        gpu={"fraction": "1/4", "model": ["A100"]},
        resources={"cpu": 2, "memory": "8G"},
        environment={"image": "registry.example.edu/ml101:2025", "variables": {"HF_HOME": "/h"}},
    )
    assert quarter.share is not None
    plan = make_backend("hami").render(
        quarter.share, gpu_model=A100, gpu_memory_mib=81920, name=f"{NAME}-gpu"
    )

    # When the job's Job is built (the user's environment tries to undo the GPU limits)
    job = make_job(
        job_id=JOB_ID,
        owner="Alice.Smith@uni.edu",
        image="registry.example.edu/ml101:2025",
        plan=plan,
        flavor="a100-quarter",
        cpu=2,
        memory_bytes=8 * 1024**3,
        deadline_seconds=3600,
        environment={"HF_HOME": "/h", "CUDA_DISABLE_CONTROL": "true", "LD_PRELOAD": ""},
        allocation={"key": f"job:{JOB_ID}", "device_ids": ["gpu-node-0/1"], "fraction": "1/4"},
        namespace="jobs",
        node_name="gpu-node-0",
    )

    # Then it is exactly this: no TTL yet, HAMi's resources and scheduler, protected
    # variables gone, the allocation recorded
    labels = {
        "app.kubernetes.io/managed-by": "jupyter-to-job",
        "app.kubernetes.io/component": "notebook-job",
        "hub.jupyter.org/username": "alice-smith-uni-edu---d356c58b",
        "jupyter-to-job/job-id": JOB_ID,
    }
    annotations = {
        "hub.jupyter.org/username": "Alice.Smith@uni.edu",
        "jupyter-to-job/job-id": JOB_ID,
        "jupyter-to-job/flavor": "a100-quarter",
        "gpuspawner.campus-gpu-hub.org/allocation": (
            '{"device_ids":["gpu-node-0/1"],"fraction":"1/4","key":"job:' + JOB_ID + '"}'
        ),
    }
    assert job == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": NAME,
            "namespace": "jobs",
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": 3600,
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {
                        "hami.io/gpu-scheduler-policy": "binpack",
                        "nvidia.com/use-gputype": A100,
                        **annotations,
                    },
                },
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 30,
                    "securityContext": POD_SECURITY,
                    "schedulerName": "hami-scheduler",
                    "nodeSelector": {"kubernetes.io/hostname": "gpu-node-0"},
                    "containers": [
                        {
                            "name": "notebook",
                            "image": "registry.example.edu/ml101:2025",
                            "command": RUNNER,
                            "workingDir": "/job",
                            "env": [
                                {"name": "GPUSPAWNER_GPU_FRACTION", "value": "1/4"},
                                {"name": "GPUSPAWNER_GPU_MEMORY_MIB", "value": "20480"},
                                {
                                    "name": "GPUSPAWNER_GPU_SHARE",
                                    "value": "1/4 of an NVIDIA A100-SXM4-80GB, 20 GiB",
                                },
                                {"name": "GPUSPAWNER_PROFILE", "value": "a100-quarter"},
                                {"name": "HF_HOME", "value": "/h"},
                                {"name": "JUPYTER_TO_JOB_ID", "value": JOB_ID},
                                {"name": "PYTHONUNBUFFERED", "value": "1"},
                            ],
                            "resources": {
                                "limits": {
                                    "cpu": "2",
                                    "memory": "8Gi",
                                    "nvidia.com/gpu": "1",
                                    "nvidia.com/gpumem": "20480",
                                    "nvidia.com/gpucores": "25",
                                },
                                "requests": {"cpu": "2", "memory": "8Gi"},
                            },
                            "securityContext": CONTAINER_SECURITY,
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "FallbackToLogsOnError",
                            "volumeMounts": MOUNTS,
                        }
                    ],
                    "volumes": VOLUMES,
                },
            },
        },
    }


def test_a_whole_gpu_job_in_a_kueue_queue_is_this_manifest() -> None:
    # Given a whole-GPU flavor on a cluster without sharing, whose jobs go through Kueue
    whole = flavor(id="a100-whole", gpu={"count": 1})
    assert whole.share is not None
    plan = make_backend("whole").render(
        whole.share, gpu_model=A100, gpu_memory_mib=81920, name=f"{NAME}-gpu"
    )

    # When the job's Job is built
    job = make_job(
        job_id=JOB_ID,
        owner="bob",
        image="registry.example.edu/jobs:2025",
        plan=plan,
        flavor="a100-whole",
        cpu=0.5,
        memory_bytes=3 * 1024**3 // 2,
        deadline_seconds=600,
        queue_name="ml101",
        service_account="notebook-jobs",
        termination_grace_seconds=10,
        backoff_limit=1,
    )

    # Then it is exactly this: created suspended for Kueue, one whole GPU on A100 nodes
    labels = {
        "app.kubernetes.io/managed-by": "jupyter-to-job",
        "app.kubernetes.io/component": "notebook-job",
        "hub.jupyter.org/username": "bob",
        "jupyter-to-job/job-id": JOB_ID,
    }
    annotations = {
        "hub.jupyter.org/username": "bob",
        "jupyter-to-job/job-id": JOB_ID,
        "jupyter-to-job/flavor": "a100-whole",
    }
    assert job == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": NAME,
            "labels": {**labels, "kueue.x-k8s.io/queue-name": "ml101"},
            "annotations": annotations,
        },
        "spec": {
            "backoffLimit": 1,
            "suspend": True,
            "activeDeadlineSeconds": 600,
            "template": {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "serviceAccountName": "notebook-jobs",
                    "terminationGracePeriodSeconds": 10,
                    "securityContext": POD_SECURITY,
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
                    "containers": [
                        {
                            "name": "notebook",
                            "image": "registry.example.edu/jobs:2025",
                            "command": RUNNER,
                            "workingDir": "/job",
                            "env": [
                                {"name": "GPUSPAWNER_GPU_FRACTION", "value": "1/1"},
                                {"name": "GPUSPAWNER_GPU_MEMORY_MIB", "value": "81920"},
                                {
                                    "name": "GPUSPAWNER_GPU_SHARE",
                                    "value": "1 whole NVIDIA A100-SXM4-80GB, 80 GiB",
                                },
                                {"name": "GPUSPAWNER_PROFILE", "value": "a100-whole"},
                                {"name": "JUPYTER_TO_JOB_ID", "value": JOB_ID},
                                {"name": "PYTHONUNBUFFERED", "value": "1"},
                            ],
                            "resources": {
                                "limits": {
                                    "cpu": "500m",
                                    "memory": "1536Mi",
                                    "nvidia.com/gpu": "1",
                                },
                                "requests": {"cpu": "500m", "memory": "1536Mi"},
                            },
                            "securityContext": CONTAINER_SECURITY,
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "FallbackToLogsOnError",
                            "volumeMounts": MOUNTS,
                        }
                    ],
                    "volumes": VOLUMES,
                },
            },
        },
    }


def test_a_job_without_gpu_sees_no_gpu() -> None:
    job = make_job(job_id=JOB_ID, owner="carol", image="jobs:1", plan=cpu_only_plan())

    container = job["spec"]["template"]["spec"]["containers"][0]
    assert {e["name"]: e["value"] for e in container["env"]} == {
        "CUDA_VISIBLE_DEVICES": "",
        "NVIDIA_VISIBLE_DEVICES": "void",
        "GPUSPAWNER_GPU_SHARE": "No GPU",
        "JUPYTER_TO_JOB_ID": JOB_ID,
        "PYTHONUNBUFFERED": "1",
    }
    assert "resources" not in job["spec"]["template"]["spec"] and container["resources"] == {}
    assert "activeDeadlineSeconds" not in job["spec"]
    assert "ttlSecondsAfterFinished" not in job["spec"]


def test_the_configmap_carries_the_notebook_and_its_instructions() -> None:
    configmap = make_configmap(
        job_id=JOB_ID, owner="bob", notebook=b'{"cells": []}', spec='{"job_id": "x"}'
    )

    assert configmap == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": NAME,
            "labels": {
                "app.kubernetes.io/managed-by": "jupyter-to-job",
                "app.kubernetes.io/component": "notebook-job",
                "hub.jupyter.org/username": "bob",
                "jupyter-to-job/job-id": JOB_ID,
            },
            "annotations": {"jupyter-to-job/job-id": JOB_ID, "hub.jupyter.org/username": "bob"},
        },
        "data": {"job.json": '{"job_id": "x"}', "input.ipynb": '{"cells": []}'},
    }


def test_a_notebook_too_large_for_a_configmap_is_refused_with_what_to_do() -> None:
    with pytest.raises(JobFilesTooLarge) as refusal:
        make_configmap(job_id=JOB_ID, owner="bob", notebook=b"x" * 2_000_000, spec="{}")

    assert "1.9 MiB" in refusal.value.message and "at most 900 KiB" in refusal.value.message
    assert "Clear the outputs" in refusal.value.message and "ReadWriteMany" in refusal.value.message


def test_names_are_dns_safe_and_distinct() -> None:
    assert job_object_name(JOB_ID) == NAME
    odd = job_object_name("Job_With_Upper_And_A_Very_Long_Identifier_Beyond_Limits_0123456789")
    assert len(odd) <= 52 and odd.startswith("j2j-job-with-upper") and odd.islower()
    assert safe_slug("Alice") != safe_slug("alice") == "alice"


def test_a_job_in_the_users_home_runs_as_them_and_sends_its_outputs_back() -> None:
    home = {"name": "home", "persistentVolumeClaim": {"claimName": "claim-rhea"}}
    job = make_job(
        job_id=JOB_ID,
        owner="rhea",
        image="jobs:1",
        plan=cpu_only_plan(),
        user=PodUser(uid=20417, gid=20000, fs_gid=20000),
        files=UserFiles(
            volumes=(home,),
            mounts=({"name": "home", "mountPath": "/home/jovyan"},),
            root="/home/jovyan",
            notebook_folder="project",
        ),
        upload_url=f"http://hub:8181/services/jupyter-to-job/api/jobs/{JOB_ID}/uploads/",
    )

    pod = job["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 20417,
        "runAsGroup": 20000,
        "fsGroup": 20000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["automountServiceAccountToken"] is False
    assert pod["volumes"] == [
        *VOLUMES,
        home,
        {"name": "upload-token", "secret": {"secretName": f"{NAME}-upload", "defaultMode": 0o440}},
    ]
    [container] = pod["containers"]
    assert container["workingDir"] == "/home/jovyan"
    assert container["command"] == [
        *RUNNER,
        "--upload-url",
        f"http://hub:8181/services/jupyter-to-job/api/jobs/{JOB_ID}/uploads/",
        "--upload-token-file",
        "/var/run/secrets/jupyter-to-job/upload-token",
    ]
    assert container["volumeMounts"] == [
        *MOUNTS,
        {"name": "home", "mountPath": "/home/jovyan"},
        {"name": "upload-token", "mountPath": "/var/run/secrets/jupyter-to-job", "readOnly": True},
    ]
    assert not any("token" in e["name"].lower() for e in container["env"])


def test_the_upload_token_travels_in_a_secret_of_the_job() -> None:
    assert make_upload_secret(job_id=JOB_ID, owner="rhea", token="s3cret", namespace="hub") == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"{NAME}-upload",
            "namespace": "hub",
            "labels": {
                "app.kubernetes.io/managed-by": "jupyter-to-job",
                "app.kubernetes.io/component": "notebook-job",
                "hub.jupyter.org/username": "rhea",
                "jupyter-to-job/job-id": JOB_ID,
            },
            "annotations": {"jupyter-to-job/job-id": JOB_ID, "hub.jupyter.org/username": "rhea"},
        },
        "type": "Opaque",
        "stringData": {"upload-token": "s3cret"},
    }


@pytest.mark.parametrize(
    "username",
    [
        "rhea",
        "Alice",
        "1student",
        "s1234567",
        "alice@campus.edu",
        "a--b",
        "-x-",
        "ünïcödé",
        "x" * 48,
        "x" * 49,
        "someone.with.a.very.long.name.at.a.very.long.campus.domain.example.edu",
    ],
)
def test_the_home_claim_is_named_as_kubespawner_names_it(username: str) -> None:
    assert kubespawner_safe_slug(username) == kubespawners(username, max_length=48)
    assert user_volume_names("claim-{username}", username) == "claim-" + kubespawners(
        username, max_length=48
    )


def test_the_notebooks_folder_stays_inside_the_servers_root() -> None:
    assert notebook_folder("train.ipynb") == "."
    assert notebook_folder("project/week 3/train.ipynb") == "project/week 3"
    assert notebook_folder("../elsewhere/train.ipynb") == "."
    assert notebook_folder("/etc/train.ipynb") == "."


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("PreemptionByScheduler", "the cluster gave its place to a pod of higher priority"),
        ("EvictionByEvictionAPI", "its pod was evicted (its node was drained, or an admin"),
        ("DeletionByPodGC", "its node is gone"),
        ("StoppedByKueue", "the cluster's job queue (Kueue) took its place back"),
        ("SomethingNew", "the cluster took its pod away (SomethingNew: node on fire)"),
    ],
)
def test_a_pod_marked_for_disruption_says_why(reason: str, expected: str) -> None:
    pod = {
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True"},
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": reason,
                    "message": "node on fire.",
                },
            ]
        }
    }
    if reason == "StoppedByKueue":  # Kueue marks the pods it stops with its own condition
        pod["status"]["conditions"][1]["type"] = "TerminationTarget"
    found = disruption(pod)
    assert found is not None and found[0] == reason and found[1].startswith(expected)
    assert disruption({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}) is None


def test_a_job_with_a_checkpoint_is_started_again_by_the_cluster_when_disrupted() -> None:
    # Given a job with a checkpoint folder in its owner's home and two retries
    home = {"name": "home", "persistentVolumeClaim": {"claimName": "claim-rhea"}}
    job = make_job(
        job_id=JOB_ID,
        owner="rhea",
        image="jobs:1",
        plan=cpu_only_plan(),
        backoff_limit=0,
        files=UserFiles(
            volumes=(home,),
            mounts=({"name": "home", "mountPath": "/home/jovyan"},),
            root="/home/jovyan",
            notebook_folder="project",
        ),
        checkpoint=PodCheckpoint(path="/home/jovyan/project/checkpoints/train", retries=2),
    )

    # Then the Job counts disruptions toward its retries, and fails at once by itself
    spec = job["spec"]
    assert spec["backoffLimit"] == 2
    assert spec["podReplacementPolicy"] == "Failed"
    assert spec["podFailurePolicy"] == {
        "rules": [
            {
                "action": "Count",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
            },
            {
                "action": "FailJob",
                "onExitCodes": {"containerName": "notebook", "operator": "NotIn", "values": [0]},
            },
        ]
    }
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    # and the runner finds its checkpoint folder on the home volume
    [container] = spec["template"]["spec"]["containers"]
    assert container["command"] == [
        *RUNNER,
        "--checkpoint-dir",
        "/home/jovyan/project/checkpoints/train",
    ]
    # and the manifest is valid Kubernetes, for every release the hub supports
    for version in ("1.32", "1.33", "1.34"):
        kubernetes_validate.validate(job, version, strict=True)


def test_a_job_without_a_checkpoint_has_no_pod_failure_policy() -> None:
    job = make_job(job_id=JOB_ID, owner="rhea", image="jobs:1", plan=cpu_only_plan())
    assert "podFailurePolicy" not in job["spec"] and "podReplacementPolicy" not in job["spec"]
    assert job["spec"]["backoffLimit"] == 0
