"""The subset of API validation that catches mistakes a product could make in manifests.

Each validator returns (field path, message) pairs; the API server turns them into one
422 Invalid response. Messages follow the real ones ("Invalid value", "Required value",
"must be an integer", ...) so product code that reports them shows what a cluster would.
"""

from __future__ import annotations

import re
from typing import Any

from .data_validation import dns_1035_label, validate_data
from .quantities import QuantityError, is_integer_quantity, parse_quantity
from .resources import ResourceType

Causes = list[tuple[str, str]]

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_STANDARD_RESOURCES = {"cpu", "memory", "ephemeral-storage", "pods"}


def _dns_label(value: str, path: str) -> Causes:
    if not value or len(value) > 63 or not DNS_LABEL.match(value):
        return [
            (
                path,
                f"Invalid value: \"{value}\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            )
        ]
    return []


def _dns_subdomain(value: str, path: str) -> Causes:
    if not value or len(value) > 253 or not DNS_SUBDOMAIN.match(value):
        return [
            (
                path,
                f"Invalid value: \"{value}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            )
        ]
    return []


def _qualified_key(key: str, path: str) -> Causes:
    prefix, _, name = key.rpartition("/")
    causes: Causes = []
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix)):
        causes.append(
            (
                path,
                f"Invalid value: \"{key}\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'",
            )
        )
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        causes.append(
            (
                path,
                f"Invalid value: \"{key}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, and be no more than 63 characters",
            )
        )
    return causes


def validate_metadata(rt: ResourceType, meta: dict[str, Any]) -> Causes:
    causes: Causes = []
    name = meta.get("name", "")
    if rt.kind == "Service":
        causes += dns_1035_label(name, "metadata.name")
    elif rt.kind == "Namespace":
        causes += _dns_label(name, "metadata.name")
    elif rt.kind == "Job":
        causes += _dns_subdomain(name, "metadata.name")
        if len(name) > 63:
            causes.append(
                ("metadata.name", f'Invalid value: "{name}": must be no more than 63 characters')
            )
    elif rt.kind != "Event" or not name:
        causes += _dns_subdomain(name, "metadata.name")
    for key, value in (meta.get("labels") or {}).items():
        causes += _qualified_key(key, "metadata.labels")
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            causes.append(
                (
                    "metadata.labels",
                    f"Invalid value: \"{value}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, and be no more than 63 characters",
                )
            )
    for key, value in (meta.get("annotations") or {}).items():
        causes += _qualified_key(key, "metadata.annotations")
        if not isinstance(value, str):
            causes.append(
                (
                    "metadata.annotations",
                    f"Invalid value: {value!r}: annotation values must be strings",
                )
            )
    for i, ref in enumerate(meta.get("ownerReferences") or []):
        for required in ("apiVersion", "kind", "name", "uid"):
            if not ref.get(required):
                causes.append((f"metadata.ownerReferences[{i}].{required}", "Required value"))
    return causes


def _is_extended(resource: str) -> bool:
    return "/" in resource and not resource.startswith("kubernetes.io/")


def _validate_resources(resources: dict[str, Any], path: str) -> Causes:
    causes: Causes = []
    parsed: dict[str, dict[str, Any]] = {"limits": {}, "requests": {}}
    for section in ("limits", "requests"):
        for resource, value in (resources.get(section) or {}).items():
            field = f"{path}.{section}[{resource}]"
            if (
                resource not in _STANDARD_RESOURCES
                and not resource.startswith("hugepages-")
                and "/" not in resource
            ):
                causes.append(
                    (
                        field,
                        f'Invalid value: "{resource}": must be a standard resource type or fully qualified',
                    )
                )
                continue
            try:
                parsed[section][resource] = parse_quantity(value)
            except QuantityError as error:
                causes.append((field, f'Invalid value: "{value}": {error}'))
                continue
            if parsed[section][resource] < 0:
                causes.append(
                    (field, f'Invalid value: "{value}": must be greater than or equal to 0')
                )
            if _is_extended(resource) and not is_integer_quantity(value):
                causes.append((field, f'Invalid value: "{value}": must be an integer'))
    for resource, request in parsed["requests"].items():
        limit = parsed["limits"].get(resource)
        if _is_extended(resource):
            if limit is None:
                causes.append(
                    (
                        f"{path}.limits",
                        "Required value: Limit must be set for non overcommitable resources",
                    )
                )
            elif limit != request:
                causes.append(
                    (
                        f"{path}.requests[{resource}]",
                        f'Invalid value: "{resources["requests"][resource]}": must be equal to {resource} limit of {resources["limits"][resource]}',
                    )
                )
        elif limit is not None and request > limit:
            causes.append(
                (
                    f"{path}.requests[{resource}]",
                    f'Invalid value: "{resources["requests"][resource]}": must be less than or equal to {resource} limit of {resources["limits"][resource]}',
                )
            )
    return causes


