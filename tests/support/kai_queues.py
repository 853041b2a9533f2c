"""KAI-scheduler's queues as a cluster admin makes them, for scenarios on the test cluster's KAI.

What hub_config/kubernetes/README.md ("KAI-scheduler") tells admins to create: a parent
queue for the campus and, under it, a queue per course (KAI places no pod of a queue without
a parent), each with GPU, CPU and memory resources (KAI refuses a Queue without them). Made
through ``k8s_api``, the admin's client; the cluster's clean-up removes them after each test.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

GROUP, VERSION = "scheduling.run.ai", "v2"
CAMPUS = "campus"

Object = dict[str, Any]


def kai_queue(name: str, *, parent: str | None = None, gpus: float = -1) -> Object:
    """A KAI queue whose GPU quota and limit are ``gpus`` GPUs (-1: no limit; a quarter of
    a GPU counts 0.25); CPU and memory unlimited."""
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    spec: Object = {
        "resources": {
            "gpu": {"quota": gpus, "limit": gpus, "overQuotaWeight": 1},
            "cpu": unlimited,
            "memory": unlimited,
        }
    }
    if parent:
        spec["parentQueue"] = parent
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


async def make_course_queue(admin: client.ApiClient, course_queue: str, gpus: float = -1) -> None:
    """The campus queue and, under it, ``course_queue`` with ``gpus`` GPUs of quota and
    limit (-1: no limit)."""
    custom = client.CustomObjectsApi(admin)
    for manifest in (kai_queue(CAMPUS), kai_queue(course_queue, parent=CAMPUS, gpus=gpus)):
        await custom.create_cluster_custom_object(GROUP, VERSION, "queues", manifest)
