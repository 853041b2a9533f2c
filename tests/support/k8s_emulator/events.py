"""core/v1 Event objects as the scheduler, the kubelet and the Job controller record them."""

from __future__ import annotations

import secrets
from typing import Any

from .timestamps import micro, rfc3339


def _involved(obj: dict[str, Any], field_path: str | None) -> dict[str, Any]:
    meta = obj["metadata"]
    involved = {
        "kind": obj.get("kind", "Pod"),
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "apiVersion": obj.get("apiVersion", "v1"),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    if field_path:
        involved["fieldPath"] = field_path
    return involved


def _name(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['name']}.{secrets.token_hex(8)}"


def recorded_event(
    obj: dict[str, Any],
    *,
    component: str,
    reason: str,
    message: str,
    type: str = "Normal",
    host: str | None = None,
    field_path: str | None = None,
) -> dict[str, Any]:
    """An event written the classic way (kubelet, controllers): first/lastTimestamp and count."""
    moment = rfc3339()
    source = {"component": component}
    if host:
        source["host"] = host
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": _name(obj),
            "namespace": obj["metadata"].get("namespace") or "default",
        },
        "involvedObject": _involved(obj, field_path),
        "reason": reason,
        "message": message,
        "source": source,
        "firstTimestamp": moment,
        "lastTimestamp": moment,
        "count": 1,
        "type": type,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": host or "",
    }


def scheduler_event(
    obj: dict[str, Any], *, reason: str, message: str, action: str, type: str = "Normal"
) -> dict[str, Any]:
    """An event written through events.k8s.io/v1, as the scheduler does, read back through
    core/v1: eventTime is set and first/lastTimestamp are null."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": _name(obj),
            "namespace": obj["metadata"].get("namespace") or "default",
        },
        "involvedObject": _involved(obj, None),
        "reason": reason,
        "message": message,
        "source": {},
        "firstTimestamp": None,
        "lastTimestamp": None,
        "type": type,
        "eventTime": micro(),
        "action": action,
        "reportingComponent": "default-scheduler",
        "reportingInstance": "default-scheduler-emulator",
    }
