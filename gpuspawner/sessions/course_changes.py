"""The course-sessions service's side of instructors' changes: the overrides file and its audit.

Design notes: docs/design/sessions.md, "gpuspawner.sessions.course_changes".
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from gpuspawner.policy import Catalog, Course
from gpuspawner.policy.course_overrides import (
    CourseOverrides,
    OverrideRefused,
    forget_extensions,
    overrides_path,
    read_overrides,
)

from .audit import AuditLog

EXTENSIONS_KEPT = timedelta(days=2)
"""Extensions of servers started longer ago than this are dropped at the next change."""


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one rename (readers see the old or the new file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class CourseChanges:
    """Applies one instructor's change to the overrides file, and audits it."""

    def __init__(self, audit: AuditLog):
        self.audit = audit

    def change(
        self,
        catalog: Catalog,
        course: Course,
        *,
        by: str,
        now: datetime,
        action: str,
        detail: str,
        update: Callable[[CourseOverrides], CourseOverrides],
        user: str | None = None,
        server: str | None = None,
    ) -> CourseOverrides:
        """Check ``update`` against the file as it is now, write the result, audit it.

        Raises :class:`OverrideRefused` (with a sentence) when the bounds or the schedule
        do not allow it, or when the file cannot be read or written.
        """
        path = overrides_path(catalog)
        if path is None:
            raise OverrideRefused(
                "The hub admins have not let instructors change their courses here "
                "(settings.instructor_bounds.overrides_file in the catalog); ask them to.",
                403,
            )
        document, problems = read_overrides(path)
        if problems:
            raise OverrideRefused(
                f"Your change was not saved: {problems[0]}. The hub admins must fix or remove "
                "the file first.",
                503,
            )
        changed = update(document.of(course.id))
        changed = forget_extensions(changed, now - EXTENSIONS_KEPT)
        try:
            write_atomically(path, document.replace(course.id, changed).to_json())
        except OSError as error:
            raise OverrideRefused(
                f"Your change was not saved: the service cannot write {path} "
                f"({error.strerror}); the hub admins see why in its log.",
                503,
            ) from None
        self.audit.record(
            now, action, user=user, server=server, course=course.id, detail=detail, by=by
        )
        return changed
