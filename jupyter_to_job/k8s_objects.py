"""Kubernetes objects of a notebook job, built by pure functions (KubeSpawner's objects.py style).

:func:`make_configmap` carries the job's files (the notebook snapshot and ``job.json``)
into the cluster; :func:`make_job` is the ``batch/v1`` Job that runs the in-job runner
on them. Both return plain dicts, compared with literal manifests in
``tests/jobs_k8s/test_manifests.py``; nothing here talks to a cluster. Why each choice (retries, deadline, TTL, the user's uid and volumes, uploads, the
ConfigMap): docs/kubernetes-executor.md, "The manifests".
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from gpuspawner.backends.base import PodGPUPlan
from gpuspawner.core.allocation_record import ALLOCATION_ANNOTATION, encode_allocation
from gpuspawner.core.pod_plan import apply_pod_plan

MANAGED_BY = "jupyter-to-job"
COMPONENT = "notebook-job"
JOB_ID_LABEL = "jupyter-to-job/job-id"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
"""What the Job controller labels each pod of a Job with: the Job's name."""
USERNAME_LABEL = "hub.jupyter.org/username"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_ID_ANNOTATION = "jupyter-to-job/job-id"
FLAVOR_ANNOTATION = "jupyter-to-job/flavor"
USERNAME_ANNOTATION = "hub.jupyter.org/username"
NODE_LABEL = "kubernetes.io/hostname"

CONTAINER_NAME = "notebook"
JOB_DIR = "/job"
TERMINATION_LOG = "/dev/termination-log"
JOB_FILES = ("job.json", "input.ipynb")
RUNNER_COMMAND = (
    "python",
    "-m",
    "jupyter_to_job.runner",
    "--job-dir",
    JOB_DIR,
    "--log-file",
    "/dev/stdout",
    "--termination-log",
    TERMINATION_LOG,
)

UPLOAD_TOKEN_DIR = "/var/run/secrets/jupyter-to-job"
UPLOAD_TOKEN_KEY = "upload-token"

DISRUPTION_CONDITION = "DisruptionTarget"

MAX_JOB_FILES_BYTES = 900 * 1024
"""What a job's ConfigMap may carry: under the API server's 1 MiB object limit, with room
for metadata."""

