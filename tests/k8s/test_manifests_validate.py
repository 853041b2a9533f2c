"""Every manifest GPUSpawner and the KubernetesExecutor render is valid Kubernetes (issue 12, item 7).

For every sharing back end, at a quarter and at one whole GPU, the server pod (as GPUSpawner
asks KubeSpawner to create it), the job's Job, ConfigMaps and upload Secret (as the executor
builds them from the job's Grant) and DRA's ResourceClaimTemplates are validated with
``kubernetes-validate`` against the OpenAPI schemas of Kubernetes 1.32, 1.33 and 1.34,
strictly: a field the API does not have is an error, as with the API server's strict field
validation.

``resource.k8s.io`` is served as v1beta1 from 1.32, v1beta2 from 1.33 and v1 (GA) from 1.34,
so the DRA back end is given the version the cluster serves (``claim_api_version``), and its
default, v1, is shown to be unknown to 1.32 and 1.33.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from gpuspawner.backends import BACKENDS
from gpuspawner.core.admission import GPUAdmission
from gpuspawner.core.grant import Grant
from gpuspawner.policy import CapacityPool, GPUDevice, UserIdentity
from gpuspawner.spawners.kubernetes import GPUSpawner
from jupyter_to_job.k8s_objects import (
    PodUser,
    UserFiles,
    job_object_name,
    make_configmap,
    make_job,
    make_upload_secret,
)
from tests.support.course_catalogs import catalog, course, minute, now
from tests.support.k8s_spawners import make_gpu_spawner, write_class_catalog

VERSIONS = ("1.32", "1.33", "1.34")
CLAIM_API_VERSION = {
    "1.32": "resource.k8s.io/v1beta1",
    "1.33": "resource.k8s.io/v1beta2",
    "1.34": "resource.k8s.io/v1",
}
"""The newest ``resource.k8s.io`` version each Kubernetes version serves."""

SHARES = {
    "quarter": "{fraction: 1/4, memory: 10GiB, compute: {min: 25, max: 100}}",
    "whole": "{count: 1}",
}
SETTINGS: dict[str, dict[str, Any]] = {
    "time-slicing": {"replicas": 4},
    "mps": {"replicas": 4},
    "mig": {"strategy": "mixed"},
    "kai": {"queue": "{course}"},
}
CASES = [
    (backend, size)
    for backend in BACKENDS
    for size in SHARES
    # A whole-GPU-only cluster refuses a quarter before anything is rendered.
    if (backend, size) != ("whole", "quarter")
]

JOB_ID = "3f2a1b4c-0000-4000-8000-000000000001"
NOTEBOOKS = {
    "text": json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}),
    "binary": b"\xff\xfe not UTF-8",
}
HOME = UserFiles(
    volumes=(
        {"name": "home", "persistentVolumeClaim": {"claimName": "claim-alice"}},
        {"name": "course-data", "nfs": {"server": "files.uni.edu", "path": "/ml101"}},
    ),
    mounts=(
        {"name": "home", "mountPath": "/home/jovyan"},
        {"name": "course-data", "mountPath": "/data", "readOnly": True},
    ),
    root="/home/jovyan",
    notebook_folder="projects/ml",
)
JOB_OPTIONS: list[dict[str, Any]] = [
    {},
    # On a Kueue cluster, with the job service's own account and a priority class
    {"queue_name": "gpu-jobs", "service_account": "jobs", "priority_class_name": "batch"},
    # As the user, in their home and course data, sending its outputs back to the service
    {
        "user": PodUser(uid=1234, gid=100, fs_gid=100),
        "files": HOME,
        "upload_url": "http://jupyter-to-job:8890/services/jupyter-to-job/",
    },
]


def backend_settings(backend: str, version: str) -> dict[str, Any]:
    """The back end's settings on a cluster of ``version``."""
    settings = dict(SETTINGS.get(backend, {}))
    if backend == "dra":
        settings["claim_api_version"] = CLAIM_API_VERSION[version]
    return settings


