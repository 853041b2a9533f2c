"""Apply what a grant renders for a pod to a pod manifest: one pure function for the server
pods GPUSpawner asks KubeSpawner for and the pods of the job service's Jobs (``make_job``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..backends.base import PodGPUPlan
from ..backends.protect import is_enforcement_variable

NODE_LABEL = "kubernetes.io/hostname"


def not_enforcing(name: str) -> bool:
    """The default rule for a pod's own variables: those that enforce a GPU share go."""
    return not is_enforcement_variable(name)


def apply_pod_plan(
    pod: dict[str, Any],
    plan: PodGPUPlan,
    *,
    node_name: str | None = None,
    limits: Mapping[str, Any] | None = None,
    requests: Mapping[str, Any] | None = None,
    environment: Mapping[str, Any] | None = None,
    keep_variable: Callable[[str], bool] = not_enforcing,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    volumes: Sequence[Mapping[str, Any]] = (),
    volume_mounts: Sequence[Mapping[str, Any]] = (),
    image: str | None = None,
) -> dict[str, Any]:
    """``pod`` (a Pod or a pod template as a dict: ``metadata`` and ``spec``) with the GPU
    ``plan`` and the grant's other parts applied, changed in place and returned; pure.

    The first container gets ``image``, ``limits`` and ``requests`` (cpu, memory) with the
    plan's resources over them, the plan's DRA claims and ``volume_mounts``; of its variables
    those ``keep_variable`` refuses go, then the plan's environment and ``environment`` win.
    The pod gets the plan's node selector with ``node_name`` pinned (``kubernetes.io/hostname``),
    tolerations, scheduler, runtime class and resource claims; the plan's labels and
    annotations, then ``labels`` and ``annotations``; and ``volumes``.
    """
    metadata = pod.setdefault("metadata", {})
    spec = pod.setdefault("spec", {})
    container = spec["containers"][0]
    if image:
        container["image"] = image

    resources = container.setdefault("resources", {})
    for part, extra, planned in (
        ("limits", limits, plan.resource_limits),
        ("requests", requests, plan.resource_requests),
    ):
        merged = {**(resources.get(part) or {}), **(extra or {}), **planned}
        if merged:
            resources[part] = merged
    if plan.container_claims:
        resources["claims"] = [dict(claim) for claim in plan.container_claims]

    variables = {
        entry["name"]: entry for entry in container.get("env") or [] if keep_variable(entry["name"])
    }
    for name, value in {**plan.environment, **(environment or {})}.items():
        variables[name] = {"name": name, "value": str(value)}
    container["env"] = list(variables.values())
    if volume_mounts:
        container["volumeMounts"] = [
            *(container.get("volumeMounts") or []),
            *(dict(mount) for mount in volume_mounts),
        ]
    if volumes:
        spec["volumes"] = [*(spec.get("volumes") or []), *(dict(volume) for volume in volumes)]

    node_selector = {**(spec.get("nodeSelector") or {}), **plan.node_selector}
    if node_name:
        node_selector[NODE_LABEL] = node_name
    if node_selector:
        spec["nodeSelector"] = node_selector
    if plan.tolerations:
        spec["tolerations"] = [
            *(spec.get("tolerations") or []),
            *(dict(toleration) for toleration in plan.tolerations),
        ]
    if plan.scheduler_name:
        spec["schedulerName"] = plan.scheduler_name
    if plan.runtime_class_name:
        spec["runtimeClassName"] = plan.runtime_class_name
    if plan.pod_resource_claims:
        spec["resourceClaims"] = [dict(claim) for claim in plan.pod_resource_claims]

    metadata["labels"] = {**(metadata.get("labels") or {}), **plan.labels, **(labels or {})}
    metadata["annotations"] = {
        **(metadata.get("annotations") or {}),
        **plan.annotations,
        **(annotations or {}),
    }
    return pod