def _validate_container(container: dict[str, Any], path: str, volumes: set[str]) -> Causes:
    causes = _dns_label(container.get("name", ""), f"{path}.name")
    if not container.get("image"):
        causes.append((f"{path}.image", "Required value"))
    for i, env in enumerate(container.get("env") or []):
        name = env.get("name", "")
        if not name or not _ENV_NAME.match(name):
            causes.append(
                (
                    f"{path}.env[{i}].name",
                    f"Invalid value: \"{name}\": a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit",
                )
            )
        if "value" in env and env["value"] is not None and not isinstance(env["value"], str):
            causes.append(
                (f"{path}.env[{i}].value", f"Invalid value: {env['value']!r}: must be a string")
            )
    for i, port in enumerate(container.get("ports") or []):
        number = port.get("containerPort")
        if not isinstance(number, int) or not 0 < number < 65536:
            causes.append(
                (
                    f"{path}.ports[{i}].containerPort",
                    f"Invalid value: {number!r}: must be between 1 and 65535, inclusive",
                )
            )
        if port.get("name") and (
            len(port["name"]) > 15 or not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", port["name"])
        ):
            causes.append(
                (
                    f"{path}.ports[{i}].name",
                    f'Invalid value: "{port["name"]}": must be no more than 15 characters',
                )
            )
    for i, mount in enumerate(container.get("volumeMounts") or []):
        if mount.get("name") not in volumes:
            causes.append((f"{path}.volumeMounts[{i}].name", f'Not found: "{mount.get("name")}"'))
        if not mount.get("mountPath"):
            causes.append((f"{path}.volumeMounts[{i}].mountPath", "Required value"))
    causes += _validate_resources(container.get("resources") or {}, f"{path}.resources")
    return causes


def validate_pod_spec(
    spec: dict[str, Any],
    path: str,
    restart_policies: tuple[str, ...] = ("Always", "OnFailure", "Never"),
) -> Causes:
    causes: Causes = []
    volumes: set[str] = set()
    for i, volume in enumerate(spec.get("volumes") or []):
        causes += _dns_label(volume.get("name", ""), f"{path}.volumes[{i}].name")
        if volume.get("name") in volumes:
            causes.append((f"{path}.volumes[{i}].name", f'Duplicate value: "{volume["name"]}"'))
        volumes.add(volume.get("name", ""))
    containers = spec.get("containers") or []
    if not containers:
        causes.append((f"{path}.containers", "Required value"))
    names: set[str] = set()
    for group in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(group) or []):
            causes += _validate_container(container, f"{path}.{group}[{i}]", volumes)
            if container.get("name") in names:
                causes.append(
                    (f"{path}.{group}[{i}].name", f'Duplicate value: "{container["name"]}"')
                )
            names.add(container.get("name", ""))
    policy = spec.get("restartPolicy", "Always")
    if policy not in restart_policies:
        supported = ", ".join(f'"{p}"' for p in restart_policies)
        causes.append(
            (
                f"{path}.restartPolicy",
                f'Unsupported value: "{policy}": supported values: {supported}',
            )
        )
    for i, toleration in enumerate(spec.get("tolerations") or []):
        if toleration.get("operator") == "Exists" and toleration.get("value"):
            causes.append(
                (
                    f"{path}.tolerations[{i}].operator",
                    f"Invalid value: \"{toleration['value']}\": value must be empty when `operator` is 'Exists'",
                )
            )
    if spec.get("nodeSelector") is not None and not isinstance(spec["nodeSelector"], dict):
        causes.append((f"{path}.nodeSelector", "Invalid value: must be a map of strings"))
    for key, value in (spec.get("nodeSelector") or {}).items():
        if not isinstance(value, str):
            causes.append(
                (f"{path}.nodeSelector[{key}]", f"Invalid value: {value!r}: must be a string")
            )
    return causes


def _non_negative(spec: dict[str, Any], key: str, path: str, positive: bool = False) -> Causes:
    value = spec.get(key)
    if value is None:
        return []
    if not isinstance(value, int) or value < 0 or (positive and value == 0):
        bound = "greater than 0" if positive else "greater than or equal to 0"
        return [(f"{path}.{key}", f"Invalid value: {value!r}: must be {bound}")]
    return []


