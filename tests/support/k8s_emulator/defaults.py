"""Defaulting on create, as the API server's defaulters and admission plugins do it.

Only fields that clients read back are filled in: pod restartPolicy, schedulerName,
terminationGracePeriodSeconds, container requests defaulted from limits (the scheduler
counts requests), the default tolerations, qosClass; job parallelism/completions/
backoffLimit and the controller-uid selector and template labels; service clusterIP;
namespace finalizers and name label; secret stringData folded into data.
"""

from __future__ import annotations

import base64
import itertools
from typing import Any

from .quantities import parse_quantity
from .timestamps import rfc3339

_service_ips = itertools.count(10)

DEFAULT_TOLERATIONS = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]


def _image_pull_policy(image: str) -> str:
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    tag = last.split(":", 1)[1] if ":" in last else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def default_container(container: dict[str, Any]) -> None:
    container.setdefault("imagePullPolicy", _image_pull_policy(container.get("image", "")))
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    resources = container.setdefault("resources", {})
    limits = resources.get("limits") or {}
    if limits:
        requests = resources.setdefault("requests", {})
        for name, value in limits.items():
            requests.setdefault(name, value)
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")
    for env in container.get("env") or []:
        ref = (env.get("valueFrom") or {}).get("fieldRef")
        if ref is not None:
            ref.setdefault("apiVersion", "v1")


def default_pod_spec(spec: dict[str, Any], *, add_tolerations: bool) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    for container in itertools.chain(
        spec.get("initContainers") or [], spec.get("containers") or []
    ):
        default_container(container)
    if add_tolerations:
        tolerations = spec.setdefault("tolerations", [])
        for default in DEFAULT_TOLERATIONS:
            if not any(t.get("key") == default["key"] for t in tolerations):
                tolerations.append(dict(default))


def qos_class(spec: dict[str, Any]) -> str:
    """Guaranteed, Burstable or BestEffort, from cpu and memory requests and limits."""
    containers = list(
        itertools.chain(spec.get("initContainers") or [], spec.get("containers") or [])
    )
    any_set = False
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for name in ("cpu", "memory"):
            if name in requests or name in limits:
                any_set = True
            if name not in limits or parse_quantity(
                requests.get(name, limits[name])
            ) != parse_quantity(limits[name]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def prepare_for_create(kind: str, obj: dict[str, Any], uid: str) -> None:
    """Fill in defaults and reset server-owned status for a new object of ``kind``."""
    meta = obj["metadata"]
    if kind == "Pod":
        spec = obj.setdefault("spec", {})
        default_pod_spec(spec, add_tolerations=True)
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}
        if spec.get("schedulingGates"):
            # As the pod strategy does: a gated pod says why the scheduler leaves it alone.
            obj["status"]["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "SchedulingGated",
                    "message": "Scheduling is blocked due to non-empty scheduling gates",
                    "lastProbeTime": None,
                    "lastTransitionTime": rfc3339(),
                }
            ]
    elif kind == "Job":
        spec = obj.setdefault("spec", {})
        spec.setdefault("parallelism", 1)
        spec.setdefault("completions", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        # Failed is the only value allowed with a pod failure policy, and its default then.
        policy = spec.get("podFailurePolicy")
        spec.setdefault("podReplacementPolicy", "Failed" if policy else "TerminatingOrFailed")
        for rule in (policy or {}).get("rules") or []:
            for pattern in rule.get("onPodConditions") or []:
                pattern.setdefault("status", "True")
        if not spec.get("manualSelector"):
            spec.pop("manualSelector", None)
        template = spec.setdefault("template", {})
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        if not spec.get("manualSelector"):
            generated = {
                "batch.kubernetes.io/controller-uid": uid,
                "batch.kubernetes.io/job-name": meta["name"],
                "controller-uid": uid,
                "job-name": meta["name"],
            }
            labels.update(generated)
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        default_pod_spec(template.setdefault("spec", {}), add_tolerations=False)
        obj["status"] = {}
    elif kind == "Service":
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        if spec.get("clusterIP") != "None":
            number = next(_service_ips)
            spec.setdefault("clusterIP", f"10.96.{number // 250}.{number % 250 + 1}")
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
        obj["status"] = {"loadBalancer": {}}
    elif kind == "PersistentVolumeClaim":
        obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
        obj["status"] = {"phase": "Pending"}
    elif kind == "Namespace":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        obj["status"] = {"phase": "Active"}
    elif kind == "Secret":
        obj.setdefault("type", "Opaque")
        fold_string_data(obj)
    elif kind == "ResourceClaim":
        obj.setdefault("status", {})


def fold_string_data(secret: dict[str, Any]) -> None:
    """Secrets store ``stringData`` base64-encoded in ``data`` (on create and update)."""
    string_data = secret.pop("stringData", None) or {}
    if string_data:
        data = secret.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(value.encode()).decode()


def normalize(kind: str, obj: dict[str, Any]) -> None:
    """What decoding into Go structs and encoding again does to a written object: condition
    timestamps that a patch set to null (which deletes in a patch) come back as null."""
    if kind in ("Pod", "Job"):
        for condition in (obj.get("status") or {}).get("conditions") or []:
            condition.setdefault("lastProbeTime", None)
            condition.setdefault("lastTransitionTime", None)
