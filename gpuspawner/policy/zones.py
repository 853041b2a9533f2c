"""The experimental zone's daily wipe: when it is due, and when its warning starts.

Design notes: docs/design/policy.md, "gpuspawner.policy.zones".
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta, tzinfo
from typing import Any

from .catalog import Catalog
from .catalog_models import ExperimentalZone
from .storage import StorageSource, parse_storage_source

CATCH_UP = timedelta(hours=1)
"""How late a round may still carry out a wipe it missed."""


def wipe_moment(day_start: datetime, at: time, zone: tzinfo) -> datetime:
    """The wipe of the local day of ``day_start``, as an aware instant."""
    local = day_start.astimezone(zone)
    return datetime.combine(local.date(), at, tzinfo=zone)


@dataclass(frozen=True)
class WipeSchedule:
    """The wipes around one instant."""

    previous: datetime
    """The latest wipe moment at or before now."""
    next: datetime
    """The first wipe moment after now."""
    warning: timedelta

    @property
    def warn_from(self) -> datetime:
        """When the warning about the next wipe starts."""
        return self.next - self.warning

    def warning_due(self, now: datetime) -> bool:
        """True inside the warning period before the next wipe."""
        return self.warn_from <= now < self.next

    def wipe_due(self, now: datetime) -> bool:
        """True when the latest wipe moment has come and is not more than CATCH_UP ago."""
        return self.previous <= now < self.previous + CATCH_UP


def wipe_schedule(settings: ExperimentalZone, zone: tzinfo, now: datetime) -> WipeSchedule:
    """The previous and next wipe moments around ``now`` (aware)."""
    if now.tzinfo is None:
        raise ValueError("wipe_schedule() needs an aware datetime")
    today = wipe_moment(now, settings.wipe_at, zone)
    if today <= now:
        previous = today
        following = wipe_moment(now + timedelta(days=1), settings.wipe_at, zone)
    else:
        previous = wipe_moment(now - timedelta(days=1), settings.wipe_at, zone)
        following = today
    return WipeSchedule(previous, following, settings.warning)


# -- Kubernetes: the zone's volume in the hub pod, where the course-sessions service wipes it --

HUB_ZONE_VOLUME = "experimental-zone"
"""The name of the zone's volume among the hub pod's ``hub.extraVolumes``."""


def _claims_match(claim: str, template: str) -> bool:
    """True when ``claim`` is ``template`` or one of the names it expands to."""
    pattern = "".join(
        ".*" if part.startswith("{") else re.escape(part)
        for part in re.split(r"(\{[^}]*\})", template)
        if part
    )
    return re.fullmatch(pattern, claim) is not None


def _same_storage(volume: Mapping[str, Any], source: StorageSource) -> bool:
    if source.kind == "pvc":
        return (volume.get("persistentVolumeClaim") or {}).get("claimName") == source.claim
    nfs = volume.get("nfs") or {}
    return nfs.get("server") == source.server and nfs.get("path") == source.path


def hub_zone_root(
    catalog: Catalog,
    volumes: Sequence[Mapping[str, Any]],
    volume_mounts: Sequence[Mapping[str, Any]],
    *,
    home_claims: Collection[str] = (),
) -> str | None:
    """Kubernetes: where the hub pod mounts the experimental zone's volume, the folder the
    course-sessions service (in that pod) warns about and wipes (``--experimental-root``);
    None when the catalog's zone has no volume (nothing is wiped, and experimental
    profiles are refused at start).

    ``volumes`` and ``volume_mounts``: the hub pod's (z2jh ``hub.extraVolumes`` and
    ``hub.extraVolumeMounts``); ``home_claims``: the claim names, or templates such as
    ``claim-{username}``, of people's homes. A server mounts ``<sub>/<user>/<entry>`` of the
    zone's claim (``pvc:CLAIM/<sub>``) or ``<user>/<entry>`` of its NFS export, so the hub
    pod must mount that claim at ``<sub>`` (the export whole), read-write, for the wipe to
    find ``<root>/<user>/<entry>``. Raises ValueError, a sentence saying what to change,
    when it does not, when the zone's claim is a home or production claim, or when the hub
    pod mounts a home claim.
    """
    zone = catalog.settings.experimental_zone
    if zone is None or zone.volume is None:
        return None
    source = parse_storage_source(zone.volume)
    if source.kind == "pvc":
        if any(_claims_match(source.claim, home) for home in home_claims):
            raise ValueError(
                f"The experimental zone's volume {zone.volume} is the claim of people's "
                "homes, which the daily wipe would empty; give the zone a claim of its own "
                "(settings.experimental_zone.volume in the catalog)."
            )
        for section in (*catalog.courses, *catalog.research, *catalog.standing):
            for entry in section.storage:
                production = parse_storage_source(entry.source)
                if production.kind == "pvc" and _claims_match(source.claim, production.claim):
                    raise ValueError(
                        f"The experimental zone's volume {zone.volume} is the claim of "
                        f"{section.id}'s production storage {entry.name!r}, which the daily "
                        "wipe would empty; give the zone a claim of its own."
                    )
    for volume in volumes:
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim and any(_claims_match(claim, home) for home in home_claims):
            raise ValueError(
                f"The hub pod mounts the claim {claim!r} of people's homes (volume "
                f"{volume.get('name')!r}); remove it from hub.extraVolumes: the hub needs "
                "only the experimental zone's claim."
            )
    named = [v["name"] for v in volumes if _same_storage(v, source)]
    mounts = [m for m in volume_mounts if m.get("name") in named]
    how = (
        f"add a volume {{name: {HUB_ZONE_VOLUME}, persistentVolumeClaim: {{claimName: "
        f"{source.claim}}}}} to hub.extraVolumes"
        if source.kind == "pvc"
        else f"add a volume {{name: {HUB_ZONE_VOLUME}, nfs: {{server: {source.server}, "
        f"path: {source.path}}}}} to hub.extraVolumes"
    )
    if not mounts:
        raise ValueError(
            f"The catalog's experimental zone is on {zone.volume}, but the hub pod does not "
            f"mount it, so the course-sessions service could never wipe it; {how} with a "
            "read-write mount in hub.extraVolumeMounts (hub_config/kubernetes/"
            "experimental-zone.yaml does both)."
        )
    if len(mounts) > 1:
        raise ValueError(
            f"The hub pod mounts the experimental zone's volume {zone.volume} "
            f"{len(mounts)} times; keep one mount in hub.extraVolumeMounts."
        )
    [mount] = mounts
    wanted = source.path if source.kind == "pvc" else ""
    if (mount.get("subPath") or "").strip("/") != wanted.strip("/"):
        where = f"subPath: {wanted}" if wanted else "no subPath"
        raise ValueError(
            f"The hub pod mounts the experimental zone's volume {zone.volume} at the "
            f"sub-path {mount.get('subPath')!r}, but servers keep each person's folder at "
            f"{'/'.join(p for p in (wanted, '<user>') if p)}; give its mount {where}."
        )
    if mount.get("readOnly"):
        raise ValueError(
            f"The hub pod mounts the experimental zone's volume {zone.volume} read-only, so "
            "the course-sessions service could not wipe it; remove readOnly from its mount."
        )
    return str(mount["mountPath"])
