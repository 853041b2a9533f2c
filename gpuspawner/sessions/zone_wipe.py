"""The experimental zone's daily wipe, done by the course-sessions service.

Design notes: docs/design/sessions.md, "gpuspawner.sessions.zone_wipe".
"""

from __future__ import annotations

import logging
import os
import pwd
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar
from zoneinfo import ZoneInfo

from ..policy import Catalog
from ..policy.storage import parse_storage_source
from ..policy.zones import wipe_schedule
from .audit import AuditLog

log = logging.getLogger("gpuspawner.sessions")
_T = TypeVar("_T")

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


def unsafe_zone_root(root: Path, catalog: Catalog) -> str | None:
    """Why wiping the folders in ``root`` could touch a home or production storage; None
    when it is safe. Checked before every wipe, by the service or by the root-owned helper
    that wipes for it (:mod:`gpuspawner.zone_wipe_helper`)."""
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
                return f"{resolved} overlaps the production storage {production} of {section.id}"
    return None


# -- the work inside one person's folder, through a descriptor (links never followed) -------


def open_folder(name: str, dir_fd: int | None = None) -> int:
    """A descriptor of the folder ``name`` (in ``dir_fd``); refused when it is a link."""
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)


def folder_holds_data(fd: int, *, top: bool = True) -> bool:
    """True when anything but folders (and, at the top, the notice) is in the folder
    ``fd``: a file or a link counts; links are not followed."""
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                inner = open_folder(entry.name, fd)
                try:
                    if folder_holds_data(inner, top=False):
                        return True
                finally:
                    os.close(inner)
            elif not (top and entry.name == NOTICE):
                return True
    return False


def write_folder_notice(fd: int, message: str) -> None:
    """The warning file at the top of the folder ``fd``, never through a link there."""
    notice = os.open(
        NOTICE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600, dir_fd=fd
    )
    with os.fdopen(notice, "w", encoding="utf-8") as file:
        file.write(message + "\n")


def empty_folder(fd: int) -> tuple[int, list[str]]:
    """Remove everything in the folder ``fd`` (it stays, so links to it keep working);
    links are removed, never followed. The count removed and what could not be, each as
    "name: why"."""
    removed, failed = 0, []
    with os.scandir(fd) as listing:
        entries = list(listing)
    errors: list[str] = []

    def note(_function: object, _path: object, error: Any) -> None:
        errors.append(str(getattr(error[1], "strerror", None) or error[1]))

    for entry in entries:
        errors.clear()
        try:
            if entry.is_dir(follow_symlinks=False):
                # fd-based: links inside are removed, not followed; what can be removed is,
                # whatever else cannot
                shutil.rmtree(entry.name, onerror=note, dir_fd=fd)
            else:
                os.unlink(entry.name, dir_fd=fd)
        except OSError as error:
            errors.append(str(error.strerror or error))
        if errors:
            failed.append(f"{entry.name}: {errors[0]}")
        else:
            removed += 1
    return removed, failed


class FolderAccess(Protocol):
    """How the wiper reaches people's folders in the zone (each by user name)."""

    def where(self, user: str) -> str: ...
    def unsafe(self, catalog: Catalog) -> str | None: ...
    def users(self) -> list[str]: ...
    def holds_data(self, user: str) -> bool: ...
    def has_notice(self, user: str) -> bool: ...
    def write_notice(self, user: str, message: str) -> None: ...
    def empty(self, user: str) -> tuple[int, list[str]]: ...


