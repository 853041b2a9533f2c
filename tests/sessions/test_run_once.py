"""One round of the service over HTTP, against a stand-in for the hub's REST API."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from gpuspawner.policy.prewarm import verify_prewarm_token
from gpuspawner.sessions.audit import AuditLog
from gpuspawner.sessions.hub_client import HubClient, HubUnavailable
from gpuspawner.sessions.service import SessionsService, run_once
from gpuspawner.sessions.watched_catalog import WatchedCatalog

from .fake_hub import FakeHub
from .scenario import ML101_CLASS_START, SECRET, hub_server, hub_user, utc

TOKEN = "service-token-123"
REFUSAL = "All GPUs are in use. Try again when a classmate stops their server."


def monday_morning_hub() -> FakeHub:
    """08:40 UTC on Monday: ml101 is pre-warming; frank's vision server is left from Sunday."""
    users = [
        hub_user("alice"),
        hub_user("bob", hub_server("bob", profile="cpu", started=utc(3, 8, 0))),
        hub_user("erin"),
        hub_user("frank", hub_server("frank", profile="vision", started=utc(2, 9, 0))),
        hub_user("root", admin=True),
        hub_user("zoe@campus.edu"),
    ]
    return FakeHub(
        token=TOKEN,
        users={u["name"]: u for u in users},
        groups={"ml101-lab": ["erin", "zoe@campus.edu"]},
        replies={"erin": (403, REFUSAL)},
        now=utc(3, 8, 40),
    )