_POLICY_ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")
_EXIT_CODE_OPERATORS = ("In", "NotIn")
_CONDITION_STATUSES = ("False", "True", "Unknown")


def _one_of(value: Any, supported: tuple[str, ...], path: str) -> Causes:
    """Required, and one of ``supported`` (the API server's Required / NotSupported)."""
    if not value:
        listed = " ".join(f'"{item}"' for item in supported)
        return [(path, f"Required value: valid values: [{listed}]")]
    if value not in supported:
        listed = ", ".join(f'"{item}"' for item in supported)
        return [(path, f'Unsupported value: "{value}": supported values: {listed}')]
    return []


def _validate_exit_codes(requirement: dict[str, Any], path: str, containers: set[str]) -> Causes:
    causes = _one_of(requirement.get("operator"), _EXIT_CODE_OPERATORS, f"{path}.operator")
    name = requirement.get("containerName")
    if name is not None and name not in containers:
        causes.append(
            (
                f"{path}.containerName",
                f'Invalid value: "{name}": must be one of the container or initContainer names '
                "in the pod template",
            )
        )
    values = requirement.get("values") or []
    if not values:
        causes.append(
            (f"{path}.values", "Invalid value: []int32(nil): at least one value is required")
        )
    elif len(values) > 255:
        causes.append((f"{path}.values", f"Too many: {len(values)}: must have at most 255 items"))
    else:
        seen: set[int] = set()
        for j, value in enumerate(values):
            if requirement.get("operator") == "In" and value == 0:
                causes.append(
                    (f"{path}.values[{j}]", "Invalid value: 0: must not be 0 for the In operator")
                )
            if value in seen:
                causes.append((f"{path}.values[{j}]", f"Duplicate value: {value}"))
            seen.add(value)
        if values != sorted(values):
            listed = ", ".join(str(v) for v in values)
            causes.append(
                (f"{path}.values", f"Invalid value: []int32{{{listed}}}: must be ordered")
            )
    return causes


def _validate_pod_failure_policy(spec: dict[str, Any], path: str) -> Causes:
    """``spec.podFailurePolicy`` as the API server validates it (and what it requires of the
    template and of ``podReplacementPolicy``)."""
    policy = spec["podFailurePolicy"]
    template = (spec.get("template") or {}).get("spec") or {}
    containers = {
        c.get("name", "")
        for c in (template.get("containers") or []) + (template.get("initContainers") or [])
    }
    causes: Causes = []
    rules = policy.get("rules") or []
    if len(rules) > 20:
        causes.append((f"{path}.rules", f"Too many: {len(rules)}: must have at most 20 items"))
    for i, rule in enumerate(rules):
        rule_path = f"{path}.rules[{i}]"
        action = rule.get("action")
        if action == "FailIndex" and spec.get("backoffLimitPerIndex") is None:
            causes.append(
                (
                    f"{rule_path}.action",
                    'Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set',
                )
            )
        else:
            causes += _one_of(action, _POLICY_ACTIONS, f"{rule_path}.action")
        exit_codes = rule.get("onExitCodes")
        conditions = rule.get("onPodConditions") or []
        if exit_codes is not None:
            causes += _validate_exit_codes(exit_codes, f"{rule_path}.onExitCodes", containers)
        if len(conditions) > 20:
            causes.append(
                (
                    f"{rule_path}.onPodConditions",
                    f"Too many: {len(conditions)}: must have at most 20 items",
                )
            )
        for j, pattern in enumerate(conditions):
            pattern_path = f"{rule_path}.onPodConditions[{j}]"
            causes += _qualified_key(pattern.get("type") or "", f"{pattern_path}.type")
            causes += _one_of(pattern.get("status"), _CONDITION_STATUSES, f"{pattern_path}.status")
        if exit_codes is not None and conditions:
            causes.append(
                (
                    rule_path,
                    "Invalid value: specifying both OnExitCodes and OnPodConditions is not supported",
                )
            )
        if exit_codes is None and not conditions:
            causes.append(
                (
                    rule_path,
                    "Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
                )
            )
    restart = template.get("restartPolicy")
    if restart != "Never":
        causes.append(
            (
                "spec.template.spec.restartPolicy",
                f'Invalid value: "{restart}": only "Never" is supported when podFailurePolicy is '
                "specified",
            )
        )
    return causes


