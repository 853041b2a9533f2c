"""Which node a pod fits on, and the scheduler's words when none does.

Filters run per node in the default scheduler's order and stop at the first failing one:
NodeUnschedulable, TaintToleration, NodeAffinity (nodeSelector and required node affinity),
NodeResourcesFit (pod count, cpu, memory and every requested resource against
``status.allocatable``, including extended resources such as nvidia.com/gpu). The failure
message is built like the real FitError: "0/3 nodes are available: 3 Insufficient
nvidia.com/gpu. preemption: 0/3 nodes are available: 3 No preemption victims found for
incoming pod."
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .quantities import parse_quantity
from .selectors import LabelRequirement, labels_match

Object = dict[str, Any]


def pod_requests(pod: Object) -> dict[str, Fraction]:
    """max(sum of containers, each init container) per resource, plus the pod overhead."""
    spec = pod.get("spec") or {}
    total: dict[str, Fraction] = {}
    for container in spec.get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[name] = total.get(name, Fraction(0)) + parse_quantity(value)
    for container in spec.get("initContainers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[name] = max(total.get(name, Fraction(0)), parse_quantity(value))
    for name, value in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, Fraction(0)) + parse_quantity(value)
    return total


def is_terminal(pod: Object) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        operator = toleration.get("operator", "Equal")
        if operator == "Exists":
            if not toleration.get("key") or toleration["key"] == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and (toleration.get("value") or "") == (
            taint.get("value") or ""
        ):
            return True
    return False


def _node_selector_term_matches(term: Mapping[str, Any], node: Object) -> bool:
    labels = node["metadata"].get("labels") or {}
    operators = {
        "In": "in",
        "NotIn": "notin",
        "Exists": "exists",
        "DoesNotExist": "!",
        "Gt": "gt",
        "Lt": "lt",
    }
    requirements = tuple(
        LabelRequirement(e["key"], operators[e["operator"]], tuple(e.get("values") or ()))
        for e in term.get("matchExpressions") or []
    )
    fields_ok = all(
        (e["operator"] == "In" and node["metadata"]["name"] in (e.get("values") or []))
        or (e["operator"] == "NotIn" and node["metadata"]["name"] not in (e.get("values") or []))
        for e in term.get("matchFields") or []
    )
    return labels_match(requirements, labels) and fields_ok


def _matches_affinity(pod: Object, node: Object) -> bool:
    spec = pod.get("spec") or {}
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    return not terms or any(_node_selector_term_matches(term, node) for term in terms)


def _is_ready(node: Object) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


@dataclass
class NodeVerdict:
    node: str
    reasons: list[str]
    # Whether evicting lower-priority pods could help (only resource shortages can).
    preemption_could_help: bool = False


def evaluate_node(pod: Object, node: Object, pods_on_node: Iterable[Object]) -> NodeVerdict:
    name = node["metadata"]["name"]
    spec = pod.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if (node.get("spec") or {}).get("unschedulable") and not _tolerates(
        tolerations, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    ):
        return NodeVerdict(name, ["node(s) were unschedulable"])
    taints = list((node.get("spec") or {}).get("taints") or [])
    if not _is_ready(node):
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
    for taint in taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(
            tolerations, taint
        ):
            return NodeVerdict(
                name,
                [
                    f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"
                ],
            )
    if not _matches_affinity(pod, node):
        return NodeVerdict(name, ["node(s) didn't match Pod's node affinity/selector"])
    allocatable = {
        k: parse_quantity(v)
        for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()
    }
    used: dict[str, Fraction] = {}
    count = 0
    for other in pods_on_node:
        count += 1
        for resource, amount in pod_requests(other).items():
            used[resource] = used.get(resource, Fraction(0)) + amount
    reasons = []
    if "pods" in allocatable and count + 1 > allocatable["pods"]:
        reasons.append("Too many pods")
    for resource, amount in sorted(pod_requests(pod).items()):
        if amount == 0:
            continue
        if used.get(resource, Fraction(0)) + amount > allocatable.get(resource, Fraction(0)):
            reasons.append(f"Insufficient {resource}")
    return NodeVerdict(name, reasons, preemption_could_help=bool(reasons))


@dataclass
class Placement:
    node: str | None
    message: str = ""


def place(
    pod: Object, nodes: Iterable[Object], pods_by_node: Mapping[str, list[Object]]
) -> Placement:
    """Pick a node (least requested share of the pod's resources, then name) or explain why none fits."""
    nodes = sorted(nodes, key=lambda n: n["metadata"]["name"])
    if not nodes:
        return Placement(None, "no nodes available to schedule pods")
    verdicts = [evaluate_node(pod, n, pods_by_node.get(n["metadata"]["name"], [])) for n in nodes]
    feasible = [n for n, v in zip(nodes, verdicts, strict=True) if not v.reasons]
    if feasible:
        requested = pod_requests(pod)

        def load(node: Object) -> tuple[Fraction, str]:
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            share = Fraction(0)
            for resource in requested:
                capacity = parse_quantity(allocatable.get(resource, 0))
                if capacity:
                    used = sum(
                        (
                            pod_requests(p).get(resource, Fraction(0))
                            for p in pods_by_node.get(node["metadata"]["name"], [])
                        ),
                        Fraction(0),
                    )
                    share = max(share, used / capacity)
            return share, node["metadata"]["name"]

        return Placement(min(feasible, key=load)["metadata"]["name"])
    return Placement(None, fit_error(verdicts))


def _histogram(counter: Counter[str]) -> str:
    return ", ".join(sorted(f"{count} {reason}" for reason, count in counter.items()))


def fit_error(verdicts: list[NodeVerdict]) -> str:
    total = len(verdicts)
    reasons: Counter[str] = Counter(reason for v in verdicts for reason in v.reasons)
    preemption: Counter[str] = Counter(
        "No preemption victims found for incoming pod"
        if v.preemption_could_help
        else "Preemption is not helpful for scheduling"
        for v in verdicts
    )
    return (
        f"0/{total} nodes are available: {_histogram(reasons)}. "
        f"preemption: 0/{total} nodes are available: {_histogram(preemption)}."
    )