def read_audit(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_a_round_reclaims_prewarms_and_records_refusals(catalog, tmp_path):
    hub = monday_morning_hub()
    audit_path = tmp_path / "audit.jsonl"
    tried: set = set()
    async with hub.serving() as api_url:
        client = HubClient(api_url, TOKEN)
        entries = await run_once(
            client,
            catalog,
            now=utc(3, 8, 40),
            secret=SECRET,
            already_tried=tried,
            audit=AuditLog(audit_path),
        )

        # Every call carries the service's token; all users are read, page by page.
        assert {r.authorization for r in hub.requests} == {f"token {TOKEN}"}
        listing = [r for r in hub.calls("GET") if r.path == "/hub/api/users"]
        assert [r.query.get("offset") for r in listing] == ["0", "2", "4"]
        assert "state" not in listing[0].query
        # frank's leftover server is stopped; alice and zoe are started; erin is refused;
        # bob keeps his CPU server; carol and dave have never logged in.
        assert [r.path for r in hub.calls("DELETE")] == ["/hub/api/users/frank/server"]
        started = {r.path: r.body for r in hub.calls("POST")}
        assert set(started) == {
            "/hub/api/users/alice/server",
            "/hub/api/users/erin/server",
            "/hub/api/users/zoe%40campus.edu/server",  # names are escaped in the path
        }
        body = started["/hub/api/users/zoe%40campus.edu/server"]
        assert body["profile"] == "ml101"
        assert verify_prewarm_token(
            body["prewarm_token"], SECRET, "zoe@campus.edu", "", "ml101", ML101_CLASS_START
        )
        assert hub.users["alice"]["servers"][""]["user_options"]["profile"] == "ml101"
        assert hub.users["zoe@campus.edu"]["servers"][""]["user_options"] == body
        assert hub.users["frank"]["servers"] == {}

        # The audit log has one line per action, with the hub's own words for a refusal.
        lines = read_audit(audit_path)
        assert sorted(lines, key=json.dumps) == sorted(entries, key=json.dumps)
        assert {(e["action"], e["user"]) for e in lines} == {
            ("reclaim", "frank"),
            ("prewarm-skipped", "carol"),
            ("prewarm-skipped", "dave"),
            ("prewarm-start", "alice"),
            ("prewarm-start", "zoe@campus.edu"),
            ("prewarm-refused", "erin"),
        }
        refused = next(e for e in lines if e["action"] == "prewarm-refused")
        assert REFUSAL in refused["detail"] and "403" in refused["detail"]
        assert refused["course"] == "ml101" and refused["server"] == ""
        assert refused["time"] == "2025-03-03T08:40:00+00:00"

        # The next round neither retries the refusal nor restarts anyone.
        hub.requests.clear()
        entries = await run_once(
            client,
            catalog,
            now=utc(3, 8, 41),
            secret=SECRET,
            already_tried=tried,
            audit=AuditLog(audit_path),
        )
        assert entries == []
        assert hub.calls("POST") == [] and hub.calls("DELETE") == []


async def test_a_busy_hub_is_asked_again_next_round(catalog, tmp_path):
    hub = monday_morning_hub()
    hub.replies = {"alice": (429, "Too many users trying to log in right now. Try again.")}
    tried: set = set()
    async with hub.serving() as api_url:
        client = HubClient(api_url, TOKEN)
        audit = AuditLog(tmp_path / "audit.jsonl")
        first = await run_once(
            client, catalog, now=utc(3, 8, 40), secret=SECRET, already_tried=tried, audit=audit
        )
        assert ("prewarm-deferred", "alice") in {(e["action"], e["user"]) for e in first}
        hub.replies = {}
        hub.requests.clear()
        await run_once(
            client, catalog, now=utc(3, 8, 41), secret=SECRET, already_tried=tried, audit=audit
        )
        assert [r.path for r in hub.calls("POST")] == ["/hub/api/users/alice/server"]


async def test_outside_prewarming_only_active_users_are_read(catalog, tmp_path):
    hub = monday_morning_hub()
    async with hub.serving() as api_url:
        await run_once(
            HubClient(api_url, TOKEN),
            catalog,
            now=utc(3, 12, 0),
            secret=SECRET,
            already_tried=set(),
            audit=AuditLog(),
        )
    assert {r.query.get("state") for r in hub.calls("GET")} == {"active"}
    assert [r.path for r in hub.calls("DELETE")] == ["/hub/api/users/frank/server"]


async def test_a_dry_run_records_but_changes_nothing(catalog, tmp_path):
    hub = monday_morning_hub()
    audit_path = tmp_path / "audit.jsonl"
    tried: set = set()
    async with hub.serving() as api_url:
        client = HubClient(api_url, TOKEN)
        for minute in (40, 41):
            await run_once(
                client,
                catalog,
                now=utc(3, 8, minute),
                secret=SECRET,
                already_tried=tried,
                audit=AuditLog(audit_path),
                dry_run=True,
            )
    assert hub.calls("POST") == [] and hub.calls("DELETE") == []
    lines = read_audit(audit_path)
    assert all(line["dry_run"] for line in lines)
    # Said once, not every round.
    assert sorted(line["user"] for line in lines if line["action"] == "prewarm-start") == [
        "alice",
        "erin",
        "zoe@campus.edu",
    ]
    assert [line["user"] for line in lines if line["action"] == "reclaim"] == ["frank"]


async def test_an_unreachable_hub_is_an_error_the_loop_can_retry(catalog):
    client = HubClient("http://127.0.0.1:9/hub/api", TOKEN)
    with pytest.raises(HubUnavailable):
        await run_once(
            client, catalog, now=utc(3, 12, 0), secret=SECRET, already_tried=set(), audit=AuditLog()
        )


class SilentHub:
    """A hub that never answers."""

    async def list_users(self, state=None):
        await asyncio.Event().wait()


async def test_stopping_cuts_a_round_short(catalog_path):
    service = SessionsService(
        SilentHub(),
        WatchedCatalog(catalog_path, AuditLog()),
        AuditLog(),
        clock=lambda: utc(3, 12, 0),
    )
    stop = asyncio.Event()
    running = asyncio.ensure_future(service.run(stop))
    await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(running, timeout=2)


async def test_rounds_go_on_while_the_hub_is_unreachable(catalog_path, caplog):
    service = SessionsService(
        HubClient("http://127.0.0.1:9/hub/api", TOKEN),
        WatchedCatalog(catalog_path, AuditLog()),
        AuditLog(),
        interval=0.05,
        clock=lambda: utc(3, 12, 0),
    )
    stop = asyncio.Event()
    running = asyncio.ensure_future(service.run(stop))
    for _ in range(100):
        if caplog.text.count("Skipping this round") >= 2:
            break
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(running, timeout=2)
    assert caplog.text.count("Skipping this round") >= 2


async def test_the_service_process_reclaims_then_exits_cleanly_on_sigterm(catalog_path, tmp_path):
    # Given the hub has frank's vision server from Sunday (outside any class, whatever the
    # date today), when the service runs as the hub would start it,
    hub = monday_morning_hub()
    audit_path = tmp_path / "audit.jsonl"
    async with hub.serving() as api_url:
        env = {
            **os.environ,
            "JUPYTERHUB_API_URL": api_url,
            "JUPYTERHUB_API_TOKEN": TOKEN,
            "GPUSPAWNER_SESSIONS_INTERVAL": "0.2",
            "GPUSPAWNER_SESSIONS_AUDIT_LOG": str(audit_path),
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gpuspawner.sessions",
            "--catalog",
            str(catalog_path),
            env=env,
            cwd=Path(__file__).resolve().parents[2],
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            for _ in range(100):
                if hub.calls("DELETE"):
                    break
                await asyncio.sleep(0.1)
            # then it stops the server, and SIGTERM ends it with status 0.
            assert [r.path for r in hub.calls("DELETE")] == ["/hub/api/users/frank/server"]
            process.send_signal(signal.SIGTERM)
            output, _ = await asyncio.wait_for(process.communicate(), timeout=10)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert process.returncode == 0, output.decode()
    actions = [line["action"] for line in read_audit(audit_path)]
    assert actions[:2] == ["catalog-reload", "reclaim"]
    assert b"Course sessions service stopped" in output
