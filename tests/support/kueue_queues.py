"""Kueue's queues as a cluster admin makes them, for scenarios on the test cluster's Kueue.

What hub_config/kubernetes/README.md ("Kueue") tells admins to create: a ResourceFlavor, a
ClusterQueue whose quota covers every resource the pods ask for (CPU and memory too: Kueue
admits nothing that asks for a resource its ClusterQueue does not cover), and a LocalQueue
in the users' namespace for each queue name the hub or the job service is given. Made
through ``k8s_api``, the admin's client; the cluster's clean-up removes them after each test.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from kubernetes_asyncio import client

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
API_VERSION = f"{GROUP}/{VERSION}"
FLAVOR = "campus-gpus"
# As much CPU and memory as the nodes could ever hold: the GPUs are the quota that counts.
UNLIMITED = {"cpu": "1000", "memory": "10Ti"}

Object = dict[str, Any]


def cluster_queue(
    name: str,
    gpus: int,
    *,
    strategy: str = "StrictFIFO",
    preemption: dict[str, str] | None = None,
) -> Object:
    """A ClusterQueue for every namespace with ``gpus`` of ``nvidia.com/gpu`` (a GPU shared
    four ways by time-slicing counts four), first come first served by default."""
    spec: Object = {
        "namespaceSelector": {},
        "queueingStrategy": strategy,
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": FLAVOR,
                        "resources": [
                            {"name": "cpu", "nominalQuota": UNLIMITED["cpu"]},
                            {"name": "memory", "nominalQuota": UNLIMITED["memory"]},
                            {"name": "nvidia.com/gpu", "nominalQuota": str(gpus)},
                        ],
                    }
                ],
            }
        ],
    }
    if preemption:
        spec["preemption"] = preemption
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


async def make_queues(
    admin: client.ApiClient,
    queue: Object,
    local_queues: Iterable[str],
    namespace: str = "default",
) -> None:
    """The flavor, ClusterQueue ``queue`` and its LocalQueues in ``namespace``."""
    custom = client.CustomObjectsApi(admin)
    try:
        await custom.create_cluster_custom_object(
            GROUP,
            VERSION,
            "resourceflavors",
            {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
        )
    except client.ApiException as error:
        if error.status != 409:
            raise
    await custom.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", queue)
    for name in local_queues:
        await custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            "localqueues",
            {
                "apiVersion": API_VERSION,
                "kind": "LocalQueue",
                "metadata": {"name": name},
                "spec": {"clusterQueue": queue["metadata"]["name"]},
            },
        )


async def set_gpu_quota(admin: client.ApiClient, name: str, gpus: int) -> None:
    """Change ClusterQueue ``name``'s GPU quota, as an admin edits it."""
    custom = client.CustomObjectsApi(admin)
    queue = await custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", name)
    for group in queue["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for resource in flavor["resources"]:
                if resource["name"] == "nvidia.com/gpu":
                    resource["nominalQuota"] = str(gpus)
    await custom.replace_cluster_custom_object(GROUP, VERSION, "clusterqueues", name, queue)


async def workloads(admin: client.ApiClient, namespace: str = "default") -> list[Object]:
    """The namespace's Workloads, as the API server has them now."""
    response = await client.CustomObjectsApi(admin).list_namespaced_custom_object(
        GROUP, VERSION, namespace, "workloads", _preload_content=False
    )
    return list(json.loads(await response.read())["items"])


async def workload_of(
    admin: client.ApiClient, owner_uid: str, namespace: str = "default"
) -> Object | None:
    """The Workload Kueue made for the pod or Job ``owner_uid``, or None."""
    for workload in await workloads(admin, namespace):
        owners = workload["metadata"].get("ownerReferences") or []
        if any(owner.get("uid") == owner_uid for owner in owners):
            return workload
    return None


def condition(obj: Object, kind: str) -> Object | None:
    """``obj``'s condition of type ``kind`` when it is True, else None."""
    for found in (obj.get("status") or {}).get("conditions") or []:
        if found.get("type") == kind and found.get("status") == "True":
            return found
    return None
