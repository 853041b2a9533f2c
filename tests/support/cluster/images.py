"""Container images as the test cluster's node runs them: this machine's programs in place of
the images' file systems, the pod's volumes mounted where the containers expect them.

``ImageRunner`` runs a container of a known image with its command and args as written,
inside a mount namespace of its own (mounts.py, so root only) where each volume mount of
the container is at its ``mountPath``: ConfigMap, Secret, projected (the service account's
token) and downwardAPI volumes as files, emptyDirs as folders of the pod, claims as
folders of the cluster that outlive their pods, and ``/etc/hosts`` naming the namespace's
Services (services.py). What an image brings is described by an :class:`Image`: the
programs on its ``PATH`` (the project's virtualenv for the hub, job service and user
images, configurable-http-proxy from ``node_modules``, the built kube-scheduler), its
working directory and its entrypoint.

Containers run as root whatever their ``securityContext`` says (the node isolates nothing,
see README.md); Jupyter servers are told that this is allowed, as their image's config.
"""

from __future__ import annotations

import fnmatch
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..k8s_emulator.containers import ProcessRunner

REPO = Path(__file__).resolve().parents[3]
VENV_BIN = Path(sys.executable).parent
NODE_BIN = REPO / "node_modules" / ".bin"
IMAGE_FILES = Path(__file__).parent / "image_files"
ALLOW_ROOT = IMAGE_FILES / "jupyter"
"""A Jupyter config folder saying ``allow_root``: the servers here run as root."""

Object = dict[str, Any]


@dataclass(frozen=True)
class Image:
    """What an image brings: programs on ``PATH``, variables, a working directory, an
    entrypoint used when a container gives no command, and files it holds."""

    path: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    working_dir: str = "/"
    entrypoint: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)
    """Absolute path in the container -> a file or folder of this machine."""
    runs_as_pod_user: bool = False
    """Its entrypoint switches to the pod's ``runAsUser`` itself ($RUN_AS_UID, $RUN_AS_GID)."""


def project_image(working_dir: str, home: str) -> Image:
    """The hub, job-service and user images: this checkout's virtualenv."""
    return Image(
        path=(str(VENV_BIN), str(NODE_BIN)),
        env={"HOME": home, "JUPYTER_CONFIG_PATH": str(ALLOW_ROOT), "PYTHONUNBUFFERED": "1"},
        working_dir=working_dir,
    )


def default_images(kube_scheduler: Path) -> dict[str, Image]:
    """The images the project's chart deployment uses, by repository pattern."""
    return {
        "*/campus-gpu-hub/hub": project_image("/srv/jupyterhub", "/home/jovyan"),
        "*/campus-gpu-hub/user": project_image("/home/jovyan", "/home/jovyan"),
        "quay.io/jupyterhub/configurable-http-proxy": Image(
            path=(str(NODE_BIN),), working_dir="/srv/configurable-http-proxy"
        ),
        "registry.k8s.io/kube-scheduler": Image(
            files={"/usr/local/bin/kube-scheduler": str(kube_scheduler)}
        ),
        "registry.k8s.io/pause": Image(entrypoint=("sleep", "infinity")),
        # PostgreSQL's official image: its entrypoint with Debian's PostgreSQL of this
        # machine (as `make test` installs it), running the server as the pod's user.
        "docker.io/library/postgres": Image(
            entrypoint=(str(IMAGE_FILES / "postgres-entrypoint.sh"),),
            env={"PGDATA": "/var/lib/postgresql/data"},
            working_dir="/",
            runs_as_pod_user=True,
        ),
    }


def repository(image: str) -> str:
    name = image.split("@")[0]
    last = name.rsplit("/", 1)[-1]
    return name.rsplit(":", 1)[0] if ":" in last else name


