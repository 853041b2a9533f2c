"""Creating a job's Kubernetes objects: what refuses a job, with a sentence for its owner,
and taking over the objects an earlier try of the same job left (an object of that name
that is not the job's, its labels differing, is refused).
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Callable
from typing import Any

from ..k8s_objects import PodCheckpoint, UserFiles, owner_reference
from ..store import JobAttemptsRow
from .kube_client import KubeClient, KubeError


def _version(existing: dict[str, Any]) -> dict[str, Any]:
    version = (existing.get("metadata") or {}).get("resourceVersion")
    return {"resourceVersion": version} if version else {}


class JobNotStartable(Exception):
    """The job cannot be turned into a Kubernetes Job; ``message`` is for its owner."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def granted_image(grant: Any, default_image: str) -> str:
    """The image of a job admitted for Kubernetes: its flavor's, else ``default_image``."""
    if grant is not None and grant.target != "kubernetes":
        raise JobNotStartable(
            "This job was admitted for another executor, so its GPU share cannot be given "
            "on Kubernetes. Create it again."
        )
    image = (grant.image if grant else None) or default_image
    if not image:
        raise JobNotStartable(
            "No image is configured for this job's flavor, so it cannot run on Kubernetes. "
            "Tell the hub admins (the flavor's environment.image, or "
            "KubernetesExecutor.image)."
        )
    return image


def checkpoint_in_pod(files: UserFiles, attempts: JobAttemptsRow) -> PodCheckpoint:
    """A job's checkpoint folder in its pod, below the notebook's folder in the home the pod
    mounts, and its retries; refused where jobs get no home to keep a checkpoint in."""
    if files.root is None:
        raise JobNotStartable(
            "This job asks for a checkpoint folder, but jobs on this cluster get no home "
            "volume to keep it in, so it would be lost with the job's pod. Submit it "
            "without a checkpoint, or ask the hub admins to give jobs the users' homes "
            "(KubernetesExecutor.home_pvc_name_template)."
        )
    path = posixpath.normpath(
        posixpath.join(files.root, files.notebook_folder, attempts.checkpoint_folder)
    )
    # A later Job (after an out-of-memory kill) gets the retries left.
    return PodCheckpoint(path=path, retries=attempts.max_attempts - attempts.attempt)


async def create_or_adopt(kube: KubeClient, path: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """Create ``manifest``; one left by an earlier try of this very job is taken over."""
    try:
        return await kube.request("POST", path, body=manifest)
    except KubeError as error:
        if error.status != 409:
            raise
    existing = await kube.get(f"{path}/{manifest['metadata']['name']}")
    labels = ((existing or {}).get("metadata") or {}).get("labels") or {}
    if existing is None or labels != {**labels, **manifest["metadata"]["labels"]}:
        raise JobNotStartable(
            f"A Kubernetes {manifest['kind']} named {manifest['metadata']['name']} exists "
            "and belongs to something else. Tell the hub admins."
        )
    return existing


async def create_or_replace(kube: KubeClient, path: str, manifest: dict[str, Any]) -> None:
    """Create ``manifest``, replacing one left by an earlier try of this very job (a
    Secret whose token is revoked now)."""
    try:
        await kube.request("POST", path, body=manifest)
        return
    except KubeError as error:
        if error.status != 409:
            raise
    existing = await create_or_adopt(kube, path, manifest)  # refuses one that is not this job's
    replaced = {**manifest, "metadata": {**manifest["metadata"], **_version(existing)}}
    await kube.request("PUT", f"{path}/{manifest['metadata']['name']}", body=replaced)


async def create_job_objects(
    kube: KubeClient,
    namespace: str,
    *,
    configmap: dict[str, Any],
    job: dict[str, Any],
    plan: Any,
    secret: dict[str, Any] | None = None,
    service: dict[str, Any] | None = None,
    job_made: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """The job's ConfigMap, its GPU's ResourceClaimTemplates (DRA), its upload ``secret``,
    its Job (then ``job_made()`` is called) and (a job on several nodes) its pods' headless
    ``service``; returns the Job as made. What the Job does not own yet goes if the Job
    cannot be made."""
    configmaps = f"/api/v1/namespaces/{namespace}/configmaps"
    secrets = f"/api/v1/namespaces/{namespace}/secrets"
    owned = [f"{configmaps}/{configmap['metadata']['name']}"]
    made = await create_or_adopt(kube, configmaps, configmap)
    try:
        for template in plan.resource_claim_templates:
            # Owned by the ConfigMap, itself owned by the Job below: the garbage collector
            # deletes the template with the Job, and the Role needs no more than create.
            group, version = template["apiVersion"].split("/")
            parent = {**owner_reference(made), "apiVersion": "v1", "kind": "ConfigMap"}
            metadata = {**template["metadata"], "ownerReferences": [parent]}
            try:
                await kube.request(
                    "POST",
                    f"/apis/{group}/{version}/namespaces/{namespace}/resourceclaimtemplates",
                    body={**template, "metadata": metadata},
                )
            except KubeError as error:
                if error.status != 409:  # 409: made for an earlier try
                    raise
        if secret is not None:
            await create_or_replace(kube, secrets, secret)
            owned.append(f"{secrets}/{secret['metadata']['name']}")
        created = await create_or_adopt(kube, f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
    except BaseException:  # no Job to own the ConfigMap and Secret: remove them here
        for path in owned:
            with contextlib.suppress(Exception):
                await kube.request("DELETE", path)
        raise
    job_made()
    for path in owned:
        await kube.request(
            "PATCH",
            path,
            body={"metadata": {"ownerReferences": [owner_reference(created)]}},
            content_type="application/merge-patch+json",
        )
    if service is not None:  # owned by the Job from the start: nothing to remove by hand
        metadata = {**service["metadata"], "ownerReferences": [owner_reference(created)]}
        services = f"/api/v1/namespaces/{namespace}/services"
        await create_or_adopt(kube, services, {**service, "metadata": metadata})
    return created
