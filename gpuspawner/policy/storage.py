"""Storage from the catalog: what a profile's ``storage:`` entries mean, and how each is mounted.

Design notes: docs/design/policy.md, "gpuspawner.policy.storage".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

SourceKind = Literal["pvc", "nfs", "path", "scratch", "experimental"]

_CLAIM = re.compile(r"^[a-z0-9{]([-a-z0-9.{}]*[a-z0-9}])?$")


@dataclass(frozen=True)
class StorageSource:
    """One parsed ``source``."""

    kind: SourceKind
    claim: str = ""
    server: str = ""
    path: str = ""
    """The sub-path of a claim, the export of an NFS server, or the host folder."""


def parse_storage_source(text: str) -> StorageSource:
    """The source ``text`` means; raises ValueError with the forms it accepts."""
    forms = (
        'use "pvc:CLAIM" or "pvc:CLAIM/SUB/PATH", "nfs:SERVER:/EXPORT/PATH", "path:/HOST/PATH", '
        '"scratch" or "experimental"'
    )
    if text in ("scratch", "experimental"):
        return StorageSource(text)  # type: ignore[arg-type]
    kind, _, rest = text.partition(":")
    if kind == "pvc":
        claim, _, sub = rest.partition("/")
        if not _CLAIM.match(claim) or ".." in sub.split("/"):
            raise ValueError(f"{text!r} is not a claim name (lowercase, digits, dashes); {forms}")
        return StorageSource("pvc", claim=claim, path=sub)
    if kind == "nfs":
        server, _, path = rest.partition(":")
        if not server or not path.startswith("/") or ".." in path.split("/"):
            raise ValueError(f"{text!r} is not an NFS export; {forms}")
        return StorageSource("nfs", server=server, path=path)
    if kind == "path":
        if not rest.startswith("/") or ".." in rest.split("/"):
            raise ValueError(f"{text!r} is not an absolute host path; {forms}")
        return StorageSource("path", path=rest)
    raise ValueError(f"{text!r} is not a storage source; {forms}")


@dataclass(frozen=True)
class Mount:
    """One catalog storage entry, parsed: what a grant carries."""

    name: str
    source: StorageSource
    mount: str
    read_only: bool

    @property
    def writable(self) -> bool:
        return self.source.kind in ("scratch", "experimental") or not self.read_only

    def describe(self, *, local: bool) -> str:
        """For the spawn card: "course-data at /data (read-only)"."""
        if local and self.source.kind in ("pvc", "nfs"):
            return f"{self.name} (not available on this machine)"
        where = f"~/{self.name}" if local else self.mount
        return f"{self.name} at {where}" + ("" if self.writable else " (read-only)")


def parse_mounts(entries: Any) -> tuple[Mount, ...]:
    """The parsed mounts of a profile's ``storage`` (catalog ``StorageMount`` models)."""
    return tuple(
        Mount(e.name, parse_storage_source(e.source), e.mount, bool(e.read_only)) for e in entries
    )


def kubernetes_volumes(
    mounts: tuple[Mount, ...],
    expand: Callable[[str], str],
    experimental: StorageSource | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Pod ``volumes`` and container ``volumeMounts`` for ``mounts`` (``expand`` fills in
    ``{username}``). ``experimental``: the experimental zone's volume (a claim or an NFS
    export holding every user's folder); an ``experimental`` entry mounts the user's
    folder of it (``{username}/<entry name>``)."""
    volumes: list[dict[str, Any]] = []
    volume_mounts: list[dict[str, Any]] = []
    for mount in mounts:
        source, read_only = mount.source, not mount.writable
        volume: dict[str, Any] = {"name": mount.name}
        volume_mount: dict[str, Any] = {"name": mount.name, "mountPath": mount.mount}
        zone_folder = ""
        if source.kind == "experimental":
            if experimental is None:
                raise ValueError(
                    f"{mount.name} mounts the experimental zone, which has no volume; set "
                    "settings.experimental_zone.volume in the catalog"
                )
            # The user's folder of the zone's volume, as a sub-path (claims and exports alike).
            inside = experimental.path if experimental.kind == "pvc" else ""
            zone_folder = "/".join(p for p in (inside, expand("{username}"), mount.name) if p)
            source = replace(
                experimental, path="" if experimental.kind == "pvc" else experimental.path
            )
        if source.kind == "pvc":
            volume["persistentVolumeClaim"] = {
                "claimName": expand(source.claim),
                "readOnly": read_only,
            }
            if source.path:
                volume_mount["subPath"] = expand(source.path)
        elif source.kind == "nfs":
            volume["nfs"] = {"server": source.server, "path": source.path, "readOnly": read_only}
        elif source.kind == "path":
            volume["hostPath"] = {"path": expand(source.path), "type": "Directory"}
        else:
            volume["emptyDir"] = {}
        if zone_folder:
            volume_mount["subPath"] = zone_folder
        if read_only:
            volume_mount["readOnly"] = True
        volumes.append(volume)
        volume_mounts.append(volume_mount)
    return volumes, volume_mounts
