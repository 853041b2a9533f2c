"""The experimental zone's daily wipe, done by the course-sessions service.

The zone's storage is one folder (``experimental_root``: a host folder on one machine, the
zone's shared volume mounted into the service on Kubernetes) holding a folder per user,
``<root>/<user>/<entry>``. At ``settings.experimental_zone.wipe_at`` every user's folder is
emptied; ``warning`` before that, each person whose folder holds data is warned: an audit
line and a notice file at the top of their folder, which goes with the wipe;
the hub's home page shows the warning too (the service's reclaim page).

Only what is inside the root is ever removed, without following a link out of it; a root
that is or holds a home folder, or that overlaps a production ``path:`` storage of the
catalog, is refused (audited) and nothing is wiped.
"""

from __future__ import annotations

import logging
import os
import pwd
import shutil
import stat
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from ..policy import Catalog
from ..policy.storage import parse_storage_source
from ..policy.zones import wipe_schedule
from .audit import AuditLog

log = logging.getLogger("gpuspawner.sessions")

NOTICE = "EXPERIMENTAL-ZONE-WIPE.txt"
"""The warning file put at the top of a user's folder before a wipe."""


@dataclass(frozen=True)
class ZoneWarning:
    """What one person with data in the experimental zone is told before a wipe."""

    user: str
    wipe_at: datetime
    message: str


def _at(moment: datetime, now: datetime, zone: ZoneInfo) -> str:
    """ "at 03:00", "tomorrow at 03:00" or "on Tue 11 Mar at 03:00", in ``zone``."""
    local, today = moment.astimezone(zone), now.astimezone(zone).date()
    if local.date() == today:
        return f"at {local:%H:%M}"
    if (local.date() - today).days == 1:
        return f"tomorrow at {local:%H:%M}"
    return f"on {local:%a %d %b} at {local:%H:%M}"


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


