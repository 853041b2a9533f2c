"""The settings of the KubernetesExecutor (``c.KubernetesExecutor.*``), one trait each.

Kept apart from the executor's work so that each file has one job; the executor subclasses
this, so ``c.KubernetesExecutor.<name>`` configures them as before.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from traitlets import Bool, Callable, Dict, Float, Integer, List, Unicode, Union, default

from ..k8s_objects import MAX_JOB_FILES_BYTES, PodUser
from .base import JobExecutor
from .kube_client import connect

_IN_CLUSTER_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


class KubernetesExecutorSettings(JobExecutor):
    """What ``c.KubernetesExecutor`` configures: the cluster, the pods, the user's files."""

    # Jobs and servers share the cluster's one GPU pool (``cluster_pool_reader``).
    uses_cluster_gpu_pool = True

    @classmethod
    def cluster_pool_reader(cls, config: Any) -> Any:
        """An async function reading the cluster's nodes and the jobs' namespace's pods.

        The job service rebuilds its GPU pool from them (``FlavorAdmission.cluster``), the
        servers' and jobs' allocation records alike. ``config`` is the service's config;
        ``c.KubernetesExecutor.kubeconfig`` and ``.namespace`` apply as for the jobs.
        """
        settings = config.get(cls.__name__) or {}
        kubeconfig = settings.get("kubeconfig") or None
        namespace = settings.get("namespace") or cls._default_namespace(None)  # type: ignore[arg-type]

        async def read() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            kube = await connect(kubeconfig)
            try:
                nodes = await kube.get("/api/v1/nodes") or {}
                pods = await kube.get(f"/api/v1/namespaces/{namespace}/pods") or {}
            finally:
                await kube.close()
            return list(nodes.get("items") or []), list(pods.get("items") or [])

        return read

    kubeconfig = Unicode(
        "",
        help="""The kubeconfig file to use; empty: ``$KUBECONFIG``, ``~/.kube/config``, or the
        pod's service account when the job service runs in the cluster.

        Example: ``c.KubernetesExecutor.kubeconfig = "/etc/jupyter-to-job/kubeconfig"``.
        """,
    ).tag(config=True)

    namespace = Unicode(
        help="""The namespace jobs run in; defaults to the job service's own namespace in the
        cluster, else ``default``. The job service counts the GPU slices of the pods in this
        namespace (its jobs and the hub's servers): run both in one namespace, as Zero to
        JupyterHub does, for one GPU pool.

        Example: ``c.KubernetesExecutor.namespace = "jobs"``.
        """,
    ).tag(config=True)

    @default("namespace")
    def _default_namespace(self) -> str:
        try:
            return Path(_IN_CLUSTER_NAMESPACE).read_text().strip() or "default"
        except OSError:
            return "default"

    image = Unicode(
        "",
        help="""The image of jobs whose flavor names none. It needs this package (the runner,
        ``python -m jupyter_to_job.runner``) and the notebooks' kernels, for instance
        ``FROM quay.io/jupyter/scipy-notebook`` plus ``pip install campus-gpu-hub``.

        Example: ``c.KubernetesExecutor.image = "registry.example.edu/jobs:2025.1"``.
        """,
    ).tag(config=True)

    image_pull_policy = Unicode(
        "",
        help="""``Always``, ``IfNotPresent`` or ``Never``; empty: the cluster's default.

        Example: ``c.KubernetesExecutor.image_pull_policy = "IfNotPresent"``.
        """,
    ).tag(config=True)

    service_account = Unicode(
        None,
        allow_none=True,
        help="""The service account of job pods. None (the default): the namespace's default,
        and no token is mounted either way.

        Example: ``c.KubernetesExecutor.service_account = "notebook-jobs"``.
        """,
    ).tag(config=True)

    queue_name = Unicode(
        None,
        allow_none=True,
        help="""A Kueue LocalQueue: Jobs are created suspended with the
        ``kueue.x-k8s.io/queue-name`` label, and Kueue starts them as quota allows.

        Example: ``c.KubernetesExecutor.queue_name = "ml101-jobs"``.
        """,
    ).tag(config=True)

    priority_class_name = Unicode(
        None,
        allow_none=True,
        help="""A PriorityClass for job pods, below interactive servers.

        Example: ``c.KubernetesExecutor.priority_class_name = "batch-low"``.
        """,
    ).tag(config=True)

    pin_to_node = Bool(
        True,
        help="""Pin a GPU job to the node whose GPU the capacity pool chose (when device ids
        are ``<node>/<index>``, as the hub reads them from node labels).

        Example: ``c.KubernetesExecutor.pin_to_node = False``.
        """,
    ).tag(config=True)

    default_cpu = Float(
        1.0,
        help="CPU cores of jobs whose flavor sets none: ``c.KubernetesExecutor.default_cpu = 2``.",
    ).tag(config=True)

    default_memory = Unicode(
        "2Gi",
        help="""Memory of jobs whose flavor sets none (request and limit):
        ``c.KubernetesExecutor.default_memory = "4Gi"``.""",
    ).tag(config=True)

    shm_size = Unicode(
        "1Gi",
        help="""Size limit of the in-memory ``/dev/shm`` (PyTorch DataLoader workers need more
        than the container runtime's 64 MiB): ``c.KubernetesExecutor.shm_size = "2Gi"``.""",
    ).tag(config=True)

    backoff_limit = Integer(
        0,
        help="""Retries of a failed pod. 0: a notebook runs at most once, side effects
        included: ``c.KubernetesExecutor.backoff_limit = 1``. The Job controller starts
        each retry from the first cell, after its back-off (10 s, then doubling); the job's
        log says so. A job with a checkpoint has its own retries instead
        (``c.JobManager.max_job_retries`` bounds them).""",
    ).tag(config=True)

    ttl_seconds_after_finished = Integer(
        3600,
        help="""Seconds a finished Job (and its pod, and its log in the cluster) is kept after
        the job service has stored the log and result; set then, never at creation.

        Example: ``c.KubernetesExecutor.ttl_seconds_after_finished = 86400``.
        """,
    ).tag(config=True)

    scheduling_timeout_seconds = Float(
        300.0,
        help="""How long a job's pod may wait for a node (FailedScheduling) before the job
        fails with the scheduler's reason: ``c.KubernetesExecutor.scheduling_timeout_seconds
        = 900``. Jobs queued by Kueue wait for admission without this limit.""",
    ).tag(config=True)

    api_timeout = Float(
        30.0,
        help="Seconds one Kubernetes API request may take: ``c.KubernetesExecutor.api_timeout = 60``.",
    ).tag(config=True)

    log_idle_timeout = Float(
        300.0,
        help="""Reopen a followed log that has been silent this long (a stalled connection
        looks the same as a quiet notebook): ``c.KubernetesExecutor.log_idle_timeout = 600``.""",
    ).tag(config=True)

    log_reconnect_seconds = Float(
        1.0,
        help="Seconds before a broken log stream is reopened.",
    ).tag(config=True)

    run_as_uid = Union(
        [Integer(), Callable()],
        default_value=1000,
        help="""The uid of job pods: the user's uid in their server. Zero to JupyterHub runs
        every server as ``singleuser.uid`` (1000); a function of the user's name gives each
        their own (a campus directory's uid), as KubeSpawner's ``uid`` may be a function.

        Example: ``c.KubernetesExecutor.run_as_uid = lambda username: lookup_uid(username)``.
        """,
    ).tag(config=True)

    run_as_gid = Union(
        [Integer(), Callable()],
        default_value=100,
        help="""The primary gid of job pods (the Jupyter images' ``users`` group, 100), or a
        function of the user's name: ``c.KubernetesExecutor.run_as_gid = 100``.""",
    ).tag(config=True)

    fs_gid = Union(
        [Integer(), Callable()],
        default_value=100,
        allow_none=True,
        help="""The ``fsGroup`` of job pods, so the volumes they write on are the user's
        group's (z2jh's ``singleuser.fsGid``, 100); None: no fsGroup.

        Example: ``c.KubernetesExecutor.fs_gid = 100``.
        """,
    ).tag(config=True)

    home_pvc_name_template = Unicode(
        "claim-{username}",
        help="""The user's home PVC, as their server mounts it: KubeSpawner's
        ``pvc_name_template`` for the default server (z2jh's dynamic storage:
        ``claim-{username}``; its static storage: the shared PVC's name, with
        ``home_sub_path``). ``{username}`` is KubeSpawner's safe slug of the name,
        ``{unescaped_username}`` the name itself. Empty: no home volume; the job runs in its
        own folder and what it writes there is lost with the pod.

        Example: ``c.KubernetesExecutor.home_pvc_name_template = "home-nfs"``.
        """,
    ).tag(config=True)

    home_mount_path = Unicode(
        "/home/jovyan",
        help="""Where the home volume is mounted (z2jh's ``singleuser.storage.homeMountPath``):
        ``c.KubernetesExecutor.home_mount_path = "/home/jovyan"``.""",
    ).tag(config=True)

    home_sub_path = Unicode(
        "",
        help="""The user's folder in the home volume (z2jh's static storage ``subPath``,
        ``{username}``); empty: the volume's root.

        Example: ``c.KubernetesExecutor.home_sub_path = "{username}"``.
        """,
    ).tag(config=True)

    notebook_dir = Unicode(
        "",
        help="""The folder in the pod that notebook paths are relative to (the user's
        server's root folder); empty: ``home_mount_path``. The kernel starts in the
        notebook's folder under it.

        Example: ``c.KubernetesExecutor.notebook_dir = "/home/jovyan/work"``.
        """,
    ).tag(config=True)

    extra_volumes = List(
        Dict(),
        help="""More pod volumes for every job, as in the user's server (course data, a
        shared scratch), ``{username}`` expanded in their strings; mounted by
        ``extra_volume_mounts``.

        Example: ``c.KubernetesExecutor.extra_volumes = [{"name": "ml101-data",
        "persistentVolumeClaim": {"claimName": "ml101-data", "readOnly": True}}]``.
        """,
    ).tag(config=True)

    extra_volume_mounts = List(
        Dict(),
        help="""Mounts of ``extra_volumes`` in the job's container, ``{username}`` expanded.

        Example: ``c.KubernetesExecutor.extra_volume_mounts = [{"name": "ml101-data",
        "mountPath": "/home/jovyan/data", "readOnly": True}]``.
        """,
    ).tag(config=True)

    upload_url = Unicode(
        help="""The job service's address as job pods reach it; the runner sends the executed
        notebook and HTML back there (``api/jobs/<id>/uploads/<format>``, with the job's own
        token). Defaults to ``$JUPYTER_TO_JOB_UPLOAD_URL``. Empty: outputs stay in the pod.

        Example: ``c.KubernetesExecutor.upload_url =
        "http://hub:8181/services/jupyter-to-job/"``.
        """,
    ).tag(config=True)

    pod_labels = Dict(
        help="""Labels of job pods besides the job's own (``app.kubernetes.io/managed-by:
        jupyter-to-job``, by which a network policy admits them to the job service). With a
        job service run by the hub, in the hub's pod, z2jh's policy wants
        ``hub.jupyter.org/network-access-hub`` for their uploads to get through.

        Example: ``c.KubernetesExecutor.pod_labels = {"hub.jupyter.org/network-access-hub":
        "true"}``.
        """,
    ).tag(config=True)

    @default("upload_url")
    def _default_upload_url(self) -> str:
        return os.environ.get("JUPYTER_TO_JOB_UPLOAD_URL", "")

    max_job_files_bytes = Integer(
        MAX_JOB_FILES_BYTES,
        help="""The largest notebook plus job.json a job's ConfigMap takes (the API server
        refuses objects over 1 MiB).""",
    ).tag(config=True)

    # -- what the settings say for one job --------------------------------------------

    def _for_owner(self, value: Any) -> Any:
        return value(self.job.owner) if callable(value) else value

    def pod_user(self) -> PodUser:
        """The uid and gid the job's pod runs as: its owner's, as the settings say."""
        fs_gid = self._for_owner(self.fs_gid)
        return PodUser(
            uid=int(self._for_owner(self.run_as_uid)),
            gid=int(self._for_owner(self.run_as_gid)),
            fs_gid=None if fs_gid is None else int(fs_gid),
        )

    def job_path(self, name: str) -> str:
        """The API path of the Kubernetes Job ``name`` in the jobs' namespace."""
        return f"/apis/batch/v1/namespaces/{self.namespace}/jobs/{name}"

    @property
    def job_upload_url(self) -> str | None:
        """Where this job's runner sends its outputs (None: they stay in the pod)."""
        if not self.upload_url:
            return None
        return f"{self.upload_url.rstrip('/')}/api/jobs/{self.job_id}/uploads/"