def invalid(manifests: list[dict[str, Any]], version: str) -> dict[str, str]:
    """Why each manifest the ``version`` API would refuse is refused, by kind and name."""
    errors = {}
    for manifest in manifests:
        try:
            kubernetes_validate.validate(manifest, version, strict=True)
        except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as e:
            where = f"{version} {manifest['kind']} {manifest['metadata'].get('name')}"
            errors[where] = getattr(e, "message", str(e))
    return errors


async def server_manifests(
    backend: str, size: str, version: str, tmp_path: Path
) -> list[dict[str, Any]]:
    """The pod GPUSpawner creates for ana's ML101 server, and its claim templates."""
    GPUSpawner._inventories.clear()
    path = write_class_catalog(tmp_path / f"{backend}-{version}.yaml", ["ana"], share=SHARES[size])
    spawner = make_gpu_spawner(
        "ana",
        path,
        sharing_backend=backend,
        sharing_backend_config=backend_settings(backend, version),
    )
    await spawner.ensure_inventory()
    grant = spawner.decide_start()
    spawner.hold_grant(grant)
    pod = spawner.api.api_client.sanitize_for_serialization(await spawner.get_pod_manifest())
    templates = grant.plan.resource_claim_templates if grant.plan else []
    return [{"apiVersion": "v1", "kind": "Pod", **pod}, *templates]


def job_grant(backend: str, size: str, version: str, tmp_path: Path) -> Grant:
    """The hub's grant of a job of the ``size`` flavor, as the job service receives it."""
    start = minute(now())
    text = catalog(course("ml101", start=start, end=start + timedelta(hours=1), students=["alice"]))
    flavors = f"""
flavors:
  - {{id: {size}-job, title: A job, gpu: {SHARES[size]}, access: {{everyone: true}},
     resources: {{cpu: 2, memory: 8GiB}}}}
"""
    path = tmp_path / f"{backend}-{version}-jobs.yaml"
    path.write_text(text + flavors)
    admission = GPUAdmission(
        catalog_path=str(path),
        target="kubernetes",
        sharing_backend=backend,
        sharing_backend_config=backend_settings(backend, version),
    )
    pool = CapacityPool([GPUDevice("gpu-node-0/0", 0, "A100-SXM4-80GB", 81920)])
    return admission.grant_job(
        pool,
        UserIdentity("alice.smith@uni.edu"),
        f"{size}-job",
        key=f"job:{JOB_ID}",
        now=now(),
        running_jobs=[],
        object_name=job_object_name(JOB_ID),
    )


def job_manifests(grant: Grant, **options: Any) -> list[dict[str, Any]]:
    """The Job, its ConfigMaps, upload Secret and claim templates the executor creates."""
    assert grant.plan is not None and grant.allocation is not None
    plan = dataclasses.replace(grant.plan, environment=grant.environment)
    job = make_job(
        job_id=JOB_ID,
        owner=grant.owner,
        image="registry.example.edu/ml101:2025",
        plan=plan,
        flavor=grant.subject,
        cpu=grant.limits.cpu,
        memory_bytes=grant.limits.memory_bytes,
        deadline_seconds=3600,
        environment={"HF_HOME": "/home/jovyan/.cache"},
        allocation=grant.allocation.to_dict(),
        namespace="jupyter",
        node_name=grant.node,
        image_pull_policy="IfNotPresent",
        work_size="20Gi",
        **options,
    )
    configmaps = [
        make_configmap(
            job_id=JOB_ID,
            owner=grant.owner,
            notebook=notebook if isinstance(notebook, bytes) else notebook.encode(),
            spec=json.dumps({"job_id": JOB_ID, "input": "analysis.ipynb"}),
            namespace="jupyter",
        )
        for notebook in NOTEBOOKS.values()
    ]
    secrets = []
    if options.get("upload_url"):
        secrets.append(
            make_upload_secret(job_id=JOB_ID, owner=grant.owner, token="t0k3n", namespace="jupyter")
        )
    return [job, *configmaps, *secrets, *plan.resource_claim_templates]


