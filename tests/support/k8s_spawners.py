"""Spawners built in the test process against the cluster of ``kubespawner_env``.

They are made as KubeSpawner's own cluster tests make them: no hub, a stand-in user
(:class:`~tests.support.hub_users.HubUser`), and a notebook image the node agent never pulls.
"""

from __future__ import annotations

import asyncio
import secrets
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from jupyterhub.objects import Hub
from kubernetes_asyncio import client
from kubespawner import KubeSpawner
from traitlets.config import Config

from gpuspawner.core.admission import GPUAdmission
from gpuspawner.spawners.kubernetes import GPUSpawner

from . import course_catalogs
from .cluster.control_plane import AuditedRequest, audited_requests
from .hub_users import HubUser

S = TypeVar("S", bound=KubeSpawner)

IMAGE = "quay.io/jupyter/base-notebook:2025-01-06"


def class_catalog(
    students: list[str],
    *,
    share: str = "{fraction: 1/4}",
    seats: int = 100,
    course_lines: str = "",
    sections: str = "",
) -> str:
    """A catalog whose course ML101 (``ml101``) is in class now, for ``students`` at ``share``;
    ``course_lines`` go into the course's block, ``sections`` after the catalog."""
    start = course_catalogs.minute(course_catalogs.now())
    course = course_catalogs.course(
        "ml101",
        start=start - timedelta(minutes=10),
        end=start + timedelta(minutes=120),
        students=students,
        gpu=share,
        seats=seats,
    )
    return course_catalogs.catalog(course + course_lines) + sections


def write_class_catalog(
    path: Path, students: list[str], *, share: str = "{fraction: 1/4}", seats: int = 100
) -> Path:
    """A catalog whose course ML101 (``ml101``) is in class now, for ``students`` at ``share``."""
    path.write_text(class_catalog(students, share=share, seats=seats))
    return path


def make_gpu_spawner(
    user: str, catalog: Path, *, profile: str = "ml101", **traits: Any
) -> GPUSpawner:
    """A GPUSpawner for ``user`` choosing ``profile``, GPUs shared four ways by time-slicing.
    ``traits``: the spawner's, and the admission's (``catalog_path``, ``sharing_backend``...),
    each set in its one place."""
    config = Config()
    config.GPUSpawner.namespace = "default"
    config.GPUSpawner.cmd = ["jupyterhub-singleuser"]
    config.GPUSpawner.image = IMAGE
    config.GPUSpawner.start_timeout = 60
    config.GPUAdmission.catalog_path = str(catalog)
    config.GPUAdmission.sharing_backend = "time-slicing"
    config.GPUAdmission.sharing_backend_config = {"replicas": 4, "gfd_labels": False}
    admission_settings = GPUAdmission.class_trait_names(config=True)
    for key, value in traits.items():
        section = config.GPUAdmission if key in admission_settings else config.GPUSpawner
        setattr(section, key, value)
    spawner = without_a_hub(GPUSpawner, user, config)
    spawner.user_options = {"profile": profile}
    return spawner


def make_kube_spawner(user: str, **traits: Any) -> KubeSpawner:
    """A plain KubeSpawner for ``user``, configured as KubeSpawner's own tests do."""
    config = Config()
    config.KubeSpawner.namespace = "default"
    config.KubeSpawner.cmd = ["jupyterhub-singleuser"]
    config.KubeSpawner.image = IMAGE
    config.KubeSpawner.start_timeout = 30
    for key, value in traits.items():
        setattr(config.KubeSpawner, key, value)
    return without_a_hub(KubeSpawner, user, config)


def without_a_hub(spawner_class: type[S], user: str, config: Config) -> S:
    """A spawner built as KubeSpawner's own tests build one: no hub process, a stand-in user."""
    return spawner_class(
        hub=Hub(),
        user=HubUser(user),
        config=config,
        api_token="abc123",
        oauth_client_id="unused",
        _mock=True,
    )


class ProgressLog:
    """The progress events a spawner's ``progress()`` yields, collected in the background
    as the spawn page would read them (start it right after ``start()``)."""

    def __init__(self, spawner: KubeSpawner) -> None:
        self.messages: list[str] = []
        self._task = asyncio.ensure_future(self._follow(spawner))

    async def _follow(self, spawner: KubeSpawner) -> None:
        async for event in spawner.progress():
            self.messages.append(event.get("message", ""))

    def last(self, containing: str) -> str | None:
        """The latest message that contains ``containing``."""
        return next((m for m in reversed(self.messages) if containing in m), None)

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def provide_volume(
    admin: client.ApiClient,
    *,
    claim: str | None = None,
    storage_class: str = "",
    access_modes: tuple[str, ...] = ("ReadWriteOnce",),
    capacity: str = "10Gi",
) -> str:
    """A PersistentVolume as a cluster admin provisions one (the test cluster has no
    storage provisioner), through ``admin`` (the admin's ApiClient); its name.

    With ``claim``, it is reserved for that claim in ``default`` (the claim binds as soon
    as it exists); without, the first claim of ``storage_class`` that fits binds it. The
    node agent mounts nothing, so a hostPath under /tmp stands for the storage.
    """
    name = f"pv-{secrets.token_hex(4)}"
    spec: dict[str, Any] = {
        "capacity": {"storage": capacity},
        "accessModes": list(access_modes),
        "storageClassName": storage_class,
        "persistentVolumeReclaimPolicy": "Retain",
        "hostPath": {"path": f"/tmp/{name}"},
    }
    if claim is not None:
        spec["claimRef"] = {"namespace": "default", "name": claim}
    await client.CoreV1Api(admin).create_persistent_volume(
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}
    )
    return name


async def provide_storage_class(admin: client.ApiClient, name: str) -> None:
    """A StorageClass whose volumes the admin provisions by hand and whose claims bind when
    their first pod is scheduled (``WaitForFirstConsumer``, as most clusters' default)."""
    await client.StorageV1Api(admin).create_storage_class(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    )


class AuditTail:
    """The requests ``user`` makes from now on, as the API server's audit log writes them
    (``ControlPlaneCluster.plane.audit_log``): what one test's hub asked the cluster for,
    whatever ran before it in the session."""

    def __init__(self, log: Path, user: str) -> None:
        self.log = log
        self.user = user
        self.start = len(self._lines())

    def _lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def requests(self) -> list[AuditedRequest]:
        # Whole lines only: the API server may be writing the last one.
        lines = [line for line in self._lines()[self.start :] if line.endswith("}")]
        with tempfile.NamedTemporaryFile("w", suffix=".log") as tail:
            tail.write("".join(f"{line}\n" for line in lines))
            tail.flush()
            return audited_requests(Path(tail.name), self.user)
