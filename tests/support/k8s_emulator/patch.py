"""The three PATCH formats of the API server: JSON merge, JSON patch and strategic merge.

Strategic merge knows, per object kind, which lists merge by a key (containers by name,
env by name, ports by containerPort, volumeMounts by mountPath, volumes by name, conditions
by type, ...), which primitive lists merge as sets (finalizers), and honours the
``$patch: replace|delete``, ``$retainKeys``, ``$deleteFromPrimitiveList/<field>`` and
``$setElementOrder/<field>`` directives. Every other list is replaced, as in Kubernetes.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any


class PatchError(ValueError):
    """A patch that cannot be applied (the API server answers 422 or 400)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns a new value."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- JSON patch (RFC 6902) -------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer must start with '/': {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _parent(document: Any, parts: list[str], path: str) -> tuple[Any, str]:
    current = document
    for part in parts[:-1]:
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            raise PatchError(f"doc is missing path: {path!r}")
    return current, parts[-1]


def _get(document: Any, path: str) -> Any:
    current = document
    for part in _pointer(path):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            raise PatchError(f"doc is missing path: {path!r}")
    return current


def _add(document: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent, last = _parent(document, parts, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise PatchError(f"unable to add at index {last!r} of {path!r}: out of bounds")
    else:
        raise PatchError(f"doc is missing path: {path!r}")
    return document


def _remove(document: Any, path: str) -> tuple[Any, Any]:
    parts = _pointer(path)
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent, last = _parent(document, parts, path)
    if isinstance(parent, dict) and last in parent:
        return document, parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return document, parent.pop(int(last))
    raise PatchError(f"unable to remove nonexistent key: {path!r}: missing value")


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch; returns a new document."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    document = copy.deepcopy(target)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise PatchError(f"invalid JSON patch operation: {operation!r}")
        op, path = operation["op"], operation["path"]
        if op == "add":
            document = _add(document, path, copy.deepcopy(operation["value"]))
        elif op == "remove":
            document, _ = _remove(document, path)
        elif op == "replace":
            _get(document, path)
            if _pointer(path):
                document, _ = _remove(document, path)
            document = _add(document, path, copy.deepcopy(operation["value"]))
        elif op == "move":
            document, value = _remove(document, operation["from"])
            document = _add(document, path, value)
        elif op == "copy":
            document = _add(document, path, copy.deepcopy(_get(document, operation["from"])))
        elif op == "test":
            if _get(document, path) != operation.get("value"):
                raise PatchError(f"testing value {path} failed")
        else:
            raise PatchError(f"Unexpected kind: {op}")
    return document


# --- strategic merge patch ----------------------------------------------------------------


@dataclass(frozen=True)
class ListField:
    """A list that merges instead of being replaced: by ``key``, or as a set of primitives."""

    item_type: str | None = None
    key: str | None = None


_META = {"finalizers": ListField(), "ownerReferences": ListField(key="uid")}
_CONTAINER: dict[str, str | ListField] = {
    "env": ListField(key="name"),
    "ports": ListField(key="containerPort"),
    "volumeMounts": ListField(key="mountPath"),
    "volumeDevices": ListField(key="devicePath"),
    "resizePolicy": ListField(key="resourceName"),
    "resources": "ResourceRequirements",
}
_POD_SPEC = {
    "containers": ListField("Container", "name"),
    "initContainers": ListField("Container", "name"),
    "ephemeralContainers": ListField("Container", "name"),
    "volumes": ListField(key="name"),
    "imagePullSecrets": ListField(key="name"),
    "hostAliases": ListField(key="ip"),
    "resourceClaims": ListField(key="name"),
    "topologySpreadConstraints": ListField(key="topologyKey"),
}
_CONDITIONS = {"conditions": ListField(key="type")}

# Type name -> {field: nested type name | ListField}
SCHEMA: dict[str, dict[str, str | ListField]] = {
    "ObjectMeta": _META,
    "Container": _CONTAINER,
    "PodSpec": _POD_SPEC,
    "PodTemplateSpec": {"metadata": "ObjectMeta", "spec": "PodSpec"},
    "Pod": {"metadata": "ObjectMeta", "spec": "PodSpec", "status": "PodStatus"},
    "PodStatus": {**_CONDITIONS, "podIPs": ListField(key="ip")},
    "Job": {"metadata": "ObjectMeta", "spec": "JobSpec", "status": "JobStatus"},
    "JobSpec": {"template": "PodTemplateSpec"},
    "JobStatus": _CONDITIONS,
    "Service": {"metadata": "ObjectMeta", "spec": "ServiceSpec"},
    "ServiceSpec": {"ports": ListField(key="port")},
    "Node": {"metadata": "ObjectMeta", "spec": "NodeSpec", "status": "NodeStatus"},
    "NodeSpec": {"taints": ListField(key="key")},
    "NodeStatus": {**_CONDITIONS, "addresses": ListField(key="type")},
    "Namespace": {"metadata": "ObjectMeta", "status": "NamespaceStatus"},
    "NamespaceStatus": _CONDITIONS,
    "PersistentVolumeClaim": {"metadata": "ObjectMeta", "status": "PVCStatus"},
    "PVCStatus": _CONDITIONS,
    "ResourceRequirements": {"claims": ListField(key="name")},
}


def strategic_merge_patch(
    target: dict[str, Any], patch: dict[str, Any], kind: str
) -> dict[str, Any]:
    """Apply a strategic merge patch to an object of ``kind``; returns a new object."""
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object")
    type_name = kind if kind in SCHEMA else "_Object"
    return _merge_map(copy.deepcopy(target or {}), patch, type_name)


def _fields(type_name: str | None) -> dict[str, str | ListField]:
    if type_name == "_Object":
        return {"metadata": "ObjectMeta"}
    return SCHEMA.get(type_name or "", {})


def _merge_map(
    original: dict[str, Any], patch: dict[str, Any], type_name: str | None
) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return {}
    fields = _fields(type_name)
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(original.get(field), list):
                original[field] = [item for item in original[field] if item not in value]
            continue
        if value is None:
            original.pop(key, None)
            continue
        spec = fields.get(key)
        current = original.get(key)
        if (
            isinstance(value, dict)
            and value.get("$patch") == "delete"
            and not isinstance(spec, ListField)
        ):
            original.pop(key, None)
        elif isinstance(value, dict):
            nested = spec if isinstance(spec, str) else None
            original[key] = _merge_map(current if isinstance(current, dict) else {}, value, nested)
        elif isinstance(value, list) and isinstance(spec, ListField) and isinstance(current, list):
            original[key] = _merge_list(current, value, spec)
        elif isinstance(value, list) and isinstance(spec, ListField):
            original[key] = _merge_list([], value, spec)
        else:
            original[key] = copy.deepcopy(value)
    if isinstance(retain, list):
        for key in list(original):
            if key not in retain:
                del original[key]
    return original


def _merge_list(original: list[Any], patch: list[Any], spec: ListField) -> list[Any]:
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    if spec.key is None:  # a set of primitives, such as finalizers
        merged = list(original)
        for item in patch:
            if item not in merged:
                merged.append(copy.deepcopy(item))
        return merged
    merged = [copy.deepcopy(item) for item in original]
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError(f"a list merged by {spec.key!r} must hold objects, got {item!r}")
        if spec.key not in item:
            raise PatchError(f"map: {item} does not contain declared merge key: {spec.key}")
        index = next(
            (
                i
                for i, existing in enumerate(merged)
                if isinstance(existing, dict) and existing.get(spec.key) == item[spec.key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                merged.pop(index)
        elif index is None:
            merged.append(_merge_map({}, item, spec.item_type))
        else:
            merged[index] = _merge_map(merged[index], item, spec.item_type)
    return merged
