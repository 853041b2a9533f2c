"""The audit trail, and a catalog that changes while the service runs."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from gpuspawner.sessions.audit import AuditLog
from gpuspawner.sessions.watched_catalog import WatchedCatalog

from .scenario import CATALOG_YAML, utc


def audit_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def touch_later(path: Path, seconds: int) -> None:
    """Move the file's mtime forward, as a save a few seconds later would."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + seconds * 1_000_000_000))


def test_each_action_is_one_json_line_and_one_log_record(tmp_path, caplog):
    path = tmp_path / "audit.jsonl"
    audit = AuditLog(path)
    with caplog.at_level(logging.INFO, logger="gpuspawner.sessions"):
        audit.record(
            utc(3, 11, 6),
            "warn",
            user="alice",
            server="",
            course="ml101",
            detail="Alice's server for ML will be stopped at 12:15, in 9 min.",
        )
        audit.record(
            utc(3, 11, 15),
            "reclaim",
            user="alice",
            server="",
            course="ml101",
            detail="Stopping.",
            dry_run=True,
        )
    assert audit_lines(path) == [
        {
            "time": "2025-03-03T11:06:00+00:00",
            "action": "warn",
            "user": "alice",
            "server": "",
            "course": "ml101",
            "detail": "Alice's server for ML will be stopped at 12:15, in 9 min.",
        },
        {
            "time": "2025-03-03T11:15:00+00:00",
            "action": "reclaim",
            "user": "alice",
            "server": "",
            "course": "ml101",
            "detail": "Stopping.",
            "dry_run": True,
        },
    ]
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "warn: Alice's server for ML will be stopped at 12:15, in 9 min."),
        ("INFO", "(dry run) reclaim: Stopping."),
    ]


def test_an_unwritable_audit_log_does_not_stop_the_service(tmp_path, caplog):
    audit = AuditLog(tmp_path / "missing-folder" / "audit.jsonl")
    entry = audit.record(utc(3, 9, 0), "reclaim", detail="Stopping.")
    assert entry["action"] == "reclaim"
    assert "Could not append to the audit log" in caplog.text


def test_the_catalog_is_reloaded_when_it_changes_and_kept_when_it_breaks(catalog_path, tmp_path):
    audit_path = tmp_path / "audit.jsonl"
    watched = WatchedCatalog(catalog_path, AuditLog(audit_path))
    first = watched.current(utc(3, 8, 0))
    assert first is not None and "ml101" in first.courses_by_id
    # Unchanged: the same catalog, nothing recorded.
    assert watched.current(utc(3, 8, 1)) is first

    # An instructor saves a typo: the error is recorded once, the last good catalog stays.
    catalog_path.write_text(CATALOG_YAML.replace("lead_time: 10m", "lead_tme: 10m", 1))
    touch_later(catalog_path, 1)
    assert watched.current(utc(3, 8, 2)) is first
    assert watched.current(utc(3, 8, 3)) is first

    # The fix is picked up.
    catalog_path.write_text(CATALOG_YAML.replace("Machine Learning 101", "ML 101"))
    touch_later(catalog_path, 2)
    fixed = watched.current(utc(3, 8, 4))
    assert fixed is not first and fixed.courses_by_id["ml101"].title == "ML 101"

    lines = audit_lines(audit_path)
    assert [line["action"] for line in lines] == [
        "catalog-reload",
        "catalog-error",
        "catalog-reload",
    ]
    error = lines[1]["detail"]
    assert "lead_tme" in error and f"{catalog_path}:" in error
    assert "keeping the last good catalog" in error


def test_a_catalog_folder_is_watched_file_by_file(tmp_path):
    folder = tmp_path / "courses"
    folder.mkdir()
    (folder / "ml101.yaml").write_text(CATALOG_YAML)
    watched = WatchedCatalog(folder, AuditLog())
    assert set(watched.current(utc(3, 8, 0)).courses_by_id) == {"ml101", "vision"}
    (folder / "extra.yaml").write_text(
        "courses:\n"
        "  - id: stats\n"
        "    title: Statistics\n"
        "    schedule:\n"
        "      term: {first_day: 2025-02-17, last_day: 2025-06-01}\n"
        '      windows: [{day: Fri, start: "08:00", end: "10:00"}]\n'
    )
    assert set(watched.current(utc(3, 8, 1)).courses_by_id) == {"ml101", "vision", "stats"}


def test_without_a_valid_catalog_there_is_nothing_to_act_on(tmp_path):
    watched = WatchedCatalog(tmp_path / "nowhere.yaml", AuditLog())
    assert watched.current(utc(3, 8, 0)) is None