def _validate_pod_replacement_policy(spec: dict[str, Any]) -> Causes:
    value = spec.get("podReplacementPolicy")
    if value is None:
        return []
    supported = ("Failed",) if spec.get("podFailurePolicy") else ("Failed", "TerminatingOrFailed")
    if value not in supported:
        listed = ", ".join(f'"{item}"' for item in supported)
        return [
            (
                "spec.podReplacementPolicy",
                f'Unsupported value: "{value}": supported values: {listed}',
            )
        ]
    return []


def validate(rt: ResourceType, obj: dict[str, Any]) -> Causes:
    """Validation on create (and again on update) for the kinds that have rules here."""
    causes = validate_metadata(rt, obj.get("metadata") or {})
    causes += validate_data(rt.kind, obj)
    spec = obj.get("spec") or {}
    if rt.kind == "Pod":
        causes += validate_pod_spec(spec, "spec")
        if spec.get("nodeName") and spec.get("schedulingGates"):
            causes.append(
                (
                    "spec.nodeName",
                    "Forbidden: cannot be set until all schedulingGates have been cleared",
                )
            )
    elif rt.kind == "Job":
        template = spec.get("template") or {}
        causes += validate_pod_spec(
            template.get("spec") or {}, "spec.template.spec", ("OnFailure", "Never")
        )
        for key in ("parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished"):
            causes += _non_negative(spec, key, "spec")
        causes += _non_negative(spec, "activeDeadlineSeconds", "spec", positive=True)
        if spec.get("podFailurePolicy") is not None:
            causes += _validate_pod_failure_policy(spec, "spec.podFailurePolicy")
        causes += _validate_pod_replacement_policy(spec)
        if spec.get("completionMode", "NonIndexed") not in ("NonIndexed", "Indexed"):
            causes.append(
                (
                    "spec.completionMode",
                    f'Unsupported value: "{spec["completionMode"]}": supported values: "NonIndexed", "Indexed"',
                )
            )
    elif rt.kind == "Service":
        for i, port in enumerate(spec.get("ports") or []):
            number = port.get("port")
            if not isinstance(number, int) or not 0 < number < 65536:
                causes.append(
                    (
                        f"spec.ports[{i}].port",
                        f"Invalid value: {number!r}: must be between 1 and 65535, inclusive",
                    )
                )
        if not spec.get("ports") and spec.get("clusterIP") != "None":
            causes.append(("spec.ports", "Required value"))
    elif rt.kind == "Secret":
        for key, value in (obj.get("data") or {}).items():
            if not isinstance(value, str):
                causes.append((f"data[{key}]", "Invalid value: must be base64-encoded bytes"))
    return causes


_MUTABLE_POD_SPEC = (
    "activeDeadlineSeconds",
    "tolerations",
    "terminationGracePeriodSeconds",
    "schedulingGates",
)


def _pod_spec_without_mutable(spec: dict[str, Any]) -> dict[str, Any]:
    stripped = {k: v for k, v in spec.items() if k not in _MUTABLE_POD_SPEC}
    for group in ("containers", "initContainers"):
        if group in stripped:
            stripped[group] = [
                {k: v for k, v in c.items() if k != "image"} for c in stripped[group]
            ]
    return stripped


def _only_deleted_scheduling_gates(old_spec: dict[str, Any], new_spec: dict[str, Any]) -> Causes:
    """Scheduling gates may be removed after creation, never added (as the API validates)."""
    old_names = {g.get("name") for g in old_spec.get("schedulingGates") or []}
    return [
        (
            f"spec.schedulingGates[{i}].name",
            f"Forbidden: only deletion is allowed, but found new scheduling gate '{gate.get('name')}'",
        )
        for i, gate in enumerate(new_spec.get("schedulingGates") or [])
        if gate.get("name") not in old_names
    ]


def validate_update(rt: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> Causes:
    """Immutability rules for updates (spec of pods, template and selector of jobs)."""
    causes = validate(rt, new)
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if rt.kind == "Pod" and _pod_spec_without_mutable(old_spec) != _pod_spec_without_mutable(
        new_spec
    ):
        causes.append(
            (
                "spec",
                "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
            )
        )
    if rt.kind == "Pod":
        causes.extend(_only_deleted_scheduling_gates(old_spec, new_spec))
    if rt.kind == "Job":
        for key in ("selector", "template", "completionMode", "podFailurePolicy"):
            if old_spec.get(key) != new_spec.get(key):
                causes.append((f"spec.{key}", "Invalid value: field is immutable"))
    return causes