@pytest.mark.usefixtures("kubespawner_env")
@pytest.mark.parametrize("backend, size", CASES, ids="-".join)
async def test_the_server_pod_and_its_claims_are_valid_on_kubernetes_1_32_to_1_34(
    k8s_controls, tmp_path, backend, size
):
    # Given an A100 80GB node, and a cluster of each supported version
    k8s_controls.add_gpu_nodes(1, gpu_count=2, mig_capable=True)
    errors: dict[str, str] = {}
    kinds = set()
    for version in VERSIONS:
        # When ana's course server is rendered for that cluster
        manifests = await server_manifests(backend, size, version, tmp_path)
        kinds |= {m["kind"] for m in manifests}
        errors |= invalid(manifests, version)
    # Then that version's API accepts every object, DRA's claim templates too
    assert errors == {}
    assert kinds == ({"Pod", "ResourceClaimTemplate"} if backend == "dra" else {"Pod"})


@pytest.mark.parametrize("backend, size", CASES, ids="-".join)
def test_the_job_its_configmap_and_claims_are_valid_on_kubernetes_1_32_to_1_34(
    tmp_path, backend, size
):
    errors: dict[str, str] = {}
    kinds = set()
    for version in VERSIONS:
        # Given the hub's grant of a job on a cluster of that version
        grant = job_grant(backend, size, version, tmp_path)
        for options in JOB_OPTIONS:
            # When the executor builds its objects (plain, and queued by Kueue)
            manifests = job_manifests(grant, **options)
            kinds |= {m["kind"] for m in manifests}
            errors |= invalid(manifests, version)
    # Then that version's API accepts every one of them
    assert errors == {}
    expected = {"Job", "ConfigMap", "Secret"} | (
        {"ResourceClaimTemplate"} if backend == "dra" else set()
    )
    assert kinds == expected


def test_a_v1_claim_template_is_unknown_before_kubernetes_1_34(tmp_path):
    # Given the DRA back end's default, resource.k8s.io/v1
    grant = job_grant("dra", "quarter", "1.34", tmp_path)
    assert grant.plan is not None
    template = grant.plan.resource_claim_templates[0]
    assert template["apiVersion"] == "resource.k8s.io/v1"

    # Then 1.32 and 1.33 do not serve it, and 1.34 accepts it
    for version in ("1.32", "1.33"):
        with pytest.raises(kubernetes_validate.SchemaNotFoundError):
            kubernetes_validate.validate(template, version, strict=True)
    kubernetes_validate.validate(template, "1.34", strict=True)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_check_refuses_a_field_the_api_does_not_have(tmp_path, version):
    # Given valid objects of every kind checked here, each with one misspelt field
    grant = job_grant("dra", "quarter", version, tmp_path)
    job, configmap, _, template = job_manifests(grant)
    pod_spec = copy.deepcopy(job["spec"]["template"])
    pod = {"apiVersion": "v1", "kind": "Pod", **pod_spec}
    pod["metadata"]["name"] = "jupyter-ana"
    assert invalid([job, configmap, template, pod], version) == {}
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limit"] = {"cpu": "1"}
    configmap["metadata"]["label"] = {"a": "b"}
    template["spec"]["spec"]["devices"]["requests"][0]["counts"] = 2
    pod["spec"]["schedulername"] = "kai-scheduler"

    # Then the check names every one of them
    assert set(invalid([job, configmap, template, pod], version)) == {
        f"{version} Job {job['metadata']['name']}",
        f"{version} ConfigMap {configmap['metadata']['name']}",
        f"{version} ResourceClaimTemplate {template['metadata']['name']}",
        f"{version} Pod jupyter-ana",
    }