@dataclass
class ImageRunner(ProcessRunner):
    """Runs the containers of pods whose every image is known (``images``)."""

    images: dict[str, Image] = field(default_factory=dict)
    hosts: Any = None
    """A callable: the namespace's hosts file (the node's ServiceProxy.hosts_file)."""
    network: Any = None
    """The node's PodNetwork (pod_network.py), when pods get network namespaces."""

    def image(self, name: str) -> Image | None:
        repo = repository(name)
        for pattern, image in self.images.items():
            if fnmatch.fnmatchcase(repo, pattern):
                return image
        return None

    def matches(self, pod: Object) -> bool:
        containers = (pod.get("spec") or {}).get("containers") or []
        inits = (pod.get("spec") or {}).get("initContainers") or []
        return bool(containers) and all(self.image(c["image"]) for c in containers + inits)

    def claim_folder(self, namespace: str, claim: str) -> Path:
        folder = self._root() / "claims" / namespace / claim
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def _root(self) -> Path:
        assert self.workdir is not None
        return self.workdir

    def prepare(
        self,
        pod: Object,
        container: Object,
        env: dict[str, str],
        volumes: dict[str, dict[str, bytes]] | None = None,
    ) -> tuple[list[str], dict[str, str], Path]:
        image = self.image(container["image"])
        assert image is not None
        meta = pod["metadata"]
        namespace = meta.get("namespace", "default")
        pod_dir = self._root() / "pods" / namespace / meta["name"]
        sources = self._volumes(pod, pod_dir, volumes or {})
        binds = []
        for mount in container.get("volumeMounts") or []:
            source = sources[mount["name"]]
            if mount.get("subPath"):
                source = source / mount["subPath"]
                if not source.exists():
                    source.mkdir(parents=True, exist_ok=True)
            binds.append(
                {
                    "source": str(source),
                    "target": mount["mountPath"],
                    "read_only": bool(mount.get("readOnly")),
                }
            )
        for target, source in image.files.items():
            binds.append({"source": source, "target": target, "read_only": True})
        if self.hosts is not None:
            binds.append({"source": str(self.hosts(namespace)), "target": "/etc/hosts"})
        container_dir = pod_dir / "containers" / container["name"]
        container_dir.mkdir(parents=True, exist_ok=True)
        workdir = container.get("workingDir") or image.working_dir
        spec = container_dir / "mounts.json"
        layout: dict[str, Any] = {
            "scratch": str(container_dir / "scratch"),
            "binds": binds,
            "cwd": workdir,
        }
        if self.network is not None and self.network.has_pod(meta["uid"]):
            layout["netns"] = self.network.namespace(meta["uid"])
        spec.write_text(json.dumps(layout))
        command = list(container.get("command") or image.entrypoint)
        argv = command + list(container.get("args") or [])
        if not argv:
            raise RuntimeError(f"container {container['name']!r} has no command")
        base = {
            "PATH": os.pathsep.join([*image.path, "/usr/local/bin", "/usr/bin", "/bin"]),
            "PYTHONPATH": str(REPO),
            **image.env,
        }
        if image.runs_as_pod_user:
            security = {
                **((pod.get("spec") or {}).get("securityContext") or {}),
                **(container.get("securityContext") or {}),
            }
            if security.get("runAsUser") is not None:
                base["RUN_AS_UID"] = str(security["runAsUser"])
                base["RUN_AS_GID"] = str(security.get("runAsGroup", security["runAsUser"]))
        launcher = [sys.executable, "-m", "tests.support.cluster.mounts", str(spec), "--"]
        return launcher + argv, {**base, **self.env, **env}, pod_dir

    def _volumes(
        self, pod: Object, pod_dir: Path, files: dict[str, dict[str, bytes]]
    ) -> dict[str, Path]:
        """Each volume of the pod as a folder of this machine."""
        namespace = pod["metadata"].get("namespace", "default")
        made: dict[str, Path] = {}
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            name = volume["name"]
            if "persistentVolumeClaim" in volume:
                made[name] = self.claim_folder(
                    namespace, volume["persistentVolumeClaim"]["claimName"]
                )
                continue
            folder = pod_dir / "volumes" / name
            folder.mkdir(parents=True, exist_ok=True)
            for relative, data in files.get(name, {}).items():
                target = folder / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            made[name] = folder
        return made
