"""KubernetesExecutor: each job is a ``batch/v1`` Job running the in-job runner.

``c.JobManager.executor_class = "jupyter_to_job.executors.kubernetes.KubernetesExecutor"``

How it starts, follows, judges and cleans up a Job, and why: docs/kubernetes-executor.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import posixpath
import time
from pathlib import Path
from typing import Any

import aiohttp
from traitlets import Bool, Callable, Dict, Float, Integer, List, Unicode, Union, default

from ..k8s_objects import (
    CONTAINER_NAME,
    MAX_JOB_FILES_BYTES,
    JobFilesTooLarge,
    PodCheckpoint,
    PodUser,
    UserFiles,
    job_object_name,
    make_configmap,
    make_job,
    make_upload_secret,
    notebook_folder,
    owner_reference,
    run_pod_selector,
    strip_outputs,
    upload_secret_name,
    user_volume_names,
)
from ..models import JobStatus
from ..output_uploads import issue_upload_token, revoke_upload_token
from ..retries import attempt_memory, exhausted, no_more_memory, oom_retry, separator
from ..runfiles import RunnerStatus, atomic_write_text, parse_compact_status, read_spec
from ..store import ACTIVE, JobAttemptsRow, utcnow
from .base import FinalState, JobExecutor, JobOutcome, StopReason
from .k8s_attempts import (
    attempts_before,
    deleted_verdict,
    disruption_of,
    out_of_memory_verdict,
    preempted_verdict,
    ran_out_of_memory,
    runner_decides,
    start_failure,
    suspended_since,
)
from .kube_client import KubeClient, KubeError, connect, sleep_or_event
from .pod_log import PodLogCursor, RunProgress
from .pod_status import (
    container_state,
    disruption,
    job_failure_reason,
    job_finished,
    pending_reason,
)
from .queue_eviction import eviction_sentence, eviction_words, read_eviction

_IN_CLUSTER_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def _version(existing: dict[str, Any]) -> dict[str, Any]:
    version = (existing.get("metadata") or {}).get("resourceVersion")
    return {"resourceVersion": version} if version else {}


class JobNotStartable(Exception):
    """The job cannot be turned into a Kubernetes Job; ``message`` is for its owner."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class KubernetesExecutor(JobExecutor):
    """Runs the job runner in a Kubernetes Job (docs/kubernetes-executor.md)."""

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

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        known = self.store.job_attempts(self.job_id)
        # Each entry that queued the job again (no ``ended`` pod of its own) started a new
        # Job: an out-of-memory retry (docs/kubernetes-executor.md).
        again = [e for e in (known.history if known else ()) if "ended" not in e]
        self.run = len(again)
        """Which of the job's Kubernetes Jobs this executor runs (0: its first)."""
        self.first_attempt = int(again[-1]["attempt"]) + 1 if again else 1
        """The job's attempt that this Job's first pod is."""
        self.name = job_object_name(self.job_id, self.run)
        self._memory_limit: int | None = None
        self._out_of_memory = False
        self.kube: KubeClient | None = None
        self.cursor = PodLogCursor()
        self.progress = RunProgress(self.job_id)
        self._pods: dict[str, dict[str, Any]] = {}
        self._gone: set[str] = set()
        self._changed = asyncio.Event()
        self._job: dict[str, Any] | None = None
        self._job_read_at = 0.0
        self._job_exists = False
        self._deleting: asyncio.Future[None] | None = None
        self._current_pod: str | None = None
        self._verdict: FinalState | None = None
        self._cursor_saved_at = 0.0
        self._disrupted: dict[str, tuple[str, str]] = {}
        self._requeued: str | None = None
        """While Kueue holds the job again after taking its GPU back: the sentence why."""
        self._attempts: JobAttemptsRow | None = None
        """The job's checkpoint and attempts (None: no checkpoint), read as it starts."""
        self._checkpoint: PodCheckpoint | None = None

    # -- paths and the client -------------------------------------------------------------

    @property
    def _job_path(self) -> str:
        return f"/apis/batch/v1/namespaces/{self.namespace}/jobs/{self.name}"

    @property
    def _pods_path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods"

    @property
    def _cursor_file(self) -> Path:
        return self.files.directory / "pod-log.json"

    async def _client(self) -> KubeClient:
        if self.kube is None:
            self.kube = await connect(self.kubeconfig or None)
            self.kube.timeout = self.api_timeout
        return self.kube

    async def _close(self) -> None:
        if self._deleting is not None:  # a deletion under way finishes with the client
            try:
                await self._deleting
            except Exception as error:
                self.log.warning(
                    "Job %s: deleting its Kubernetes Job failed: %s", self.job_id, error
                )
        if self.kube is not None:
            kube, self.kube = self.kube, None
            await kube.close()

    async def process(self) -> None:
        try:
            await super().process()
        finally:
            await self._close()

    async def resume(self) -> None:
        try:
            await super().resume()
        finally:
            await self._close()

    # -- the objects ------------------------------------------------------------------------

    async def build_objects(self) -> tuple[dict[str, Any], dict[str, Any], Any]:
        """The job's ConfigMap, Job and GPU plan, as its Grant says; raises
        :class:`JobNotStartable`."""
        from gpuspawner.backends import cpu_only_plan
        from gpuspawner.policy.units import parse_size_bytes

        grant = self.grant
        if grant is not None and grant.target != "kubernetes":
            raise JobNotStartable(
                "This job was admitted for another executor, so its GPU share cannot be given "
                "on Kubernetes. Create it again."
            )
        image = (grant.image if grant else None) or self.image
        if not image:
            raise JobNotStartable(
                "No image is configured for this job's flavor, so it cannot run on Kubernetes. "
                "Tell the hub admins (the flavor's environment.image, or "
                "KubernetesExecutor.image)."
            )
        plan = cpu_only_plan()
        if grant is not None and grant.plan is not None:
            # The share's variables and the GPUSPAWNER_* ones describing it win over all.
            plan = dataclasses.replace(grant.plan, environment=grant.environment)
        allocation = grant.allocation.to_dict() if grant and grant.allocation else None
        limits = grant.limits if grant else None
        files = self.user_files()
        # The kernel's folder, relative to the container's (the server's root folder).
        working_dir = files.notebook_folder if files.root else None
        checkpoint = self._checkpoint = self.pod_checkpoint(files)
        memory = (limits.memory_bytes if limits else None) or parse_size_bytes(self.default_memory)
        more = attempt_memory(self._attempts.history) if self._attempts else None
        if more is not None and more > (memory or 0):
            memory = more  # an earlier attempt ran out of the flavor's memory
        self._memory_limit = memory
        spec = read_spec(self.files).model_copy(update={"working_dir": working_dir})
        notebook = self.files.input_notebook.read_bytes()
        spec_text = spec.model_dump_json()
        if len(notebook) + len(spec_text) > self.max_job_files_bytes:
            notebook = strip_outputs(notebook)
        try:
            configmap = make_configmap(
                job_id=self.job_id,
                owner=self.job.owner,
                notebook=notebook,
                spec=spec_text,
                namespace=self.namespace,
                max_bytes=self.max_job_files_bytes,
                run=self.run,
            )
        except JobFilesTooLarge as error:
            raise JobNotStartable(error.message) from None
        job = make_job(
            job_id=self.job_id,
            owner=self.job.owner,
            image=image,
            plan=plan,
            flavor=self.job.flavor,
            cpu=(limits.cpu if limits else None) or self.default_cpu,
            memory_bytes=memory,
            deadline_seconds=self.job.deadline_seconds,
            environment={**(grant.variables if grant else {}), **self.environment},
            allocation=allocation,
            namespace=self.namespace,
            node_name=grant.node if grant and self.pin_to_node else None,
            backoff_limit=self.backoff_limit,
            queue_name=self.queue_name,
            service_account=self.service_account,
            priority_class_name=self.priority_class_name,
            image_pull_policy=self.image_pull_policy or None,
            termination_grace_seconds=max(1, round(self.stop_grace_seconds)),
            shm_size=self.shm_size or None,
            user=self.pod_user(),
            files=files,
            pod_labels=self.pod_labels,
            upload_url=self.job_upload_url,
            checkpoint=checkpoint,
            run=self.run,
        )
        return configmap, job, plan

    def pod_checkpoint(self, files: UserFiles) -> PodCheckpoint | None:
        """The job's checkpoint folder in its pod, below the notebook's folder in the home the
        pod mounts, and its retries; None for a job without a checkpoint. Raises
        :class:`JobNotStartable` where jobs get no home to keep a checkpoint in."""
        attempts = self._attempts = self.store.job_attempts(self.job_id)
        if attempts is None:
            return None
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

    def user_files(self) -> UserFiles:
        """The owner's volumes in the job's pod (home, extras) and where the runner starts."""
        owner = self.job.owner

        def expand(value: Any) -> Any:
            if isinstance(value, str):
                return user_volume_names(value, owner)
            if isinstance(value, dict):
                return {key: expand(item) for key, item in value.items()}
            if isinstance(value, list):
                return [expand(item) for item in value]
            return value

        # The flavor's storage, as the Grant rendered it (expanded already), then the
        # settings' volumes; the home unless the flavor mounts something there itself.
        grant = self.grant
        volumes = [dict(volume) for volume in (grant.volumes if grant else ())]
        mounts = [dict(mount) for mount in (grant.volume_mounts if grant else ())]
        volumes += [expand(volume) for volume in self.extra_volumes]
        mounts += [expand(mount) for mount in self.extra_volume_mounts]
        home_taken = any(mount.get("mountPath") == self.home_mount_path for mount in mounts)
        if any(volume.get("name") == "home" for volume in volumes) and not home_taken:
            self.log.warning(
                "Job %s: its flavor's storage has a volume named 'home' that is not mounted at "
                "%s; the job gets no home volume of its own.",
                self.job_id,
                self.home_mount_path,
            )
            home_taken = True
        if not self.home_pvc_name_template or home_taken:
            root = (self.notebook_dir or self.home_mount_path) if home_taken else None
            return UserFiles(
                tuple(volumes),
                tuple(mounts),
                root=root,
                notebook_folder=notebook_folder(self.job.input_path),
            )
        claim = user_volume_names(self.home_pvc_name_template, owner)
        home = {"name": "home", "mountPath": self.home_mount_path}
        if self.home_sub_path:
            home["subPath"] = user_volume_names(self.home_sub_path, owner)
        return UserFiles(
            volumes=({"name": "home", "persistentVolumeClaim": {"claimName": claim}}, *volumes),
            mounts=(home, *mounts),
            root=self.notebook_dir or self.home_mount_path,
            notebook_folder=notebook_folder(self.job.input_path),
        )

    @property
    def job_upload_url(self) -> str | None:
        """Where this job's runner sends its outputs (None: they stay in the pod)."""
        if not self.upload_url:
            return None
        return f"{self.upload_url.rstrip('/')}/api/jobs/{self.job_id}/uploads/"

    # -- launching ----------------------------------------------------------------------

    async def execute(self) -> JobOutcome:
        kube = await self._client()
        configmap, job, plan = await self.build_objects()
        try:
            await self._create_objects(kube, configmap, job, plan)
        except KubeError as error:
            if error.status != 403:
                raise
            raise JobNotStartable(
                f"The job service is not allowed to start jobs here: {error.message}. Tell "
                "the hub admins: the job service's Role lacks this permission."
            ) from None
        where = f" in the queue {self.queue_name}" if self.queue_name else ""
        self.log_line(f"Kubernetes Job {self.namespace}/{self.name} created{where}")
        attempts = self._attempts
        checkpoint = self._checkpoint
        if attempts is not None and checkpoint is not None and self.run == 0:
            # The path the runner gets is the pod's, not one of this service's folders.
            self.store.set_job_checkpoint(
                self.job_id, attempts.checkpoint_folder, checkpoint.path, attempts.max_attempts
            )
            self.log_line(
                f"checkpoint folder {checkpoint.path}; attempt 1 of {attempts.max_attempts}"
            )
        if self.stop_reason is not None:  # a stop that came before the Job existed
            self._start_deleting()
        return await self._follow()

    async def _create_objects(
        self, kube: KubeClient, configmap: dict[str, Any], job: dict[str, Any], plan: Any
    ) -> None:
        """The job's ConfigMap, its GPU's ResourceClaimTemplates (DRA), its upload Secret and
        its Job; what the Job does not own yet goes if the Job cannot be made."""
        namespace = self.namespace
        configmaps = f"/api/v1/namespaces/{namespace}/configmaps"
        secrets = f"/api/v1/namespaces/{namespace}/secrets"
        owned = [f"{configmaps}/{self.name}"]
        made = await self._create(configmaps, configmap)
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
            if self.job_upload_url:
                secret = make_upload_secret(
                    job_id=self.job_id,
                    owner=self.job.owner,
                    token=issue_upload_token(self.files),
                    namespace=namespace,
                )
                await self._replace(secrets, secret)
                owned.append(f"{secrets}/{upload_secret_name(self.job_id)}")
            created = await self._create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
        except BaseException:  # no Job to own the ConfigMap and Secret: remove them here
            for path in owned:
                with contextlib.suppress(Exception):
                    await kube.request("DELETE", path)
            raise
        self._job_exists = True
        for path in owned:
            await kube.request(
                "PATCH",
                path,
                body={"metadata": {"ownerReferences": [owner_reference(created)]}},
                content_type="application/merge-patch+json",
            )

    async def _create(self, path: str, manifest: dict[str, Any]) -> dict[str, Any]:
        """Create ``manifest``; one left by an earlier try of this very job is taken over."""
        assert self.kube is not None
        try:
            return await self.kube.request("POST", path, body=manifest)
        except KubeError as error:
            if error.status != 409:
                raise
        existing = await self.kube.get(f"{path}/{manifest['metadata']['name']}")
        labels = ((existing or {}).get("metadata") or {}).get("labels") or {}
        if existing is None or labels != {**labels, **manifest["metadata"]["labels"]}:
            raise JobNotStartable(
                f"A Kubernetes {manifest['kind']} named {manifest['metadata']['name']} exists "
                "and belongs to something else. Tell the hub admins."
            )
        return existing

    async def _replace(self, path: str, manifest: dict[str, Any]) -> None:
        """Create ``manifest``, replacing one left by an earlier try of this very job (a
        Secret whose token is revoked now)."""
        assert self.kube is not None
        try:
            await self.kube.request("POST", path, body=manifest)
            return
        except KubeError as error:
            if error.status != 409:
                raise
        existing = await self._create(path, manifest)  # refuses one that is not this job's
        replaced = {**manifest, "metadata": {**manifest["metadata"], **_version(existing)}}
        await self.kube.request("PUT", f"{path}/{manifest['metadata']['name']}", body=replaced)

    async def still_running(self) -> bool:
        kube = await self._client()
        job = await kube.get(self._job_path)
        return job is not None and not job_finished(job)

    async def reattach(self) -> JobOutcome:
        kube = await self._client()
        stopping = self.job.status == JobStatus.STOPPING.value
        with contextlib.suppress(OSError, ValueError):
            self.cursor = PodLogCursor.from_dict(json.loads(self._cursor_file.read_text()))
        job = await kube.get(self._job_path)
        if job is None:
            return JobOutcome(
                self.progress.status() if self.progress.cells_total else None,
                stop_reason=StopReason.REQUEST if stopping else None,
                vanished=True,
            )
        self._job_exists = True
        self._job, self._job_read_at = job, time.monotonic()
        self._attempts = self.store.job_attempts(self.job_id)
        self.log_line(f"the job service restarted; following Kubernetes Job {self.name} again")
        if stopping:
            await self.stop(StopReason.REQUEST)
        return await self._follow()

    # -- following ------------------------------------------------------------------------

    async def _follow(self) -> JobOutcome:
        watcher = asyncio.ensure_future(self._watch_pods())
        try:
            followed: set[str] = set()
            while (pod := await self._next_pod(followed)) is not None:
                uid = pod["metadata"]["uid"]
                followed.add(uid)
                await self._copy_log(pod)
                if not await self._another_attempt(followed):
                    break
            outcome = await self._outcome()
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            self._save_cursor()
        await self._expire_later()
        return outcome

    async def _watch_pods(self) -> None:
        """Keep ``_pods`` current: list, then watch from the list's resourceVersion."""
        assert self.kube is not None
        selector = [("labelSelector", run_pod_selector(self.job_id, self.run))]
        version: str | None = None
        while True:
            try:
                if version is None:
                    listing = await self.kube.request("GET", self._pods_path, query=selector)
                    present = set()
                    for pod in listing.get("items") or []:
                        self._saw(pod)
                        present.add(pod["metadata"]["uid"])
                    self._gone.update(set(self._pods) - present)
                    version = listing["metadata"]["resourceVersion"]
                    self._changed.set()
                query = [*selector, ("resourceVersion", version), ("allowWatchBookmarks", "true")]
                async with contextlib.aclosing(self.kube.watch(self._pods_path, query)) as events:
                    async for event in events:
                        pod = event.get("object") or {}
                        if event.get("type") == "ERROR":  # 410 Gone: list again
                            version = None
                            break
                        version = pod["metadata"]["resourceVersion"]
                        if event["type"] == "BOOKMARK":
                            continue
                        self._saw(pod)
                        if event["type"] == "DELETED":
                            self._gone.add(pod["metadata"]["uid"])
                        self._changed.set()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a broken watch: list again after a pause
                self.log.debug("Job %s: pod watch ended: %s", self.job_id, error)
                version = None
                await asyncio.sleep(1.0)

    def _saw(self, pod: dict[str, Any]) -> None:
        """Keep the pod as the API has it now; a disruption, once seen, is remembered (a
        later status may no longer carry the condition)."""
        uid = pod["metadata"]["uid"]
        self._pods[uid] = pod
        disrupted = disruption(pod)
        if disrupted is not None and uid not in self._disrupted:
            self._disrupted[uid] = disrupted
            self.log_line(f"the cluster is taking the pod away ({disrupted[0]}): {disrupted[1]}")

    async def _wait_change(self, seconds: float) -> None:
        await sleep_or_event(self._changed, seconds)
        self._changed.clear()

    async def _read_job(self, *, fresh: bool = False) -> dict[str, Any] | None:
        """The Job as the API has it (re-read at most once per poll interval)."""
        if fresh or time.monotonic() - self._job_read_at >= self.poll_interval:
            assert self.kube is not None
            self._job = await self.kube.get(self._job_path)
            self._job_read_at = time.monotonic()
        return self._job

    def _waiting(self, message: str | None) -> None:
        row = self.store.get(self.job_id)
        if row is not None and row.status_message != message:
            self.store.update(self.job_id, status_message=message)
            if message:
                self.log_line(message)

    async def _next_pod(self, followed: set[str]) -> dict[str, Any] | None:
        """The next pod whose container started, waiting for it; None when there is none."""
        unschedulable_since: float | None = None
        while True:
            if self.stop_reason is None and self.stop_requested_elsewhere():
                await self.stop(StopReason.REQUEST)
            candidates = [
                pod
                for uid, pod in self._pods.items()
                if uid not in followed
                and (uid not in self._gone or {"running", "terminated"} & set(container_state(pod)))
            ]
            pod = max(candidates, key=lambda p: p["metadata"]["creationTimestamp"], default=None)
            if pod is not None:
                state = container_state(pod)
                if "running" in state or "terminated" in state:
                    self._waiting(None)
                    requeued, self._requeued = self._requeued, None
                    node = pod["spec"].get("nodeName") or "a node"
                    pod_name = pod["metadata"]["name"]
                    if self.cursor.pod_uid == pod["metadata"]["uid"]:  # after a restart
                        self.log_line(f"reading the log of pod {pod_name} on from where it was")
                    else:
                        if followed:  # a new attempt: its runner reports afresh
                            self.progress = RunProgress(self.job_id)
                            if self._attempts is None and requeued:
                                self.log_line(
                                    f"---- run {len(followed) + 1}: the cluster's GPU queue "
                                    "admitted the job again, and it runs from the start ----"
                                )
                            elif self._attempts is None:  # retried by backoff_limit alone
                                self.log_line(
                                    f"---- run {len(followed) + 1} of {self.backoff_limit + 1}: "
                                    "its pod failed, and the cluster runs the job again from "
                                    "the start ----"
                                )
                        await self._count_attempts(pod)
                        self.log_line(f"pod {pod_name} started on {node}")
                    return pod
                reason = None if self.stop_reason else pending_reason(pod)
                if reason is not None and reason[0] == "start":
                    self._verdict = self._start_failure("ContainerNotStarted", reason[1])
                    return None
                if reason is not None:
                    unschedulable_since = unschedulable_since or time.monotonic()
                    waited = time.monotonic() - unschedulable_since
                    if waited >= self.scheduling_timeout_seconds:
                        self._verdict = self._start_failure("Unschedulable", reason[1])
                        return None
                    self._waiting(f"Waiting for room in the cluster: {reason[1]}")
                else:
                    unschedulable_since = None
            else:
                job = await self._read_job()
                if job is None or job_finished(job):
                    return None
                if (job.get("spec") or {}).get("suspend"):
                    queue = f"queue {self.queue_name}" if self.queue_name else "job queue"
                    self._waiting(
                        self._requeued or f"Waiting for the cluster's {queue} to admit the job."
                    )
            await self._wait_change(self.poll_interval)

    def _start_failure(self, ename: str, reason: str) -> FinalState:
        self._start_deleting()
        return start_failure(ename, reason, self.scheduling_timeout_seconds)

    async def _count_attempts(self, pod: dict[str, Any]) -> None:
        """Count the attempts of a job with a checkpoint that ended before ``pod``, each once,
        with a separator line in the log: the Job's earlier pods this service saw (oldest
        first, with their reasons), then as many more as the Job counted failed pods (those
        it replaced while this service was down, gone since)."""
        attempts = self._attempts
        if attempts is None:
            return
        pods, disrupted = dict(self._pods), dict(self._disrupted)  # as they were before the read
        status = ((await self._read_job(fresh=True)) or {}).get("status") or {}
        ended, failed = attempts_before(
            pod, pods, disrupted, status, job_name=self.name, run=self.run
        )
        for reason, key in ended:
            counted = self.store.job_attempts(self.job_id)
            this_job = counted.attempt - self.first_attempt + 1 if counted else 0
            if key.startswith("failed pod ") and this_job > failed:
                break  # the Job's count is reached (its pods were counted by uid)
            attempt = self.store.count_attempt(self.job_id, reason, key)
            if attempt is not None:
                self.log_line(separator(attempt, attempts.max_attempts, reason))

    def _retries_used_up(self, job: dict[str, Any] | None) -> bool:
        """A job with retries whose Job failed because its last allowed attempt was taken
        away (the disruptions counted past ``backoffLimit``)."""
        attempts = self._attempts
        return (
            attempts is not None
            and attempts.max_attempts > 1
            and job_failure_reason(job) == "BackoffLimitExceeded"
        )

    async def _another_attempt(self, followed: set[str]) -> bool:
        """After a pod ended: will the Job run another (``backoff_limit`` > 0, or a job with
        a checkpoint: the cluster replaces a disrupted pod)?"""
        if self.stop_reason is not None:
            return False
        if self.queue_name and await self._taken_back_by_queue():
            return True
        if self.backoff_limit == 0 and self._attempts is None:
            return False
        while True:
            if any(uid not in followed and uid not in self._gone for uid in self._pods):
                return True
            job = await self._read_job()
            if job is None or job_finished(job):
                return False
            await self._wait_change(self.poll_interval)

    async def _taken_back_by_queue(self) -> bool:
        """Did Kueue take the job's GPU back while it ran (a preemption, say)? It then
        suspends the Job, whose pod the Job controller deletes, and queues it again: the job
        waits, saying why, and the next pod is followed once the queue admits it anew.

        Seen on the Job: suspended again, or (admitted again already) suspended or resumed
        since the pod that ended was made."""
        job = await self._read_job(fresh=True)
        pod = self._pods.get(self._current_pod or "") or {}
        if job is None or job_finished(job) or not pod:
            return False
        if not suspended_since(job, pod):
            return False
        assert self.kube is not None
        try:
            eviction = await read_eviction(self.kube, self.namespace, job)
        except KubeError as error:
            self.log.warning(
                "Job %s: the job service cannot read why the queue took the job back (%s). "
                "Hub admins: apply hub_config/kubernetes/job-service.yaml (its Role grants "
                "list on workloads.kueue.x-k8s.io).",
                self.job_id,
                error,
            )
            eviction = None
        sentence = eviction_sentence(eviction, self.queue_name, self._attempts is not None)
        self._disrupted.setdefault(
            pod["metadata"]["uid"],
            (eviction.reason if eviction else "Preempted", eviction_words(eviction)),
        )
        self._requeued = sentence
        self._waiting(sentence)
        return True

    def _container_ended(self, uid: str) -> bool:
        pod = self._pods.get(uid) or {}
        return uid in self._gone or "terminated" in container_state(pod)

    async def _copy_log(self, pod: dict[str, Any]) -> None:
        """Copy the pod's log until its container has ended, then read it once more."""
        uid, name = pod["metadata"]["uid"], pod["metadata"]["name"]
        self._current_pod = uid
        self.cursor.follow(uid)
        leftover = None
        while True:
            ended = self._container_ended(uid)
            broke = False
            try:
                leftover = await self._read_log(name, follow=not ended)
            except KubeError as error:
                if error.status == 404:  # the pod is gone, and its log with it
                    if leftover is not None:
                        self._copy(leftover.finish())
                    return
                broke = True
                if error.status != 400:  # 400: not started yet, or just ended
                    self.log.warning("Job %s: reading the log failed: %s", self.job_id, error)
            except (aiohttp.ClientError, TimeoutError) as error:
                broke = True
                self.log.info("Job %s: the log stream broke (%s); reopening", self.job_id, error)
            if ended:
                if leftover is not None:
                    self._copy(leftover.finish())
                return
            if not broke:
                # The stream ended by itself: the container has ended, which the watch is
                # about to say; then the loop reads the log once more.
                deadline = time.monotonic() + 5.0
                while not self._container_ended(uid) and time.monotonic() < deadline:
                    await self._wait_change(0.2)
            if not self._container_ended(uid):
                await asyncio.sleep(self.log_reconnect_seconds)

    async def _read_log(self, pod_name: str, *, follow: bool) -> Any:
        """One read of the pod's log from the cursor on; returns the reading (its leftover)."""
        assert self.kube is not None
        query: list[tuple[str, Any]] = [("container", CONTAINER_NAME), ("timestamps", "true")]
        if follow:
            query.append(("follow", "true"))
        if self.cursor.last is not None:
            query.append(("sinceTime", self.cursor.since_time()))
        reading = self.cursor.reading()
        path = f"{self._pods_path}/{pod_name}/log"
        stream = self.kube.stream(path, query, idle_timeout=self.log_idle_timeout)
        async with contextlib.aclosing(stream) as chunks:
            async for chunk in chunks:
                self._copy(reading.feed(chunk))
        return reading

    def _copy(self, lines: bytes) -> None:
        """Append new pod log lines (whole lines, in one block) to the durable log, in one
        write; note progress and the final status."""
        if not lines:
            return
        kept = self.progress.observe_lines(lines)
        if kept:
            self.log_store.append_bytes(self.job_id, kept)
        # Right after the lines it counts (one small file per block, not per line): a
        # service killed in between copies this one block again when it comes back.
        self._save_cursor()
        if self.progress.changed:
            self.progress.changed = False
            self.report_progress(self.progress.status())

    def _save_cursor(self) -> None:
        """Save the cursor after the lines it counts (a crash in between repeats, never loses)."""
        if self.cursor.pod_uid is None:
            return
        with contextlib.suppress(OSError):
            atomic_write_text(self._cursor_file, json.dumps(self.cursor.to_dict()) + "\n")
        self._cursor_saved_at = time.monotonic()

    # -- the result -----------------------------------------------------------------------

    async def _outcome(self) -> JobOutcome:
        """How the job ended, from the pod, the runner's report and the Job."""
        pod = self._pods.get(self._current_pod or "") or {}
        terminated = container_state(pod).get("terminated") if pod else None
        reported = parse_compact_status(terminated.get("message") or "") if terminated else None
        status: RunnerStatus | None = reported or self.progress.final
        if status is None and (self.progress.cells_total is not None or terminated):
            status = self.progress.status()
        exit_code = terminated.get("exitCode") if terminated else None
        job = await self._read_job(fresh=True) if self._job_exists else None
        stop_reason = self.stop_reason
        if stop_reason is None and job_failure_reason(job) == "DeadlineExceeded":
            stop_reason = StopReason.DEADLINE
            self.log_line(f"the deadline of {self.job.deadline_seconds} s has passed")
        outcome = JobOutcome(
            status,
            exit_code=exit_code,
            stop_reason=stop_reason,
            forced=stop_reason is not None and exit_code == 137,
            last_cell=self.progress.current_cell,
        )
        if self._verdict is None:
            self._verdict = self._judge(outcome, pod, terminated, job)
        return outcome

    def _judge(
        self,
        outcome: JobOutcome,
        pod: dict[str, Any],
        terminated: dict[str, Any] | None,
        job: dict[str, Any] | None,
    ) -> FinalState | None:
        """What only the cluster can say (out of memory, deleted); None: ``final_state``."""
        if ran_out_of_memory(outcome, pod, terminated):
            self._out_of_memory = True
            return out_of_memory_verdict(outcome)
        if runner_decides(outcome):
            return None
        disrupted = disruption_of(pod, self._disrupted)
        if disrupted is not None:
            again = "Run the job again."
            if self._attempts is not None and self._retries_used_up(job):
                again = exhausted(self._attempts.max_attempts)
                self.log_line(again)
            return preempted_verdict(outcome, disrupted, again)
        return deleted_verdict(outcome, pod, job, self._gone)

    async def on_complete(self, outcome: JobOutcome) -> None:
        revoke_upload_token(self.files)  # the outputs the job sent are final now
        verdict = self._verdict
        if verdict is None:
            await super().on_complete(outcome)
            return
        # Without a Grant (a job followed again after a restart) the flavor's setting is not
        # known here: the usual out-of-memory verdict stands.
        if self._out_of_memory and self._attempts is not None and self.grant is not None:
            verdict = self._after_out_of_memory(outcome, verdict)
            if verdict is None:
                return
        self.report_progress(outcome.status)
        self.log_line(f"{verdict.status.value.lower()}: {verdict.message}")
        self.store.transition(
            self.job_id,
            ACTIVE,
            verdict.status,
            status_message=verdict.message,
            error=verdict.error.model_dump() if verdict.error else None,
            exit_code=verdict.exit_code,
            current_cell=None,
            end_time=utcnow(),
        )

    def _after_out_of_memory(self, outcome: JobOutcome, verdict: FinalState) -> FinalState | None:
        """A job with a checkpoint that ran out of memory: queued again for its next attempt,
        a new Job with the larger memory its flavor allows (None), or ``verdict`` with a
        sentence saying what to do."""
        attempts = self._attempts
        assert attempts is not None
        retry_memory = self.grant.oom_retry_memory if self.grant else None
        ran_out = dataclasses.replace(outcome, oom_killed=True, memory_limit=self._memory_limit)
        more = oom_retry(ran_out, retry_memory)
        if more is None:
            sentence = no_more_memory(retry_memory)
        else:
            attempt = self.store.start_again(
                self.job_id, (JobStatus.RUNNING,), more.reason, memory_bytes=more.memory_bytes
            )
            if attempt is not None:
                self.log_line(
                    separator(attempt, attempts.max_attempts, more.reason, more.memory_bytes)
                )
                return None
            if attempts.max_attempts <= 1:
                return verdict  # it asked for no retry
            sentence = exhausted(attempts.max_attempts)
        self.log_line(sentence)
        return dataclasses.replace(verdict, message=f"{verdict.message} {sentence}")

    async def on_failure(self, error: Exception) -> None:
        revoke_upload_token(self.files)
        if self._job_exists and self.kube is not None:  # do not leave a pod running unwatched
            with contextlib.suppress(Exception):
                await self._delete_job()
        if not isinstance(error, JobNotStartable):
            await super().on_failure(error)
            return
        self.log_line(f"failed: {error.message}")
        self.store.transition(
            self.job_id,
            (JobStatus.CREATED, JobStatus.QUEUED, *ACTIVE),
            JobStatus.FAILED,
            status_message=error.message,
            error={"cell_index": None, "ename": "JobNotStartable", "evalue": error.message},
            current_cell=None,
            end_time=utcnow(),
        )

    async def _expire_later(self) -> None:
        """Let the TTL controller delete the finished Job, now that its log is stored."""
        if not self._job_exists or self._deleting is not None or self.kube is None:
            return
        try:
            await self.kube.request(
                "PATCH",
                self._job_path,
                body={"spec": {"ttlSecondsAfterFinished": self.ttl_seconds_after_finished}},
                content_type="application/merge-patch+json",
            )
        except KubeError as error:
            if error.status != 404:
                self.log.warning("Job %s: could not set the Job's TTL: %s", self.job_id, error)

    # -- stopping -----------------------------------------------------------------------

    async def stop(self, reason: StopReason = StopReason.REQUEST) -> None:
        if self.stop_reason is not None:
            return
        self.stop_reason = reason
        if self._job_exists:
            self._start_deleting()
        self._changed.set()

    def _start_deleting(self) -> None:
        if self._deleting is None and self._job_exists:
            self.log_line(
                f"deleting Kubernetes Job {self.name}; its pod gets "
                f"{self.stop_grace_seconds:g} s to stop"
            )
            self._deleting = asyncio.ensure_future(self._delete_job())

    async def _delete_job(self) -> None:
        """Delete the Job (its pod and ConfigMap follow); the log is being followed."""
        assert self.kube is not None
        try:
            await self.kube.request(
                "DELETE", self._job_path, body={"propagationPolicy": "Background"}
            )
        except KubeError as error:
            if error.status != 404:
                raise
