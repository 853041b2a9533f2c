"""Kubernetes objects of a job on several nodes: an Indexed Job and its headless Service.

:func:`on_several_nodes` turns the one-pod Job of :func:`.k8s_objects.make_job` into an
Indexed Job of one pod per node; :func:`make_rank_service` names its pods. Both are pure,
compared with literal manifests in tests/unit/test_multinode_manifests.py. Why this shape
(ranks, rendezvous, failure, outputs): docs/kubernetes-executor.md, "Jobs on several nodes".
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .k8s_objects import (
    CONTAINER_NAME,
    JOB_ID_LABEL,
    JOB_NAME_LABEL,
    NODE_LABEL,
    job_id_label,
    job_object_name,
    job_part_metadata,
)

COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
"""Where the Job controller writes a pod's index; its ``JOB_COMPLETION_INDEX`` too."""
RENDEZVOUS_PORT = 29500
"""``MASTER_PORT``: torch.distributed's usual port, on rank 0's pod."""
RANK_VARIABLES = ("RANK", "NODE_RANK")
"""Set to the pod's completion index."""


def rendezvous_address(job_name: str) -> str:
    """``MASTER_ADDR``: rank 0's stable name, ``<job>-0.<service>`` (the Job controller
    gives an Indexed Job's pod the hostname ``<job>-<index>``, and the Service, named as
    the Job, is the pods' subdomain)."""
    return f"{job_name}-0.{job_name}"


def make_rank_service(
    *, job_id: str, owner: str, run: int = 0, namespace: str | None = None
) -> dict[str, Any]:
    """The headless Service that gives the pods of the job's Job of ``run`` their names.

    ``publishNotReadyAddresses``: the ranks look each other up as they start, before any
    readiness (they have no probe, and rank 0 must be found while it waits for the others).
    """
    name = job_object_name(job_id, run)
    metadata = job_part_metadata(name, job_id, owner, namespace)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {JOB_ID_LABEL: job_id_label(job_id), JOB_NAME_LABEL: name},
            "ports": [
                {
                    "name": "rendezvous",
                    "port": RENDEZVOUS_PORT,
                    "targetPort": RENDEZVOUS_PORT,
                    "protocol": "TCP",
                }
            ],
        },
    }


def rank_environment(job_name: str, *, nodes: int, gpus_per_node: int) -> list[dict[str, Any]]:
    """The variables ``torch.distributed`` (``env://``), ``accelerate`` and ``torchrun``
    read: one process per pod, so ``RANK`` = ``NODE_RANK`` = the pod's index and
    ``WORLD_SIZE`` = ``NNODES`` = the nodes; ``LOCAL_WORLD_SIZE`` the GPUs of each pod."""
    index = {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"}}
    fixed = {
        "LOCAL_WORLD_SIZE": str(max(gpus_per_node, 1)),
        "MASTER_ADDR": rendezvous_address(job_name),
        "MASTER_PORT": str(RENDEZVOUS_PORT),
        "NNODES": str(nodes),
        "WORLD_SIZE": str(nodes),
    }
    return [
        *({"name": name, "valueFrom": index} for name in RANK_VARIABLES),
        *({"name": name, "value": value} for name, value in sorted(fixed.items())),
    ]


def on_several_nodes(
    job: Mapping[str, Any],
    *,
    nodes: int,
    gpus_per_node: int,
    pinned_nodes: tuple[str, ...] = (),
) -> dict[str, Any]:
    """``job`` (a :func:`.k8s_objects.make_job` manifest) as an Indexed Job of ``nodes``
    pods started together, each told its rank; ``job`` itself for one node.

    Its pod template is ``job``'s, with the Service's subdomain and the rank variables
    (which win over the flavor's of the same name), and no two of its pods on one node;
    ``pinned_nodes``: only on those (the nodes whose GPUs the hub's pool booked; ``job``
    itself is made without ``node_name``, which would put every pod on one). A failed
    pod fails the Job at once, as ``backoffLimit: 0`` or the checkpoint's pod failure
    policy already says, and the Job controller then stops the other pods; with a
    checkpoint, a pod the cluster takes away fails it too (``FailJob``, not ``Count``: one
    replaced rank would rejoin peers that went on), and the executor queues the whole job
    again for its next attempt.
    """
    if nodes <= 1:
        return dict(job)
    indexed = copy.deepcopy(dict(job))
    name = indexed["metadata"]["name"]
    spec = indexed["spec"]
    for rule in (spec.get("podFailurePolicy") or {}).get("rules") or []:
        if rule.get("onPodConditions"):  # a rank taken away: the whole job again, not one pod
            rule["action"] = "FailJob"
    spec["completionMode"] = "Indexed"
    spec["completions"] = nodes
    spec["parallelism"] = nodes
    pod = spec["template"]["spec"]
    pod["subdomain"] = name
    one_per_node = {
        "labelSelector": {"matchLabels": {JOB_NAME_LABEL: name}},
        "topologyKey": NODE_LABEL,
    }
    affinity: dict[str, Any] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [one_per_node]}
    }
    if pinned_nodes:
        wanted = {"key": NODE_LABEL, "operator": "In", "values": sorted(set(pinned_nodes))}
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [wanted]}]
            }
        }
    pod["affinity"] = affinity
    ranks = rank_environment(name, nodes=nodes, gpus_per_node=gpus_per_node)
    taken = {item["name"] for item in ranks}
    for container in pod["containers"]:
        if container["name"] == CONTAINER_NAME:
            kept = [item for item in container.get("env") or [] if item["name"] not in taken]
            container["env"] = [*kept, *ranks]
    return indexed