class ZoneFolders:
    """People's folders in the zone, reached with the service's own access: on Kubernetes
    (the zone's volume mounted in the hub pod) and on a one-account demo hub.

    The workstation, where each folder is its person's alone, reaches them through a
    root-owned helper instead (:class:`gpuspawner.zone_wipe_helper.HelperZoneFolders`,
    the same methods)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._unreadable_logged = False

    def where(self, user: str) -> str:
        """The person's folder, in the audit's words."""
        return str(self.root / user)

    def unsafe(self, catalog: Catalog) -> str | None:
        return unsafe_zone_root(self.root, catalog)

    def users(self) -> list[str]:
        """Who has a folder in the zone (real folders only, in name order)."""
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
        return [e.name for e in entries if e.is_dir(follow_symlinks=False)]

    def _in(self, user: str, work: Callable[[int], _T]) -> _T:
        fd = open_folder(str(self.root / user))
        try:
            return work(fd)
        finally:
            os.close(fd)

    def holds_data(self, user: str) -> bool:
        return self._in(user, folder_holds_data)

    def has_notice(self, user: str) -> bool:
        return os.path.lexists(self.root / user / NOTICE)

    def write_notice(self, user: str, message: str) -> None:
        self._in(user, lambda fd: write_folder_notice(fd, message))

    def empty(self, user: str) -> tuple[int, list[str]]:
        return self._in(user, empty_folder)


class ExperimentalZoneWiper:
    """Warns and wipes the experimental zone's folders, once per wipe moment."""

    def __init__(self, root: str | Path | FolderAccess, audit: AuditLog):
        self.folders: FolderAccess = ZoneFolders(root) if isinstance(root, str | Path) else root
        """Where people's folders are reached: directly (a folder), or through the
        workstation's helper (:class:`gpuspawner.zone_wipe_helper.HelperZoneFolders`)."""
        self.audit = audit
        self.warned_for: datetime | None = None
        """The wipe moment the warnings in ``warnings`` are about."""
        self.wiped: datetime | None = None
        """The last wipe moment carried out (or found refused)."""
        self.warnings: dict[str, ZoneWarning] = {}
        """The warnings in force, by user, until the wipe."""

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

    def _holds_data(self, user: str) -> bool:
        try:
            return self.folders.holds_data(user)
        except OSError as error:
            log.warning("Could not look into %s: %s", self.folders.where(user), error)
            return False

    def _warn(self, now: datetime, wipe_at: datetime, zone: ZoneInfo) -> list:
        entries = []
        for user in self.folders.users():
            if user in self.warnings or not self._holds_data(user):
                continue
            message = (
                f"Your experimental-zone folders will be wiped {_at(wipe_at, now, zone)}: "
                "copy what you want to keep to your home or production storage before then."
            )
            self.warnings[user] = ZoneWarning(user, wipe_at, message)
            try:
                # Written for the service, not by the user: never through a link they made.
                self.folders.write_notice(user, message)
            except OSError as error:
                log.warning(
                    "Could not write the wipe notice in %s: %s", self.folders.where(user), error
                )
            entries.append(
                self.audit.record(
                    now,
                    "zone-warn",
                    user=user,
                    detail=f"{user} warned: their experimental-zone folder "
                    f"{self.folders.where(user)} is wiped at "
                    f"{wipe_at.astimezone(zone):%Y-%m-%d %H:%M %Z}.",
                    reason="experimental-zone",
                )
            )
        return entries

    def _wipe(self, catalog: Catalog, now: datetime, moment: datetime) -> list:
        self.warnings = {}
        unsafe = self.folders.unsafe(catalog)
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
        for user in self.folders.users():
            if not self._holds_data(user) and not self.folders.has_notice(user):
                continue  # empty folders only: nothing of anyone's to wipe
            try:
                removed, failed = self.folders.empty(user)
            except OSError as error:
                removed, failed = 0, [f"the folder: {error.strerror or error}"]
            if not removed and not failed:
                continue
            detail = (
                f"Wiped {self.folders.where(user)}: {removed} item"
                f"{'s' if removed != 1 else ''} removed"
            )
            if failed:
                detail += f"; {len(failed)} could not be removed ({', '.join(failed[:3])})"
            entries.append(
                self.audit.record(
                    now,
                    "zone-wipe",
                    user=user,
                    detail=detail + ".",
                    reason="experimental-zone",
                )
            )
        return entries
