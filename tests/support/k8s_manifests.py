"""Small builders for the manifests the emulator tests create."""

from __future__ import annotations

from typing import Any


def pod(
    name: str,
    *,
    image: str = "python:3.12-slim",
    gpus: int = 0,
    resources: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    command: list[str] | None = None,
    restart_policy: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": image}
    if command:
        container["command"] = command
    limits = dict((resources or {}).get("limits") or {})
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    if limits or resources:
        container["resources"] = {**(resources or {}), "limits": limits}
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [container], **spec},
    }
    if restart_policy:
        body["spec"]["restartPolicy"] = restart_policy
    return body


def job(
    name: str,
    *,
    command: list[str] | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "python:3.12-slim"}
    if command:
        container["command"] = command
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": labels or {}},
                "spec": {"restartPolicy": "Never", "containers": [container]},
            },
            **spec,
        },
    }
