"""Scenarios: job pods meet the Pod Security "restricted" standard, as the API server judges it.

The users' namespace enforces ``baseline`` and warns on ``restricted``; a job runs a user's
code, so its pod must meet ``restricted`` whatever its GPU share and volumes. The Job is
rendered by ``make_job`` as the executor renders it (the user's home, the upload token,
a checkpoint, each sharing back end's plan), then:

- its pod template is created as a Pod, dry run, in a namespace that *enforces*
  ``restricted``: the API server refuses it (403) naming each violation if it fails;
- the Job itself is created, dry run, in a namespace like the users' (``warn: restricted``):
  the API server answers with no ``Warning`` header.

Dry runs need no node and leave nothing behind, so these run on any cluster (``-m k8s``
with ``KUBECONFIG``). Set-up is the admin's (``k8s_api``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from gpuspawner.backends import PodGPUPlan, UnsupportedShare, cpu_only_plan, make_backend
from gpuspawner.policy.catalog_models import JobFlavor
from jupyter_to_job.k8s_objects import (
    PodCheckpoint,
    PodUser,
    UserFiles,
    job_object_name,
    make_job,
)

SHIPPED_BACKENDS = Path(__file__).resolve().parents[2] / "hub_config" / "kubernetes" / "backends"
JOB_ID = "5b7c2d1e-0000-4000-8000-000000000002"
A100 = "NVIDIA A100-SXM4-80GB"
HOME = {"name": "home", "persistentVolumeClaim": {"claimName": "claim-rhea"}}
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}


def gpu_plan(overlay: Path) -> PodGPUPlan:
    """What the back end of a shipped overlay (``backends/<name>.yaml``, as the hub and the
    job service are installed with it) renders for a quarter of an A100, or a whole one
    where it gives no fractions."""
    admission = yaml.safe_load(overlay.read_text())["hub"]["config"]["GPUAdmission"]
    backend = make_backend(
        admission["sharing_backend"], **(admission.get("sharing_backend_config") or {})
    )
    for gpu in ({"fraction": "1/4", "model": ["A100"]}, {"count": 1}):
        share = JobFlavor.model_validate({"id": "gpu", "title": "GPU", "gpu": gpu}).share
        assert share is not None
        try:
            return backend.render(
                share, gpu_model=A100, gpu_memory_mib=81920, name=f"{job_object_name(JOB_ID)}-gpu"
            )
        except UnsupportedShare:
            continue
    raise AssertionError(f"{overlay.name}'s back end renders neither a quarter nor a whole GPU")


def rendered_job(plan: PodGPUPlan, namespace: str) -> dict[str, Any]:
    """A job as the executor renders it by default: as the user (uid 1000, gid 100), in
    their home, sending its outputs back, resuming from a checkpoint."""
    return make_job(
        job_id=JOB_ID,
        owner="rhea",
        image="registry.example.edu/jobs:test",
        plan=plan,
        cpu=1,
        memory_bytes=1024**3,
        namespace=namespace,
        user=PodUser(),
        files=UserFiles(
            volumes=(HOME,),
            mounts=({"name": "home", "mountPath": "/home/jovyan"},),
            root="/home/jovyan",
            notebook_folder="project",
        ),
        upload_url=f"http://jupyter-to-job:8766/services/jupyter-to-job/api/jobs/{JOB_ID}/uploads/",
        checkpoint=PodCheckpoint(path="/home/jovyan/project/ckpt", retries=1),
    )


def plans() -> dict[str, PodGPUPlan]:
    """A job without GPU, and one on each shipped sharing back end."""
    shipped = sorted(SHIPPED_BACKENDS.glob("*.yaml"))
    assert shipped, f"no shipped back ends in {SHIPPED_BACKENDS}"
    return {"no GPU": cpu_only_plan(), **{overlay.stem: gpu_plan(overlay) for overlay in shipped}}


@pytest.fixture
async def restricted_namespace(k8s_api: Any, k8s_namespace: str) -> str:
    """A fresh namespace that enforces Pod Security ``restricted``."""
    await client.CoreV1Api(k8s_api).patch_namespace(
        k8s_namespace, {"metadata": {"labels": RESTRICTED}}
    )
    return k8s_namespace


async def test_job_pods_are_admitted_where_restricted_is_enforced(
    k8s_api: Any, restricted_namespace: str
) -> None:
    # Given each job's pod, as its Job's template makes it
    refused = {}
    for name, plan in plans().items():
        job = rendered_job(plan, restricted_namespace)
        template = job["spec"]["template"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**template["metadata"], "name": f"{job['metadata']['name']}-dry-run"},
            "spec": template["spec"],
        }

        # When it is created in a namespace that enforces "restricted" (dry run)
        response = await client.CoreV1Api(k8s_api).create_namespaced_pod(
            restricted_namespace, pod, dry_run="All", _preload_content=False
        )
        if response.status != 201:
            refused[name] = (response.status, json.loads(await response.read()).get("message"))

    # Then the API server admitted every one
    assert refused == {}


async def test_jobs_in_the_users_namespace_draw_no_pod_security_warning(
    k8s_api: Any, k8s_namespace: str
) -> None:
    # Given a namespace like the users' (baseline enforced, restricted warned about)
    warned = {}
    for name, plan in plans().items():
        # When each job's Job is created there (dry run)
        response = await client.BatchV1Api(k8s_api).create_namespaced_job(
            k8s_namespace, rendered_job(plan, k8s_namespace), dry_run="All", _preload_content=False
        )
        assert response.status == 201, (name, await response.text())
        warnings = response.headers.getall("Warning", [])
        if warnings:
            warned[name] = warnings

    # Then the API server warned about none
    assert warned == {}
