"""Jobs run in Kubernetes: the session's real control plane (its Job controller, scheduler,
garbage collector and TTL controller) runs the Job, and the node agent runs its pod's
container as a local process (``PodProcesses``), with the pod's volumes made as local
folders. The cluster fixtures (``k8s_cluster``, ``k8s_controls``, ``k8s_api``,
``job_service_kubeconfig``) come from ``tests/support/k8s_cluster.py``.

The job manager talks to the cluster as the job service does in production: as service
account ``jupyter-to-job`` with exactly the Role of ``hub_config/kubernetes/job-service.yaml``
(``job_service_kubeconfig``); ``k8s_api`` (the cluster admin) only sets scenes up and looks.
Every test here that uses the cluster is marked ``k8s``: with ``KUBECONFIG`` set and
``-m k8s`` the ones that need no node controls run against that cluster.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_to_job.k8s_objects import job_selector
from jupyter_to_job.manager import JobManager
from tests.support.cluster.control_plane import AuditedRequest
from tests.support.cluster.session import ControlPlaneCluster
from tests.support.job_managers import ManagerFactory, shut_down
from tests.support.k8s_job_pods import (
    JOB_PODS,
    PodProcesses,
    k8s_job_config,
    kill_kernels,
    make_home_claim,
)

HANG_GUARD = 60  # a broken test fails instead of hanging; never a timing assertion
Object = dict[str, Any]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:  # the session's items: only this folder's are marked
        if here in item.path.parents and "k8s_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.k8s)


@pytest.fixture(autouse=True)
def job_service_refused_nothing(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each scenario on the test cluster: the API server refused none of the job
    service's requests (a 403 is a verb its Role in ``job-service.yaml`` lacks; the
    executor may only log it, so the audit log is the witness)."""
    if "k8s_cluster" not in request.fixturenames:
        yield
        return
    cluster = request.getfixturevalue("k8s_cluster")
    if not isinstance(cluster, ControlPlaneCluster):
        yield  # a real cluster: its audit log is not ours to read
        return
    audit = JobServiceAudit(cluster)
    yield
    refused = [r for r in audit.requests() if r.code == 403]
    assert refused == [], (
        "The API server refused the job service (403): its Role in "
        "hub_config/kubernetes/job-service.yaml lacks what these requests need."
    )


class JobServiceAudit:
    """The requests the job service's identity makes from now on, as the API server's
    audit log records them."""

    def __init__(self, cluster: ControlPlaneCluster) -> None:
        self.log = cluster.plane.audit_log
        self.user = cluster.identities["job-service"].user
        self.start = self.log.stat().st_size if self.log.exists() else 0

    def requests(self) -> list[AuditedRequest]:
        with self.log.open("rb") as log:
            log.seek(self.start)
            lines = log.read().splitlines()
        found = []
        for line in lines:
            event = json.loads(line)
            if event.get("user", {}).get("username") != self.user or "objectRef" not in event:
                continue
            ref = event["objectRef"]
            found.append(
                AuditedRequest(
                    user=self.user,
                    verb=event["verb"],
                    group=ref.get("apiGroup", ""),
                    resource=ref.get("resource", ""),
                    subresource=ref.get("subresource", ""),
                    namespace=ref.get("namespace", ""),
                    name=ref.get("name", ""),
                    code=int(event.get("responseStatus", {}).get("code", 0)),
                )
            )
        return found


@pytest.fixture
def pods_dir(tmp_path: Path) -> Path:
    return tmp_path / "pods"


@pytest.fixture
def pod_processes(k8s_controls: Any, pods_dir: Path) -> PodProcesses:
    """What runs job pods' containers as local processes (and holds their PVCs' folders)."""
    return PodProcesses(match=JOB_PODS, workdir=pods_dir)


@pytest.fixture
def job_pods(k8s_controls: Any, pods_dir: Path, pod_processes: PodProcesses) -> Any:
    """The cluster's nodes, with job pods running as local processes."""
    k8s_controls.add_gpu_nodes(1, product="NVIDIA-A100-SXM4-80GB", gpu_count=4)
    k8s_controls.run_processes(pod_processes)
    yield k8s_controls
    kill_kernels(pods_dir)


@pytest.fixture
async def make_k8s_manager(
    job_service_kubeconfig: Path, tmp_path: Path, pods_dir: Path
) -> AsyncIterator[ManagerFactory]:
    """``await make_k8s_manager(**executor_traits)``: a started manager running Kubernetes
    Jobs with the job service's own credentials (or ``kubeconfig=``'s)."""
    managers: list[JobManager] = []

    async def make(
        *, root: Path | None = None, kubeconfig: Path | None = None, **executor: Any
    ) -> JobManager:
        manager = JobManager(
            root_dir=str(root or tmp_path / "root"),
            config=k8s_job_config(kubeconfig or job_service_kubeconfig, **executor),
        )
        await manager.start()
        managers.append(manager)
        return manager

    yield make
    await shut_down(managers, timeout=HANG_GUARD)
    kill_kernels(pods_dir)


@pytest.fixture
async def home_claim_manager(
    job_pods: Any, make_k8s_manager: ManagerFactory, k8s_api: Any
) -> JobManager:
    """The job service running Kubernetes Jobs in their owner's home claim (z2jh's
    ``claim-{username}``), with alice's claim made."""
    await make_home_claim(k8s_api, "claim-alice")
    return await make_k8s_manager(home_pvc_name_template="claim-{username}")


async def job_pod(core: Any, job_id: str) -> Object | None:
    """The job's pod as the API has it (the first one), or None."""
    response = await core.list_namespaced_pod(
        "default", label_selector=job_selector(job_id), _preload_content=False
    )
    items = json.loads(await response.read())["items"]
    return items[0] if items else None
