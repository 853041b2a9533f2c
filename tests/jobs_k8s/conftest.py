"""Jobs run "in Kubernetes": the emulator schedules the Job's pod, and its container really
runs the runner as a local process (``PodProcesses``), with the pod's volumes made as
local folders. The emulator fixtures (``k8s_cluster``, ``k8s_controls``, ``k8s_api``) come
from ``tests/conftest.py``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from jupyter_to_job.k8s_objects import job_selector
from jupyter_to_job.manager import JobManager
from tests.support.job_managers import ManagerFactory, shut_down
from tests.support.k8s_job_pods import JOB_PODS, PodProcesses, k8s_job_config, kill_kernels

HANG_GUARD = 60  # a broken test fails instead of hanging; never a timing assertion
Object = dict[str, Any]


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
    k8s_cluster: Any, tmp_path: Path, pods_dir: Path
) -> AsyncIterator[ManagerFactory]:
    """``await make_k8s_manager(**executor_traits)``: a started manager running Kubernetes Jobs."""
    managers: list[JobManager] = []

    async def make(*, root: Path | None = None, **executor: Any) -> JobManager:
        manager = JobManager(
            root_dir=str(root or tmp_path / "root"),
            config=k8s_job_config(k8s_cluster.kubeconfig, **executor),
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
    await client.CoreV1Api(k8s_api).create_namespaced_persistent_volume_claim(
        "default",
        {
            "metadata": {"name": "claim-alice"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "10Gi"}},
            },
        },
    )
    return await make_k8s_manager(home_pvc_name_template="claim-{username}")


async def job_pod(core: Any, job_id: str) -> Object | None:
    """The job's pod as the API has it (the first one), or None."""
    response = await core.list_namespaced_pod(
        "default", label_selector=job_selector(job_id), _preload_content=False
    )
    items = json.loads(await response.read())["items"]
    return items[0] if items else None
