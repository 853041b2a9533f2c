"""Job pods as local processes on the test cluster's nodes (tests and benchmarks).

:class:`PodProcesses` runs the containers of job pods with their volumes made as local
folders, so the runner really executes "in" the pod; :func:`kill_kernels` ends what a
real container's end would have taken along (a kernel left by a runner killed for memory);
:func:`make_home_claim` makes a user's home claim, bound to a volume, as the real
PersistentVolume controller wants it.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from traitlets.config import Config

from jupyter_to_job.executors.kubernetes import KubernetesExecutor

from .job_processes import kill_job_processes
from .k8s_emulator import PodMatch, ProcessRunner

POD_HOSTS = Path(__file__).parent / "cluster" / "pod_hosts.py"
JOB_PODS = PodMatch(labels="app.kubernetes.io/managed-by=jupyter-to-job")
IMAGE = "registry.example.edu/jobs:test"
CLAIM_GUARD = 60.0

Object = dict[str, Any]


@dataclass
class PodProcesses(ProcessRunner):
    """Runs job pods' containers locally, with their volumes as local folders.

    Every volume mount becomes ``<container dir>/fs/<mountPath>``: emptyDirs are empty
    folders, ConfigMap and Secret keys files with their data (as read by the node's
    kubelet). A PersistentVolumeClaim is one folder for every pod that mounts it,
    ``<volumes_dir>/<namespace>/<claim>`` (its ``subPath`` under it): what a job writes
    on the user's home claim is there for the next pod, and for the test, to see. Command
    arguments and the working directory under a mount, and the termination message path,
    are mapped there; the image's ``python`` is this interpreter.
    """

    volumes_dir: Path | None = None
    """Where PersistentVolumeClaims live; None: ``<workdir>/volumes``."""
    hosts: Any = None
    """A callable: the namespace's hosts file (the node agent's ServiceProxy.hosts_file),
    each container's ``/etc/hosts`` (root only, cluster/pod_hosts.py); None: this
    machine's."""

    def claim_folder(self, namespace: str, claim: str) -> Path:
        """The local folder of PersistentVolumeClaim ``claim`` (made on first use)."""
        root = self.volumes_dir or (self.workdir or Path("/tmp/k8s-emulator-pods")) / "volumes"
        folder = root / namespace / claim
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def prepare(
        self,
        pod: Object,
        container: Object,
        env: dict[str, str],
        volumes: dict[str, dict[str, bytes]] | None = None,
    ) -> tuple[list[str], dict[str, str], Path]:
        argv, environment, cwd = super().prepare(pod, container, env, volumes)
        root = cwd / "fs"
        namespace = pod["metadata"].get("namespace", "default")
        files = volumes or {}
        volumes = {volume["name"]: volume for volume in pod["spec"].get("volumes") or []}
        mounts: dict[str, Path] = {}
        for mount in sorted(container.get("volumeMounts") or [], key=lambda m: m["mountPath"]):
            local = root / mount["mountPath"].lstrip("/")
            volume = volumes[mount["name"]]
            if "configMap" in volume or "secret" in volume:
                data = files.get(mount["name"], {})
                keys = [mount["subPath"]] if "subPath" in mount else list(data)
                for key in keys:
                    target = local if "subPath" in mount else local / key
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data[key])
                    target.chmod(0o444)  # mounted read-only
            elif "persistentVolumeClaim" in volume:
                claim = volume["persistentVolumeClaim"]["claimName"]
                local = self.claim_folder(namespace, claim) / mount.get("subPath", "")
                local.mkdir(parents=True, exist_ok=True)
            else:
                local.mkdir(parents=True, exist_ok=True)
            mounts[mount["mountPath"]] = local
        termination = container.get("terminationMessagePath") or "/dev/termination-log"
        mounts[termination] = root / termination.lstrip("/")
        mounts[termination].parent.mkdir(parents=True, exist_ok=True)

        def local_path(argument: str) -> str:
            for path in sorted(mounts, key=len, reverse=True):
                if argument == path or argument.startswith(path + "/"):
                    return str(mounts[path]) + argument[len(path) :]
            return argument

        argv = [sys.executable if a == "python" else local_path(a) for a in argv]
        if self.hosts is not None:
            hosts = str(self.hosts(namespace))
            argv = [sys.executable, str(POD_HOSTS), hosts, "--", *argv]
        workdir = Path(local_path(container.get("workingDir") or str(cwd)))
        return argv, environment, workdir


def kill_kernels(folder: Path) -> None:
    """Kill runners and kernels left by pods (a real container's end would take them along)."""
    kill_job_processes(folder.rglob("status.json"))


async def make_home_claim(api: Any, claim: str, namespace: str = "default") -> None:
    """PersistentVolumeClaim ``claim``, bound to a volume made for it (see :func:`provide_volume`),
    as the user's server made it when it first started."""
    await provide_volume(api, claim, namespace)
    core = client.CoreV1Api(api)
    body = {
        "metadata": {"name": claim},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "resources": {"requests": {"storage": "10Gi"}},
        },
    }
    # An earlier test's claim of that name may still be going (its protection finalizer
    # is removed once its last pod is gone).
    deadline = asyncio.get_running_loop().time() + CLAIM_GUARD
    while True:
        try:
            await core.create_namespaced_persistent_volume_claim(namespace, body)
            return
        except client.ApiException as error:
            if error.status != 409 or asyncio.get_running_loop().time() > deadline:
                raise
        await asyncio.sleep(0.1)


async def provide_volume(api: Any, claim: str, namespace: str = "default") -> None:
    """A PersistentVolume reserved for ``claim`` (``claimRef``), for the PersistentVolume
    controller to bind it to when it comes, as an admin provisions storage statically: the
    test cluster has no storage provisioner. Its ``hostPath`` is never used (the node agent
    gives a claim one local folder, :meth:`PodProcesses.claim_folder`)."""
    await client.CoreV1Api(api).create_persistent_volume(
        {
            "metadata": {"name": f"{claim}-{secrets.token_hex(4)}"},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "persistentVolumeReclaimPolicy": "Delete",
                "claimRef": {"namespace": namespace, "name": claim},
                "hostPath": {"path": f"/tmp/campus-test-volumes/{namespace}/{claim}"},
            },
        }
    )


def k8s_job_config(kubeconfig: Path, **executor: Any) -> Config:
    """Manager configuration running jobs as Kubernetes Jobs on ``kubeconfig``'s cluster."""
    config = Config()
    config.JobManager.executor_class = KubernetesExecutor
    config.JobManager.queue_poll_interval = 0.2
    config.LogStore.follow_interval = 0.05
    settings = {
        "kubeconfig": str(kubeconfig),
        "namespace": "default",
        "image": IMAGE,
        "poll_interval": 0.1,
        "stop_grace_seconds": 10.0,
        "default_cpu": 1.0,
        "default_memory": "1Gi",
        # No home volume unless a test gives one (home_pvc_name_template="claim-{username}",
        # z2jh's, with the PVC made): the jobs of benchmarks and older scenarios need none.
        "home_pvc_name_template": "",
        **executor,
    }
    for name, value in settings.items():
        setattr(config.KubernetesExecutor, name, value)
    return config
