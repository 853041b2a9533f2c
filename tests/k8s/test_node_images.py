"""Scenarios: the test cluster's node runs the project's images as a cluster's nodes would.

The chart deployment (issue 25) rests on these: a Deployment's pod runs its image's
command as written, with a ConfigMap mounted at its absolute path, its service account's
token where in-cluster clients look for it, ready when its readiness probe answers, and
the namespace's Services reachable by name and port, as kube-proxy and the cluster's DNS
provide them.
"""

from __future__ import annotations

import json
import os
import urllib.request

import pytest
from kubernetes_asyncio import client

from ..support.cluster.images import ImageRunner
from ..support.k8s_cluster import wait_for

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the node mounts a pod's volumes in a mount namespace: needs root"
)

IMAGE = "registry.test/campus-gpu-hub/hub:0.1.0"
USER_IMAGE = "registry.test/campus-gpu-hub/user:0.1.0"


@pytest.fixture
def images(k8s_controls) -> ImageRunner:
    k8s_controls.add_gpu_nodes(1)
    return k8s_controls.run_images()


def web_objects() -> list[dict]:
    labels = {"app": "web"}
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "web"},
            "data": {"index.html": "hello from a ConfigMap\n"},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [
                            {
                                "name": "web",
                                "image": IMAGE,
                                "command": ["python", "-m", "http.server", "8080"],
                                "args": ["--directory", "/srv/web"],
                                "ports": [{"name": "http", "containerPort": 8080}],
                                "readinessProbe": {"httpGet": {"path": "/", "port": "http"}},
                                "volumeMounts": [{"name": "web", "mountPath": "/srv/web"}],
                            }
                        ],
                        "volumes": [{"name": "web", "configMap": {"name": "web"}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": "http"}]},
        },
    ]


async def test_a_deployment_serves_a_configmap_through_its_service(k8s_api, k8s_controls, images):
    apps, core = client.AppsV1Api(k8s_api), client.CoreV1Api(k8s_api)
    configmap, deployment, service = web_objects()
    await core.create_namespaced_config_map("default", configmap)
    await core.create_namespaced_service("default", service)
    await apps.create_namespaced_deployment("default", deployment)

    async def ready() -> bool:
        found = await apps.read_namespaced_deployment("web", "default")
        return bool(found.status.ready_replicas)

    await wait_for(ready, timeout=60, what="the web Deployment to be ready")
    cluster_ip = (await core.read_namespaced_service("web", "default")).spec.cluster_ip
    address = k8s_controls.agent.services.address(cluster_ip)

    # Reached through the Service's own port, which forwards to the pod's named port
    with urllib.request.urlopen(f"http://{address}:80/index.html", timeout=10) as answer:
        assert answer.read() == b"hello from a ConfigMap\n"


async def test_a_pod_finds_services_by_name_and_its_token_where_clients_look(k8s_api, images):
    apps, core = client.AppsV1Api(k8s_api), client.CoreV1Api(k8s_api)
    configmap, deployment, service = web_objects()
    await core.create_namespaced_config_map("default", configmap)
    await core.create_namespaced_service("default", service)
    await apps.create_namespaced_deployment("default", deployment)
    probe = (
        "import json, os, urllib.request\n"
        "token = '/var/run/secrets/kubernetes.io/serviceaccount'\n"
        "print(json.dumps({\n"
        "  'page': urllib.request.urlopen('http://web/index.html', timeout=10).read().decode(),\n"
        "  'port': os.environ.get('WEB_SERVICE_PORT'),\n"
        "  'namespace': open(token + '/namespace').read(),\n"
        "  'has_token': bool(open(token + '/token').read()),\n"
        "}))\n"
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "client"},
        "spec": {
            "restartPolicy": "OnFailure",
            "containers": [
                {"name": "probe", "image": USER_IMAGE, "command": ["python", "-c", probe]}
            ],
        },
    }

    async def web_ready() -> bool:
        return bool((await apps.read_namespaced_deployment("web", "default")).status.ready_replicas)

    await wait_for(web_ready, timeout=60, what="the web Deployment to be ready")
    await core.create_namespaced_pod("default", pod)

    async def done() -> bool:
        found = await core.read_namespaced_pod("client", "default")
        return found.status.phase in ("Succeeded", "Failed")

    await wait_for(done, timeout=60, what="the probe pod to end")
    answer = await core.read_namespaced_pod_log("client", "default", _preload_content=False)
    log = (await answer.read()).decode()
    seen = json.loads(log.strip().splitlines()[-1])

    assert seen == {
        "page": "hello from a ConfigMap\n",
        "port": "80",
        "namespace": "default",
        "has_token": True,
    }


async def test_a_claim_of_the_test_storage_class_is_provisioned_and_outlives_its_pod(
    k8s_api, images
):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_persistent_volume_claim(
        "default",
        {
            "metadata": {"name": "notes"},
            "spec": {
                "storageClassName": "campus-test-local",
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )

    def writer(name: str, command: str) -> dict:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": USER_IMAGE,
                        "command": ["sh", "-c", command],
                        "volumeMounts": [{"name": "notes", "mountPath": "/home/jovyan/notes"}],
                    }
                ],
                "volumes": [{"name": "notes", "persistentVolumeClaim": {"claimName": "notes"}}],
            },
        }

    async def ended(name: str) -> bool:
        return (await core.read_namespaced_pod(name, "default")).status.phase == "Succeeded"

    await core.create_namespaced_pod("default", writer("first", "echo kept > notes/a.txt"))
    await wait_for(lambda: ended("first"), timeout=60, what="the first pod to write")
    await core.create_namespaced_pod("default", writer("second", "cat notes/a.txt"))
    await wait_for(lambda: ended("second"), timeout=60, what="the second pod to read")

    claim = await core.read_namespaced_persistent_volume_claim("notes", "default")
    answer = await core.read_namespaced_pod_log("second", "default", _preload_content=False)
    assert claim.status.phase == "Bound"
    assert (await answer.read()).decode() == "kept\n"
