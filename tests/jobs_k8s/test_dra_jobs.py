"""Scenarios: a GPU job on a cluster that shares GPUs with Dynamic Resource Allocation (the
``dra`` back end): it runs on the GPU the real scheduler allocated to its claim, its
ResourceClaimTemplate is made with its Job and goes with it, and a job service whose account
may not make one says so at once.

DRA nodes (``add_gpu_nodes(..., dra=True)``) publish their GPUs as NVIDIA's DRA driver does
(tests/support/cluster/dra.py); on the ``job_pods`` node no driver publishes any, so a job's
claim stays unallocated and its pod Pending.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
import yaml
from kubernetes_asyncio import client

from gpuspawner.core.admission import GPUAdmission
from gpuspawner.core.allocation_record import devices_from_nodes
from gpuspawner.policy import UserIdentity, load_catalog
from jupyter_to_job.k8s_objects import job_object_name, job_selector
from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, JobStatus
from jupyter_to_job.service.flavor_admission import FlavorAdmission, IdentityBook
from tests.support import eventually
from tests.support.cluster.identities import token_for
from tests.support.job_managers import ManagerFactory, finished
from tests.support.notebooks import notebook

CATALOG = "flavors:\n  - {id: a100, title: A100, gpu: {count: 1}, access: {everyone: true}}\n"
JOB_SERVICE = Path(__file__).resolve().parents[2] / "hub_config" / "kubernetes" / "job-service.yaml"


async def on_dra(manager: JobManager, k8s_api: Any, folder: Path) -> JobManager:
    """``manager`` admitting GPU jobs as the job service does with ``backends/dra.yaml``."""
    nodes = await client.CoreV1Api(k8s_api).list_node(_preload_content=False)
    (folder / "catalog.yaml").write_text(CATALOG)
    identities = IdentityBook(folder / "identities.json")
    identities.remember(UserIdentity("alice"))
    manager.capacity = FlavorAdmission(
        admission=GPUAdmission(
            fallback_catalog=load_catalog(folder / "catalog.yaml"),
            target="kubernetes",
            sharing_backend="dra",
        ),
        devices=devices_from_nodes(json.loads(await nodes.read())["items"]),
        identities=identities,
    )
    return manager


async def submit(manager: JobManager, code: str = "print('on the GPU')") -> str:
    request = CreateJob(input_path="train.ipynb", output_formats=["ipynb"], flavor="a100")
    nb = nbformat.writes(notebook(code))
    return (await manager.create("alice", request, notebook=nb)).job_id


async def templates(k8s_api: Any) -> list[str]:
    """The names of the ResourceClaimTemplates in ``default``, as the admin sees them."""
    response = await k8s_api.call_api(
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates",
        "GET",
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    assert response.status == 200, await response.text()
    return [item["metadata"]["name"] for item in json.loads(await response.read())["items"]]


async def job_objects(k8s_api: Any, job_id: str) -> list[str]:
    """The kinds of the job's Jobs and ConfigMaps still in ``default``."""
    selector = job_selector(job_id)
    jobs = await client.BatchV1Api(k8s_api).list_namespaced_job("default", label_selector=selector)
    maps = await client.CoreV1Api(k8s_api).list_namespaced_config_map(
        "default", label_selector=selector
    )
    return ["Job"] * len(jobs.items) + ["ConfigMap"] * len(maps.items)


async def test_a_dra_job_runs_on_the_gpu_allocated_to_its_claim_which_goes_when_it_ends(
    k8s_controls: Any,
    pod_processes: Any,
    make_k8s_manager: ManagerFactory,
    k8s_api: Any,
    tmp_path: Path,
) -> None:
    # Given the job service on a DRA cluster whose one A100 node publishes its GPU
    k8s_controls.add_gpu_nodes(1, dra=True, gpu_count=1)
    k8s_controls.run_processes(pod_processes)
    gpu = k8s_controls.call(lambda: k8s_controls.agent.dra.gpus["gpu-node-0"]["gpu-0"])
    manager = await on_dra(await make_k8s_manager(), k8s_api, tmp_path)

    # When alice's GPU job runs a notebook that prints the GPUs CUDA would see
    job_id = await submit(manager, "import os\nprint(os.environ['CUDA_VISIBLE_DEVICES'])")
    job = await finished(manager, job_id)

    # Then it completed on the GPU the scheduler allocated to its claim
    log = manager.read_log(job_id).data
    assert job.status is JobStatus.COMPLETED, log
    assert f"[cell 0] {gpu.uuid}" in log.splitlines()
    # and its pod done, its claim is deleted by the cluster
    await eventually(lambda: _no_claims(k8s_api), what="the job's claim to be deleted")


