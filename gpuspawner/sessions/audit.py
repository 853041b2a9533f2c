"""The service's audit trail: every action goes to the log and, as one JSON line, to a file."""

from __future__ import annotations

import json
import logging
from collections import deque
from datetime import datetime
from pathlib import Path

log = logging.getLogger("gpuspawner.sessions")

# Actions that need someone's attention are logged above INFO.
LEVELS = {
    "warn": logging.WARNING,
    "prewarm-refused": logging.WARNING,
    "prewarm-skipped": logging.WARNING,
    "reclaim-failed": logging.ERROR,
    "catalog-error": logging.ERROR,
    "zone-wipe-refused": logging.ERROR,
}


class AuditLog:
    """Records actions to the ``gpuspawner.sessions`` logger and to a JSON-lines file.

    Each line: ``{"time", "action", "user", "server", "course", "detail"}``, plus
    ``"reason"`` for warnings, reclaims and keeps (``idle``, ``grant-expired``,
    ``unopened-prewarm``, ``class-ended``) and ``"dry_run": true`` for what a dry run
    would have done, and ``"by"``: the instructor or admin who made a change on the course
    page. The file is opened for each line, so rotating it needs no signal. The latest
    ``RECENT`` entries are kept in memory too (``recent``), for the course page's history.
    """

    RECENT = 500

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else None
        self.recent: deque[dict] = deque(maxlen=self.RECENT)

    def record(
        self,
        time: datetime,
        action: str,
        *,
        user: str | None = None,
        server: str | None = None,
        course: str | None = None,
        detail: str = "",
        dry_run: bool = False,
        reason: str | None = None,
        by: str | None = None,
    ) -> dict:
        entry: dict = {
            "time": time.isoformat(),
            "action": action,
            "user": user,
            "server": server,
            "course": course,
            "detail": detail,
        }
        if reason is not None:
            entry["reason"] = reason
        if by is not None:
            entry["by"] = by
        if dry_run:
            entry["dry_run"] = True
        log.log(
            LEVELS.get(action, logging.INFO),
            "%s%s: %s",
            "(dry run) " if dry_run else "",
            action,
            detail,
        )
        if self.path is not None:
            try:
                with self.path.open("a", encoding="utf-8") as file:
                    file.write(json.dumps(entry) + "\n")
            except OSError as error:
                log.error("Could not append to the audit log %s: %s", self.path, error)
        self.recent.append(entry)
        return entry