_NAME_PREFIX = "j2j-"
# Job pods are named <job>-<5 characters>, and a pod name is at most 63 characters.
_MAX_NAME = 52
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class JobFilesTooLarge(ValueError):
    """The notebook and job.json do not fit in a ConfigMap; ``message`` says what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def safe_slug(name: str, max_length: int = 63) -> str:
    """``name`` as a DNS label: itself when it already is one, else ``<slug>---<hash>``.

    The hash keeps distinct names distinct (``Alice`` and ``alice`` differ), as
    KubeSpawner's ``safe_slug`` does for usernames.
    """
    if len(name) <= max_length and _DNS_LABEL.match(name):
        return name
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "x"
    slug = slug[: max_length - 11].rstrip("-") or "x"
    return f"{slug}---{_short_hash(name)}"


def kubespawner_safe_slug(name: str, max_length: int = 48) -> str:
    """``name`` as KubeSpawner 7's "safe" slug scheme writes it (``{username}`` in its
    templates, Zero to JupyterHub 4's default): itself when it is a DNS label starting with
    a letter, without ``--`` and at most ``max_length`` long; else
    ``<stripped name>---<8 hex of sha256>``.

    The same rule as ``kubespawner.slugs.safe_slug``, restated here because the job service
    must not import the spawners; tests/jobs_k8s/test_manifests.py checks both agree.
    """
    valid = re.fullmatch(r"[a-z]([a-z0-9-]*[a-z0-9])?", name) is not None
    if "--" not in name and valid and len(name) <= min(max_length, 63):
        return name
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
    keep = max_length - 11
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).lstrip("-")[:keep].rstrip("-")
    if slug and not ("a" <= slug[0] <= "z"):
        slug = "x-" + slug[: keep - 2]
    return f"{slug or 'x'}---{digest}"


def user_volume_names(template: str, owner: str) -> str:
    """A KubeSpawner name template (``claim-{username}``) for ``owner``'s default server.

    ``{username}`` and ``{user_server}`` are KubeSpawner's safe slug of the name (the same
    for the default server), ``{unescaped_username}`` the name as it is.
    """
    slug = kubespawner_safe_slug(owner)
    return template.format(username=slug, user_server=slug, unescaped_username=owner)


def notebook_folder(input_path: str) -> str:
    """The folder of ``input_path`` relative to the server's root (``.`` for the root itself);
    ``.`` too for a path that would leave the root."""
    parent = PurePosixPath(input_path).parent
    if parent.is_absolute() or ".." in parent.parts:
        return "."
    return str(parent)


@dataclass(frozen=True)
class PodUser:
    """Who a job's pod runs as: the user's uid and gid, and the group its volumes get."""

    uid: int = 1000
    gid: int = 100
    fs_gid: int | None = 100


@dataclass(frozen=True)
class UserFiles:
    """The user's volumes in a job's pod: what to mount, and where the runner starts.

    ``volumes`` and ``mounts`` are pod volumes and container volume mounts as in the
    user's server (the home PVC, course data); ``root`` is the folder notebook paths are
    relative to (the container's working directory) and ``notebook_folder`` the notebook's
    folder relative to it (the kernel's working directory).
    """

    volumes: tuple[Mapping[str, Any], ...] = ()
    mounts: tuple[Mapping[str, Any], ...] = ()
    root: str | None = None
    notebook_folder: str = "."


def expand_user_names(value: Any, owner: str) -> Any:
    """A volume or mount of the settings with ``{username}`` expanded in its strings."""
    if isinstance(value, str):
        return user_volume_names(value, owner)
    if isinstance(value, dict):
        return {key: expand_user_names(item, owner) for key, item in value.items()}
    if isinstance(value, list):
        return [expand_user_names(item, owner) for item in value]
    return value


def unmounted_home_volume(
    volumes: Sequence[Mapping[str, Any]], mounts: Sequence[Mapping[str, Any]], home_mount_path: str
) -> bool:
    """A volume named ``home`` (a flavor's storage) that is not mounted at the home: the job
    then gets no home volume of its own."""
    home_taken = any(mount.get("mountPath") == home_mount_path for mount in mounts)
    return any(volume.get("name") == "home" for volume in volumes) and not home_taken


def make_user_files(
    owner: str,
    input_path: str,
    *,
    volumes: Sequence[Mapping[str, Any]],
    mounts: Sequence[Mapping[str, Any]],
    home_pvc_name_template: str,
    home_mount_path: str,
    home_sub_path: str,
    notebook_dir: str,
) -> UserFiles:
    """The owner's volumes in a job's pod and where the runner starts: ``volumes`` and
    ``mounts`` (the flavor's and the settings', expanded), and the owner's home PVC unless
    something else is mounted at the home or there is no home (an empty template)."""
    home_taken = any(mount.get("mountPath") == home_mount_path for mount in mounts) or any(
        volume.get("name") == "home" for volume in volumes
    )
    if not home_pvc_name_template or home_taken:
        root = (notebook_dir or home_mount_path) if home_taken else None
        return UserFiles(
            tuple(volumes), tuple(mounts), root=root, notebook_folder=notebook_folder(input_path)
        )
    claim = user_volume_names(home_pvc_name_template, owner)
    home = {"name": "home", "mountPath": home_mount_path}
    if home_sub_path:
        home["subPath"] = user_volume_names(home_sub_path, owner)
    return UserFiles(
        volumes=({"name": "home", "persistentVolumeClaim": {"claimName": claim}}, *volumes),
        mounts=(home, *mounts),
        root=notebook_dir or home_mount_path,
        notebook_folder=notebook_folder(input_path),
    )


@dataclass(frozen=True)
class PodCheckpoint:
    """A job's checkpoint in its pod: the folder (an absolute path in the pod, on the owner's
    home volume) and how many times a disrupted pod is replaced."""

    path: str
    retries: int


def pod_failure_policy() -> dict[str, Any]:
    """The Job's ``podFailurePolicy`` for a job with a checkpoint: a disruption is counted
    toward ``backoffLimit`` and replaced, the notebook's own failure fails the Job at once
    (docs/kubernetes-executor.md says why ``Count`` and not ``Ignore``)."""
    return {
        "rules": [
            {
                "action": "Count",
                "onPodConditions": [{"type": DISRUPTION_CONDITION, "status": "True"}],
            },
            {
                "action": "FailJob",
                "onExitCodes": {
                    "containerName": CONTAINER_NAME,
                    "operator": "NotIn",
                    "values": [0],
                },
            },
        ]
    }


def upload_secret_name(job_id: str) -> str:
    """The name of the Secret holding the job's upload token."""
    return f"{job_object_name(job_id)}-upload"


def make_upload_secret(
    *, job_id: str, owner: str, token: str, namespace: str | None = None
) -> dict[str, Any]:
    """The Secret with the job's upload token (the runner reads it as a mounted file)."""
    metadata = job_part_metadata(upload_secret_name(job_id), job_id, owner, namespace)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "stringData": {UPLOAD_TOKEN_KEY: token},
    }


def job_object_name(job_id: str, run: int = 0) -> str:
    """The name of the job's Job and ConfigMap: ``j2j-<job id>``, made DNS-safe; for a later
    ``run`` (a new Job after an out-of-memory kill) ``j2j-<job id>-r<run>``."""
    suffix = f"-r{run}" if run else ""
    return _NAME_PREFIX + safe_slug(job_id, _MAX_NAME - len(_NAME_PREFIX) - len(suffix)) + suffix


def job_id_label(job_id: str) -> str:
    """The value of the job-id label (the id itself, unless it is no valid label value)."""
    return job_id if _LABEL_VALUE.match(job_id) else safe_slug(job_id)


def job_selector(job_id: str) -> str:
    """The label selector of the job's objects (the Job, its pods and its ConfigMap)."""
    return f"{JOB_ID_LABEL}={job_id_label(job_id)}"


def run_pod_selector(job_id: str, run: int = 0) -> str:
    """The label selector of the pods of one Job of the job (``run``): the job's own label
    and the ``batch.kubernetes.io/job-name`` label the Job controller gives its pods."""
    return f"{job_selector(job_id)},{JOB_NAME_LABEL}={job_object_name(job_id, run)}"


def cpu_quantity(cores: float) -> str:
    """``2`` for whole cores, otherwise millicores: ``1500m``."""
    if float(cores).is_integer():
        return str(int(cores))
    return f"{round(cores * 1000)}m"


def memory_quantity(size_bytes: int) -> str:
    """``8Gi`` or ``512Mi`` when the size is whole, otherwise plain bytes."""
    for unit, factor in (("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if size_bytes % factor == 0:
            return f"{size_bytes // factor}{unit}"
    return str(size_bytes)


def common_labels(job_id: str, owner: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/component": COMPONENT,
        USERNAME_LABEL: safe_slug(owner),
        JOB_ID_LABEL: job_id_label(job_id),
    }


def job_part_metadata(name: str, job_id: str, owner: str, namespace: str | None) -> dict[str, Any]:
    """Metadata of an object that belongs to one job (its ConfigMap, its upload Secret)."""
    metadata: dict[str, Any] = {
        "name": name,
        "labels": common_labels(job_id, owner),
        "annotations": {JOB_ID_ANNOTATION: job_id, USERNAME_ANNOTATION: owner},
    }
    if namespace:
        metadata["namespace"] = namespace
    return metadata


def make_configmap(
    *,
    job_id: str,
    owner: str,
    notebook: bytes,
    spec: str,
    namespace: str | None = None,
    max_bytes: int = MAX_JOB_FILES_BYTES,
    run: int = 0,
) -> dict[str, Any]:
    """The ConfigMap with the job's ``input.ipynb`` and ``job.json`` (for its Job of ``run``).

    Raises :class:`JobFilesTooLarge` beyond ``max_bytes``. A notebook that is not UTF-8
    text travels as ``binaryData``.
    """
    size = len(notebook) + len(spec.encode("utf-8"))
    if size > max_bytes:
        raise JobFilesTooLarge(
            f"The notebook is {size / 1024 / 1024:.1f} MiB, but a job on this cluster can take "
            f"at most {max_bytes // 1024} KiB of notebook (it travels in a Kubernetes "
            "ConfigMap). Clear the outputs of large cells (Edit > Clear Outputs of All Cells), "
            "save, and submit the job again; or ask the hub admins to give jobs shared "
            "(ReadWriteMany) storage for larger notebooks."
        )
    metadata = job_part_metadata(job_object_name(job_id, run), job_id, owner, namespace)
    configmap: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}
    try:
        configmap["data"] = {"job.json": spec, "input.ipynb": notebook.decode("utf-8")}
    except UnicodeDecodeError:
        import base64

        configmap["data"] = {"job.json": spec}
        configmap["binaryData"] = {"input.ipynb": base64.b64encode(notebook).decode("ascii")}
    return configmap


def make_job(
    *,
    job_id: str,
    owner: str,
    image: str,
    plan: PodGPUPlan,
    flavor: str | None = None,
    cpu: float | None = None,
    memory_bytes: int | None = None,
    deadline_seconds: int | None = None,
    environment: Mapping[str, str] | None = None,
    allocation: Mapping[str, Any] | None = None,
    namespace: str | None = None,
    node_name: str | None = None,
    backoff_limit: int = 0,
    queue_name: str | None = None,
    service_account: str | None = None,
    priority_class_name: str | None = None,
    image_pull_policy: str | None = None,
    termination_grace_seconds: int = 30,
    shm_size: str | None = "1Gi",
    work_size: str | None = None,
    command: Sequence[str] = RUNNER_COMMAND,
    user: PodUser | None = None,
    files: UserFiles | None = None,
    upload_url: str | None = None,
    pod_labels: Mapping[str, str] | None = None,
    checkpoint: PodCheckpoint | None = None,
    run: int = 0,
) -> dict[str, Any]:
    """The ``batch/v1`` Job that runs job ``job_id`` for ``owner``; pure.

    ``plan`` is the GPU share as the sharing back end rendered it (``cpu_only_plan()``
    for a flavor without GPU): its resources, node selector, tolerations, scheduler,
    runtime class, DRA claims, labels, annotations and environment are applied, its
    environment winning over ``environment`` (the flavor's variables), from which the
    variables that enforce a GPU share are dropped. ``cpu`` and ``memory_bytes`` are
    both request and limit. ``node_name`` pins the pod to the node whose GPU the hub's
    capacity pool chose. ``queue_name`` hands the Job to Kueue: it is created suspended
    and Kueue starts it when the queue admits it.

    ``user`` is the uid and gid the pod runs as (1000 and 100 when None); ``files`` the
    user's volumes and where the runner starts (none: the runner starts in the job's own
    folder). ``upload_url``: the runner sends its outputs there, with the token of the
    Secret :func:`make_upload_secret` makes. ``pod_labels``: more labels on the pod (the
    job's own and the plan's win). ``checkpoint``: the job resumes from that folder when
    the cluster takes its pod away, up to its retries (``backoff_limit`` is then ignored).
    ``run``: which of the job's Jobs this is (0: the first; 1, 2... after out-of-memory
    kills); it names the Job and the ConfigMap it mounts.
    """
    name = job_object_name(job_id, run)
    user = user or PodUser()
    files = files or UserFiles()
    labels = common_labels(job_id, owner)
    annotations = {
        USERNAME_ANNOTATION: owner,
        JOB_ID_ANNOTATION: job_id,
    }
    if flavor:
        annotations[FLAVOR_ANNOTATION] = flavor
    if allocation:
        # The same record as a server pod's, so one pool is rebuilt from both.
        annotations[ALLOCATION_ANNOTATION] = encode_allocation(allocation)

    job_env = {"GPUSPAWNER_PROFILE": flavor} if flavor else {}
    job_env.update(JUPYTER_TO_JOB_ID=job_id, PYTHONUNBUFFERED="1")
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    if cpu:
        limits["cpu"] = requests["cpu"] = cpu_quantity(cpu)
    if memory_bytes:
        limits["memory"] = requests["memory"] = memory_quantity(memory_bytes)

    argv = list(command)
    if upload_url:
        token_file = f"{UPLOAD_TOKEN_DIR}/{UPLOAD_TOKEN_KEY}"
        argv += ["--upload-url", upload_url, "--upload-token-file", token_file]
    if checkpoint is not None:
        argv += ["--checkpoint-dir", checkpoint.path]
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": image,
        "command": argv,
        "workingDir": files.root or JOB_DIR,
        "env": [{"name": key, "value": str(value)} for key, value in (environment or {}).items()],
        "resources": {},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [
            {"name": "job", "mountPath": JOB_DIR},
            *(
                {
                    "name": "job-files",
                    "mountPath": f"{JOB_DIR}/{key}",
                    "subPath": key,
                    "readOnly": True,
                }
                for key in JOB_FILES
            ),
            {"name": "dshm", "mountPath": "/dev/shm"},
            *(dict(mount) for mount in files.mounts),
        ],
    }
    volumes: list[dict[str, Any]] = [dict(volume) for volume in files.volumes]
    if upload_url:
        container["volumeMounts"].append(
            {"name": "upload-token", "mountPath": UPLOAD_TOKEN_DIR, "readOnly": True}
        )
        volumes.append(
            {
                "name": "upload-token",
                "secret": {"secretName": upload_secret_name(job_id), "defaultMode": 0o440},
            }
        )
    if image_pull_policy:
        container["imagePullPolicy"] = image_pull_policy

    work: dict[str, Any] = {"sizeLimit": work_size} if work_size else {}
    shm: dict[str, Any] = {"medium": "Memory"}
    if shm_size:
        shm["sizeLimit"] = shm_size
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": termination_grace_seconds,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": user.uid,
            "runAsGroup": user.gid,
            **({"fsGroup": user.fs_gid} if user.fs_gid is not None else {}),
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [
            {"name": "job", "emptyDir": work},
            {"name": "job-files", "configMap": {"name": name, "defaultMode": 0o444}},
            {"name": "dshm", "emptyDir": shm},
            *volumes,
        ],
    }
    if service_account:
        pod_spec["serviceAccountName"] = service_account
    if priority_class_name:
        pod_spec["priorityClassName"] = priority_class_name

    job_labels = dict(labels)
    spec: dict[str, Any] = {"backoffLimit": backoff_limit}
    if checkpoint is not None:
        spec["backoffLimit"] = checkpoint.retries
        spec["podFailurePolicy"] = pod_failure_policy()
        spec["podReplacementPolicy"] = "Failed"
    if queue_name:
        job_labels[QUEUE_LABEL] = queue_name
        spec["suspend"] = True
    if deadline_seconds:
        spec["activeDeadlineSeconds"] = deadline_seconds
    template = {"metadata": {"labels": dict(pod_labels or {})}, "spec": pod_spec}
    spec["template"] = apply_pod_plan(
        template,
        plan,
        node_name=node_name,
        limits=limits,
        requests=requests,
        environment=job_env,
        labels=labels,
        annotations=annotations,
    )
    container["env"].sort(key=lambda variable: variable["name"])
    metadata: dict[str, Any] = {"name": name, "labels": job_labels, "annotations": annotations}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