async def _no_claims(k8s_api: Any) -> bool:
    response = await k8s_api.call_api(
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims",
        "GET",
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    return not json.loads(await response.read())["items"]


async def test_a_dra_jobs_claim_template_goes_with_its_job(
    job_pods: Any, make_k8s_manager: ManagerFactory, k8s_api: Any, tmp_path: Path
) -> None:
    # Given the job service on a DRA cluster, and a GPU job waiting for its GPU
    manager = await on_dra(await make_k8s_manager(), k8s_api, tmp_path)
    job_id = await submit(manager)
    await eventually(
        lambda: (manager.describe(job_id).status_message or "").startswith("Waiting for room"),
        what="the job to wait for its GPU",
    )
    [template] = await templates(k8s_api)
    assert template.startswith(job_object_name(job_id))

    # When its owner stops it
    await manager.stop(job_id)
    assert (await finished(manager, job_id)).status is JobStatus.STOPPED

    # Then its Job, its ConfigMap and its ResourceClaimTemplate are all gone from the cluster
    async def nothing_left() -> bool:
        return not await job_objects(k8s_api, job_id) and not await templates(k8s_api)

    await eventually(nothing_left, what="the job's objects to be deleted")


@pytest.fixture
async def kubeconfig_without_dra(k8s_controls: Any, k8s_api: Any, tmp_path: Path) -> Path:
    """Credentials of a job service installed without the DRA part of job-service.yaml
    (its main Role only), as on a cluster of another back end."""
    account = "jupyter-to-job-no-dra"
    role = next(
        doc
        for doc in yaml.safe_load_all(JOB_SERVICE.read_text())
        if doc and doc["kind"] == "Role" and doc["metadata"]["name"] == "jupyter-to-job"
    )
    rbac = client.RbacAuthorizationV1Api(k8s_api)
    await client.CoreV1Api(k8s_api).create_namespaced_service_account(
        "default", {"metadata": {"name": account}}
    )
    await rbac.create_namespaced_role("default", {**role, "metadata": {"name": account}})
    await rbac.create_namespaced_role_binding(
        "default",
        {
            "metadata": {"name": account},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "default"}],
        },
    )
    plane = k8s_controls.plane
    return Path(
        plane.write_kubeconfig(
            tmp_path / "no-dra.kubeconfig",
            user=f"system:serviceaccount:default:{account}",
            token=token_for(plane, "default", account),
        )
    )


async def test_a_job_service_not_allowed_to_make_claim_templates_fails_the_job_saying_so(
    job_pods: Any,
    make_k8s_manager: ManagerFactory,
    kubeconfig_without_dra: Path,
    k8s_api: Any,
    tmp_path: Path,
) -> None:
    # Given a DRA cluster whose job service may not make ResourceClaimTemplates
    manager = await on_dra(
        await make_k8s_manager(kubeconfig=kubeconfig_without_dra), k8s_api, tmp_path
    )

    # When a GPU job is submitted
    job_id = await submit(manager)
    job = await finished(manager, job_id)

    # Then it fails at once, saying what the job service may not do and whom to tell
    assert job.status is JobStatus.FAILED
    assert job.status_message is not None
    assert job.status_message.startswith("The job service is not allowed to start jobs here: ")
    assert 'cannot create resource "resourceclaimtemplates"' in job.status_message
    assert job.status_message.endswith(
        "Tell the hub admins: the job service's Role lacks this permission."
    )
    # and nothing of it is left in the cluster
    assert await job_objects(k8s_api, job_id) == [] and await templates(k8s_api) == []
