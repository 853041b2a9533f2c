"""One pure function applies what a grant renders to a pod: servers' and jobs' pods alike."""

from __future__ import annotations

import copy

from gpuspawner.backends import PodGPUPlan
from gpuspawner.core.pod_plan import apply_pod_plan


def server_pod() -> dict:
    """A pod as KubeSpawner makes it from an admin's settings (trimmed to what matters)."""
    return {
        "metadata": {
            "name": "jupyter-ana",
            "labels": {"component": "singleuser-server", "hub.jupyter.org/username": "ana"},
            "annotations": {"hub.jupyter.org/username": "ana"},
        },
        "spec": {
            "containers": [
                {
                    "name": "notebook",
                    "image": "jupyter/base:1",
                    "env": [
                        {"name": "JUPYTERHUB_API_TOKEN", "value": "secret"},
                        {"name": "CUDA_VISIBLE_DEVICES", "value": "0,1,2,3"},
                        {"name": "LANG", "value": "C.UTF-8"},
                    ],
                    "resources": {"limits": {"cpu": 4.0}, "requests": {"cpu": 0.5}},
                    "volumeMounts": [{"name": "home", "mountPath": "/home/jovyan"}],
                }
            ],
            "volumes": [{"name": "home", "emptyDir": {}}],
            "tolerations": [{"key": "hub.jupyter.org/dedicated", "operator": "Exists"}],
        },
    }


QUARTER_ON_HAMI = PodGPUPlan(
    resource_limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10240"},
    annotations={"nvidia.com/use-gputype": "A100"},
    labels={"hami.io/share": "quarter"},
    node_selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
    tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    scheduler_name="hami-scheduler",
    environment={"CUDA_DEVICE_MEMORY_LIMIT": "10240m"},
)


def test_a_quarter_gpu_grant_on_a_server_pod_gives_exactly_its_parts():
    # Given the admin's server pod and a grant of a quarter A100 on node gpu-node-0
    pod = server_pod()

    # When the grant's plan is applied with its node, limits, variables, labels and volume
    applied = apply_pod_plan(
        pod,
        QUARTER_ON_HAMI,
        node_name="gpu-node-0",
        limits={"cpu": 2.0, "memory": 8589934592},
        requests={"cpu": 0.5},
        environment={"COURSE_DATA": "/data/ml101"},
        labels={"gpuspawner.campus-gpu-hub.org/profile": "ml101"},
        annotations={"gpuspawner.campus-gpu-hub.org/allocation": '{"key": "server:ana/"}'},
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "ml101"}}],
        volume_mounts=[{"name": "data", "mountPath": "/data/ml101"}],
        image="ml101/pytorch:2",
        # the server's rule: the admin's variables that enforce a share go, the hub's stay
        keep_variable=lambda name: name != "CUDA_VISIBLE_DEVICES",
    )

    # Then the pod is the admin's with the grant's share, node and variables laid over it;
    # the user-visible GPU list the admin's settings carried goes, the hub's token stays
    assert applied is pod
    assert pod == {
        "metadata": {
            "name": "jupyter-ana",
            "labels": {
                "component": "singleuser-server",
                "hub.jupyter.org/username": "ana",
                "hami.io/share": "quarter",
                "gpuspawner.campus-gpu-hub.org/profile": "ml101",
            },
            "annotations": {
                "hub.jupyter.org/username": "ana",
                "nvidia.com/use-gputype": "A100",
                "gpuspawner.campus-gpu-hub.org/allocation": '{"key": "server:ana/"}',
            },
        },
        "spec": {
            "containers": [
                {
                    "name": "notebook",
                    "image": "ml101/pytorch:2",
                    "env": [
                        {"name": "JUPYTERHUB_API_TOKEN", "value": "secret"},
                        {"name": "LANG", "value": "C.UTF-8"},
                        {"name": "CUDA_DEVICE_MEMORY_LIMIT", "value": "10240m"},
                        {"name": "COURSE_DATA", "value": "/data/ml101"},
                    ],
                    "resources": {
                        "limits": {
                            "cpu": 2.0,
                            "memory": 8589934592,
                            "nvidia.com/gpu": "1",
                            "nvidia.com/gpumem": "10240",
                        },
                        "requests": {"cpu": 0.5},
                    },
                    "volumeMounts": [
                        {"name": "home", "mountPath": "/home/jovyan"},
                        {"name": "data", "mountPath": "/data/ml101"},
                    ],
                }
            ],
            "volumes": [
                {"name": "home", "emptyDir": {}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "ml101"}},
            ],
            "tolerations": [
                {"key": "hub.jupyter.org/dedicated", "operator": "Exists"},
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            ],
            "nodeSelector": {
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                "kubernetes.io/hostname": "gpu-node-0",
            },
            "schedulerName": "hami-scheduler",
        },
    }


def test_a_dra_plan_brings_its_claims_and_runtime_class():
    # Given a DRA plan with a claim template, its pod claim and the container's claim
    plan = PodGPUPlan(
        runtime_class_name="nvidia",
        pod_resource_claims=[{"name": "gpu", "resourceClaimTemplateName": "jupyter-ana-gpu"}],
        container_claims=[{"name": "gpu"}],
    )
    pod = server_pod()

    # When it is applied
    apply_pod_plan(pod, plan)

    # Then the pod and its container name the claim, and run under the plan's runtime class
    assert pod["spec"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": "jupyter-ana-gpu"}
    ]
    assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]
    assert pod["spec"]["runtimeClassName"] == "nvidia"
    assert "nodeSelector" not in pod["spec"] and "schedulerName" not in pod["spec"]


def test_the_caller_says_which_of_the_pods_own_variables_may_stay():
    # Given a pod whose admin set CUDA_VISIBLE_DEVICES, kept by a rule that keeps everything
    pod = server_pod()

    # When the plan is applied with that rule
    apply_pod_plan(pod, PodGPUPlan(), keep_variable=lambda name: True)

    # Then the variable stays; by default (the job's rule) it would have gone
    names = [variable["name"] for variable in pod["spec"]["containers"][0]["env"]]
    assert "CUDA_VISIBLE_DEVICES" in names
    default = apply_pod_plan(server_pod(), PodGPUPlan())
    assert "CUDA_VISIBLE_DEVICES" not in [
        v["name"] for v in default["spec"]["containers"][0]["env"]
    ]


def test_an_empty_plan_leaves_a_pod_without_enforcing_variables_as_it_was():
    # Given a pod with no variable that enforces a GPU share
    pod = server_pod()
    pod["spec"]["containers"][0]["env"] = [{"name": "LANG", "value": "C.UTF-8"}]
    before = copy.deepcopy(pod)

    # When an empty plan is applied
    apply_pod_plan(pod, PodGPUPlan())

    # Then nothing changed
    assert pod == before