def owner_reference(job: Mapping[str, Any]) -> dict[str, Any]:
    """An ownerReference to the created Job ``job``: what it owns is deleted with it."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": job["metadata"]["name"],
        "uid": job["metadata"]["uid"],
    }


def strip_outputs(notebook: bytes) -> bytes:
    """The notebook without code cell outputs (the job recomputes them), or as it is."""
    try:
        document = json.loads(notebook)
        for cell in document.get("cells", []):
            if cell.get("cell_type") == "code":
                cell["outputs"] = []
                cell["execution_count"] = None
        return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except (ValueError, AttributeError, TypeError):
        return notebook


def granted_user_files(
    grant: Any, owner: str, input_path: str, settings: Any
) -> tuple[UserFiles, bool]:
    """The owner's volumes in a job's pod (home, extras) and where the runner starts, from
    the Grant and the executor's ``settings`` (``c.KubernetesExecutor``); True beside them
    where the flavor's storage has a volume named ``home`` not mounted at the home (the job
    then gets no home volume of its own)."""
    # The flavor's storage, as the Grant rendered it (expanded already), then the
    # settings' volumes; the home unless the flavor mounts something there itself.
    volumes = [dict(volume) for volume in (grant.volumes if grant else ())]
    mounts = [dict(mount) for mount in (grant.volume_mounts if grant else ())]
    volumes += [expand_user_names(volume, owner) for volume in settings.extra_volumes]
    mounts += [expand_user_names(mount, owner) for mount in settings.extra_volume_mounts]
    unmounted = unmounted_home_volume(volumes, mounts, settings.home_mount_path)
    files = make_user_files(
        owner,
        input_path,
        volumes=volumes,
        mounts=mounts,
        home_pvc_name_template=settings.home_pvc_name_template,
        home_mount_path=settings.home_mount_path,
        home_sub_path=settings.home_sub_path,
        notebook_dir=settings.notebook_dir,
    )
    return files, unmounted


def make_job_objects(
    settings: Any,
    grant: Any,
    *,
    job_id: str,
    job: Any,
    image: str,
    files: UserFiles,
    notebook: bytes,
    spec: str,
    memory_bytes: int | None,
    user: PodUser,
    upload_url: str | None,
    checkpoint: PodCheckpoint | None,
    run: int,
) -> tuple[dict[str, Any], dict[str, Any], PodGPUPlan]:
    """The ConfigMap and the one-pod Job of ``job_id`` (``job``: its row) and its GPU plan, as its
    Grant and the executor's ``settings`` say; the notebook's outputs are stripped where
    they would not fit. Raises :class:`JobFilesTooLarge`."""
    import dataclasses

    from gpuspawner.backends import cpu_only_plan

    plan = cpu_only_plan()
    if grant is not None and grant.plan is not None:
        # The share's variables and the GPUSPAWNER_* ones describing it win over all.
        plan = dataclasses.replace(grant.plan, environment=grant.environment)
    allocation = grant.allocation.to_dict() if grant and grant.allocation else None
    limits = grant.limits if grant else None
    if len(notebook) + len(spec) > settings.max_job_files_bytes:
        notebook = strip_outputs(notebook)
    configmap = make_configmap(
        job_id=job_id,
        owner=job.owner,
        notebook=notebook,
        spec=spec,
        namespace=settings.namespace,
        max_bytes=settings.max_job_files_bytes,
        run=run,
    )
    pinned = grant is not None and settings.pin_to_node and grant.nodes == 1
    manifest = make_job(
        job_id=job_id,
        owner=job.owner,
        image=image,
        plan=plan,
        flavor=job.flavor,
        cpu=(limits.cpu if limits else None) or settings.default_cpu,
        memory_bytes=memory_bytes,
        deadline_seconds=job.deadline_seconds,
        environment={**(grant.variables if grant else {}), **settings.environment},
        allocation=allocation,
        namespace=settings.namespace,
        node_name=grant.node if pinned else None,
        backoff_limit=settings.backoff_limit,
        queue_name=settings.queue_name,
        service_account=settings.service_account,
        priority_class_name=settings.priority_class_name,
        image_pull_policy=settings.image_pull_policy or None,
        termination_grace_seconds=max(1, round(settings.stop_grace_seconds)),
        shm_size=settings.shm_size or None,
        user=user,
        files=files,
        pod_labels=settings.pod_labels,
        upload_url=upload_url,
        checkpoint=checkpoint,
        run=run,
    )
    return configmap, manifest, plan