class ExperimentalZoneWiper:
    """Warns and wipes the experimental zone's folder, once per wipe moment."""

    def __init__(self, root: str | Path, audit: AuditLog):
        self.root = Path(root)
        self.audit = audit
        self.warned_for: datetime | None = None
        """The wipe moment the warnings in ``warnings`` are about."""
        self.wiped: datetime | None = None
        """The last wipe moment carried out (or found refused)."""
        self.warnings: dict[str, ZoneWarning] = {}
        """The warnings in force, by user, until the wipe."""
        self._unreadable_logged = False

    # -- what is where -------------------------------------------------------------------

    def _unsafe_root(self, catalog: Catalog) -> str | None:
        """Why wiping ``root`` could touch a home or production storage; None when safe."""
        root = self.root
        if root.is_symlink() or not root.is_dir():
            return f"{root} is not a folder (or is a link)"
        if not os.access(root, os.R_OK | os.X_OK):
            return f"the service may not list {root}"
        resolved = root.resolve()
        if resolved == Path("/") or len(resolved.parts) < 3:
            return f"{resolved} is too close to the top of the file system"
        homes = {Path(entry.pw_dir).resolve() for entry in pwd.getpwall() if entry.pw_dir}
        homes |= {Path("/home"), Path("/root"), Path.home().resolve()}
        for home in homes:
            if home == Path("/"):
                continue
            if _inside(home, resolved):
                return f"{resolved} is or holds the home folder {home}"
        for section in (*catalog.courses, *catalog.research, *catalog.standing):
            for mount in section.storage:
                source = parse_storage_source(mount.source)
                if source.kind != "path" or "{" in source.path:
                    continue
                production = Path(source.path).resolve()
                if _inside(production, resolved) or _inside(resolved, production):
                    return (
                        f"{resolved} overlaps the production storage {production} of {section.id}"
                    )
        return None

    def user_folders(self) -> list[Path]:
        """Each user's folder in the zone (real folders only, in name order)."""
        try:
            entries = sorted(os.scandir(self.root), key=lambda e: e.name)
        except OSError as error:
            if not self._unreadable_logged:
                self._unreadable_logged = True
                log.error(
                    "Cannot read the experimental zone's folder %s (%s): nobody is warned "
                    "and nothing is wiped until the service may list it.",
                    self.root,
                    error.strerror or error,
                )
            return []
        self._unreadable_logged = False
        return [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]

    @staticmethod
    def _holds_data(folder: Path) -> bool:
        """True when anything but empty folders (and the notice) is in ``folder``."""
        for top, folders, files in os.walk(folder, followlinks=False):
            if top == str(folder):
                files = [f for f in files if f != NOTICE]
            if files or any(os.path.islink(os.path.join(top, f)) for f in folders):
                return True
        return False

    # -- one round -------------------------------------------------------------------------

    def round(self, catalog: Catalog, now: datetime) -> list[dict]:
        """Warn or wipe as the catalog's zone settings and ``now`` require; the audit
        entries made."""
        settings = catalog.settings.experimental_zone
        if settings is None:
            return []
        zone = ZoneInfo(catalog.settings.timezone)
        schedule = wipe_schedule(settings, zone, now)
        done: list[dict] = []
        if schedule.wipe_due(now) and self.wiped != schedule.previous:
            self.wiped = schedule.previous
            done += self._wipe(catalog, now, schedule.previous)
        if schedule.warning_due(now):
            if self.warned_for != schedule.next:
                self.warned_for, self.warnings = schedule.next, {}
            # Every round of the warning period: whoever holds data and was not warned yet.
            done += self._warn(now, schedule.next, zone)
        return done

    def _warn(self, now: datetime, wipe_at: datetime, zone: ZoneInfo) -> list:
        entries = []
        for folder in self.user_folders():
            if folder.name in self.warnings or not self._holds_data(folder):
                continue
            user = folder.name
            message = (
                f"Your experimental-zone folders will be wiped {_at(wipe_at, now, zone)}: "
                "copy what you want to keep to your home or production storage before then."
            )
            self.warnings[user] = ZoneWarning(user, wipe_at, message)
            notice = folder / NOTICE
            try:
                # Written by the service, not the user: never through a link they made.
                if not notice.is_symlink():
                    notice.write_text(message + "\n", encoding="utf-8")
            except OSError as error:
                log.warning("Could not write the wipe notice in %s: %s", folder, error)
            entries.append(
                self.audit.record(
                    now,
                    "zone-warn",
                    user=user,
                    detail=f"{user} warned: their experimental-zone folder {folder} is "
                    f"wiped at {wipe_at.astimezone(zone):%Y-%m-%d %H:%M %Z}.",
                    reason="experimental-zone",
                )
            )
        return entries

    def _wipe(self, catalog: Catalog, now: datetime, moment: datetime) -> list:
        self.warnings = {}
        unsafe = self._unsafe_root(catalog)
        if unsafe is not None:
            return [
                self.audit.record(
                    now,
                    "zone-wipe-refused",
                    detail=f"The experimental zone was not wiped: {unsafe}. Point the "
                    "service's experimental root at a folder of its own.",
                    reason="experimental-zone",
                )
            ]
        entries = []
        for folder in self.user_folders():
            if not self._holds_data(folder) and not os.path.lexists(folder / NOTICE):
                continue  # empty folders only: nothing of anyone's to wipe
            removed, failed = self._empty(folder)
            if not removed and not failed:
                continue
            detail = f"Wiped {folder}: {removed} item{'s' if removed != 1 else ''} removed"
            if failed:
                detail += f"; {len(failed)} could not be removed ({', '.join(failed[:3])})"
            entries.append(
                self.audit.record(
                    now,
                    "zone-wipe",
                    user=folder.name,
                    detail=detail + ".",
                    reason="experimental-zone",
                )
            )
        return entries

    @staticmethod
    def _empty(folder: Path) -> tuple[int, list[str]]:
        """Remove everything in ``folder`` (itself stays, so links to it keep working);
        links are removed, never followed."""
        removed, failed = 0, []
        for entry in os.scandir(folder):
            path = Path(entry.path)
            try:
                mode = os.lstat(path).st_mode
                if stat.S_ISDIR(mode):
                    shutil.rmtree(path)  # does not follow links inside (fd-based on Linux)
                else:
                    path.unlink()
                removed += 1
            except OSError as error:
                failed.append(f"{entry.name}: {error.strerror or error}")
        return removed, failed
