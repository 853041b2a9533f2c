"""A storage provisioner for the test cluster: claims of one StorageClass get a folder.

A real cluster's claims are provisioned by a CSI driver. Here a claim of
:data:`STORAGE_CLASS` gets a ``hostPath`` PersistentVolume, made for it (``claimRef``) by
this provisioner as an external provisioner does, whose folder is the claim's folder on the
node (the same one the node's image runner mounts: ``<root>/claims/<namespace>/<claim>``).
The real PersistentVolume controller binds them; deleting the claim deletes the volume
(``Delete`` reclaim policy) and, here, its folder.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from pathlib import Path
from typing import Any

from ..k8s_emulator.client import ClientError, KubeClient

log = logging.getLogger(__name__)

STORAGE_CLASS = "campus-test-local"
PROVISIONER = "campus-test.local/folder"
PROVISIONER_ANNOTATION = "volume.kubernetes.io/storage-provisioner"

Object = dict[str, Any]


def storage_class() -> Object:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }


def claim_folder(root: Path, namespace: str, claim: str) -> Path:
    return root / "claims" / namespace / claim


class FolderProvisioner:
    """Makes a volume for each claim of :data:`STORAGE_CLASS` (as the cluster admin)."""

    def __init__(self, admin: KubeClient, root: Path) -> None:
        self.admin = admin
        self.root = root

    def on_claim(self, kind: str, claim: Object, old: Object | None) -> None:
        import asyncio

        asyncio.ensure_future(self._handle(kind, claim))

    async def _handle(self, kind: str, claim: Object) -> None:
        meta = claim["metadata"]
        spec = claim.get("spec") or {}
        if spec.get("storageClassName") != STORAGE_CLASS:
            return
        name = f"pvc-{meta['uid']}"
        folder = claim_folder(self.root, meta["namespace"], meta["name"])
        if kind == "DELETED":
            with contextlib.suppress(ClientError):
                await self.admin.delete(f"/api/v1/persistentvolumes/{name}")
            shutil.rmtree(folder, ignore_errors=True)
            return
        if (
            spec.get("volumeName")
            or (meta.get("annotations") or {}).get(PROVISIONER_ANNOTATION) != PROVISIONER
        ):
            return
        folder.mkdir(parents=True, exist_ok=True)
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": name,
                "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER},
            },
            "spec": {
                "capacity": {
                    "storage": ((spec.get("resources") or {}).get("requests") or {}).get(
                        "storage", "1Gi"
                    )
                },
                "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": STORAGE_CLASS,
                "claimRef": {
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
                "hostPath": {"path": str(folder), "type": "DirectoryOrCreate"},
            },
        }
        try:
            await self.admin.create("/api/v1/persistentvolumes", volume)
        except ClientError as error:
            if error.status != 409:
                log.warning("could not provision %s/%s: %s", meta["namespace"], meta["name"], error)
