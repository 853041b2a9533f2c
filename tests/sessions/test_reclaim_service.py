"""GPU-aware reclaim end to end in the service: simulated NVML readings in a file, the
allocation ledger of one machine, the hub's REST API (a stand-in), the audit log, and the
owners' token API that the lab's server extension calls."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from jupyterhub.services.auth import HubAuth
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port
from tornado.web import Application

from gpuspawner.core.ledger import AllocationLedger
from gpuspawner.core.telemetry import DeviceReading, SimulatedTelemetry, write_readings
from gpuspawner.policy import load_catalog
from gpuspawner.policy.share import GPUDevice
from gpuspawner.sessions.audit import AuditLog
from gpuspawner.sessions.course_api import CourseAPI
from gpuspawner.sessions.hub_client import HubClient
from gpuspawner.sessions.reclaim import ledger_allocations
from gpuspawner.sessions.reclaim_api import reclaim_token_handlers
from gpuspawner.sessions.service import SessionsService
from gpuspawner.sessions.watched_catalog import WatchedCatalog

from .fake_hub import FakeHub
from .reclaim_scenario import RECLAIM_CATALOG_YAML, gpu_server, server_allocation
from .scenario import hub_user, utc

TOKEN = "service-token-123"
DEVICES = [GPUDevice(id=f"sim-{i}", index=i, model="RTX 4090", memory_mib=24576) for i in (0, 1)]


class Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


def readings(path: Path, busy: dict[str, float]) -> None:
    """Write the simulated NVML readings: each device's utilisation."""
    write_readings(
        path,
        [DeviceReading(d.id, d.index, busy.get(d.id, 0.0), 2048, 24576, 45.0) for d in DEVICES],
    )


def audit(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def setup(tmp_path):
    catalog_path = tmp_path / "catalog.yaml"
    catalog_path.write_text(RECLAIM_CATALOG_YAML)
    ledger_path = tmp_path / "allocations.json"
    # alice's and bob's ml101 servers hold a quarter of sim-0 and of sim-1.
    with AllocationLedger(ledger_path).transaction(DEVICES) as pool:
        for allocation in (
            server_allocation("alice", "ml101", "ml101", "sim-0"),
            server_allocation("bob", "ml101", "ml101", "sim-1"),
        ):
            pool.allocations[allocation.key] = allocation
    users = [
        hub_user("alice", gpu_server("alice", "ml101", utc(3, 8, 55))),
        hub_user("bob", gpu_server("bob", "ml101", utc(3, 8, 55))),
        hub_user("rita", gpu_server("rita", "protein-lab", utc(2, 20, 0))),
    ]
    hub = FakeHub(token=TOKEN, users={u["name"]: u for u in users}, now=utc(3, 8, 55))
    audit_path = tmp_path / "audit.jsonl"
    clock = Clock(utc(3, 9, 0))
    return {
        "hub": hub,
        "clock": clock,
        "readings": tmp_path / "gpus.json",
        "audit": audit_path,
        "make": lambda api_url: SessionsService(
            HubClient(api_url, TOKEN),
            WatchedCatalog(catalog_path, AuditLog(audit_path)),
            AuditLog(audit_path),
            clock=clock,
            telemetry=SimulatedTelemetry(tmp_path / "gpus.json"),
            allocations=lambda: ledger_allocations(str(ledger_path)),
        ),
        "catalog": load_catalog(catalog_path),
    }


async def test_an_idle_quarter_gpu_is_warned_then_reclaimed_and_a_busy_one_is_not(setup):
    hub, clock = setup["hub"], setup["clock"]
    async with hub.serving() as api_url:
        service = setup["make"](api_url)
        # Given, from 09:00 UTC, alice's GPU (sim-0) idle, bob's (sim-1) busy, and rita's
        # research server whose grant ended on Sunday,
        # when the service runs a round every 5 minutes until 09:25,
        for minute in range(0, 30, 5):
            clock.now = utc(3, 9, minute)
            readings(setup["readings"], {"sim-1": 87.0})
            await service.tick()

        # then rita, warned at 09:00, lost her server at 09:10; alice is warned at 09:20
        # (10 min before 30 min idle) and still has hers,
        assert [r.path for r in hub.calls("DELETE")] == ["/hub/api/users/rita/server"]
        warned = [e for e in audit(setup["audit"]) if e["action"] == "warn"]
        assert [(e["user"], e["reason"], e["time"]) for e in warned] == [
            ("rita", "grant-expired", utc(3, 9, 0).isoformat()),
            ("alice", "idle", utc(3, 9, 20).isoformat()),
        ]

        # and at 09:30 alice's server is reclaimed; bob's is not, even an hour later.
        clock.now = utc(3, 9, 30)
        await service.tick()
        clock.now = utc(3, 10, 30)
        readings(setup["readings"], {"sim-1": 87.0})
        await service.tick()
        assert [r.path for r in hub.calls("DELETE")] == [
            "/hub/api/users/rita/server",
            "/hub/api/users/alice/server",
        ]
        assert "" in hub.users["bob"]["servers"]

    reclaims = [e for e in audit(setup["audit"]) if e["action"] == "reclaim"]
    assert [(e["user"], e["reason"]) for e in reclaims] == [
        ("rita", "grant-expired"),
        ("alice", "idle"),
    ]
    assert (
        "the research allocation Protein folding lab expired at the end of Sun 02 Mar 2025"
        in reclaims[0]["detail"]
    )
    assert "its GPU has not been used for 30 min" in reclaims[1]["detail"]


def hub_token_model(name: str, *, kind: str = "user") -> dict:
    return {"kind": kind, "name": name, "scopes": ["access:services!service=course-sessions"]}


async def test_the_owner_reads_the_warning_and_keeps_the_server_once_through_the_api(setup):
    hub, clock = setup["hub"], setup["clock"]
    tokens = {
        "alice-server-token": hub_token_model("alice"),
        "bob-server-token": hub_token_model("bob"),
        "jobs-service-token": hub_token_model("jupyter-to-job", kind="service"),
    }

    async def authenticate(token):
        return tokens.get(token)

    async with hub.serving() as api_url:
        service = setup["make"](api_url)
        api = CourseAPI(
            service=service,
            authenticate=authenticate,
            access_scope="access:services!service=course-sessions",
            check_scopes=HubAuth(api_token="unused").check_scopes,
        )
        app = Application(reclaim_token_handlers("/services/course-sessions/", api))
        sock, port = bind_unused_port()
        server = HTTPServer(app)
        server.add_sockets([sock])
        base = f"http://127.0.0.1:{port}/services/course-sessions/api/reclaim"
        http = AsyncHTTPClient()

        async def call(token, path="", body=None):
            request = HTTPRequest(
                base + path,
                method="POST" if body is not None else "GET",
                headers={"Authorization": f"token {token}"},
                body=json.dumps(body) if body is not None else None,
            )
            response = await http.fetch(request, raise_error=False)
            return response.code, json.loads(response.body)

        try:
            # Given alice's idle GPU, warned at 09:20 for a reclaim at 09:30,
            for minute in range(0, 25, 5):
                clock.now = utc(3, 9, minute)
                readings(setup["readings"], {"sim-1": 87.0})
                await service.tick()

            # when her server asks at 09:22, it learns why, when, and that she may keep it;
            clock.now = utc(3, 9, 22)
            status, body = await call("alice-server-token")
            assert status == 200
            (warning,) = body["warnings"]
            assert warning["reason"] == "idle" and warning["can_keep"] is True
            assert warning["stop_at"] == "2025-03-03T09:30:00Z"
            assert warning["seconds_left"] == 480
            assert "its GPU has not been used for 30 min" in warning["message"]
            # bob, whose GPU is busy, has none (his server stops at class end plus grace,
            # for the lab's countdown); a service's token reads nobody's.
            assert await call("bob-server-token") == (
                200,
                {"warnings": [], "session_ends": {"": "2025-03-03T11:15:00Z"}},
            )
            status, body = await call("jobs-service-token")
            assert status == 403

            # then "I'm still using it" keeps it: no warning, no reclaim at 09:30,
            status, body = await call("alice-server-token", "/keep", {"server": ""})
            assert status == 200 and body["warnings"] == []
            clock.now = utc(3, 9, 30)
            await service.tick()
            assert "/hub/api/users/alice/server" not in [r.path for r in hub.calls("DELETE")]

            # and once only: warned again at 09:42 (idle since 09:22), she cannot keep it.
            clock.now = utc(3, 9, 43)
            await service.tick()
            status, body = await call("alice-server-token")
            assert body["warnings"][0]["can_keep"] is False
            status, body = await call("alice-server-token", "/keep", {"server": ""})
            assert status == 403
            assert body["message"].startswith("Your server cannot be kept")
            assert body["reason"] == "cannot-keep"
            # Bob has nothing to keep.
            status, body = await call("bob-server-token", "/keep", {"server": ""})
            assert status == 409
        finally:
            server.stop()

    kept = [e for e in audit(setup["audit"]) if e["action"] == "keep"]
    assert [(e["user"], e["reason"]) for e in kept] == [("alice", "idle")]


async def test_an_unreadable_ledger_reclaims_nobody_as_idle_and_the_round_goes_on(setup, caplog):
    hub, clock = setup["hub"], setup["clock"]
    async with hub.serving() as api_url:
        service = setup["make"](api_url)

        def unreadable():
            raise PermissionError(13, "Permission denied", "allocations.json.lock")

        # Given GPUs that read idle but a ledger the service may not read,
        service.allocations = unreadable
        for minute in range(0, 60, 5):
            clock.now = utc(3, 9, minute)
            readings(setup["readings"], {})
            await service.tick()

    # then the expired grant is still reclaimed, nobody is reclaimed as idle, and the
    # admins are told once what to fix.
    assert [r.path for r in hub.calls("DELETE")] == ["/hub/api/users/rita/server"]
    told = [r for r in caplog.records if "allocation ledger" in r.getMessage()]
    assert len(told) == 1


async def test_a_prewarmed_server_nobody_opened_is_reclaimed_with_its_reason(setup, tmp_path):
    from gpuspawner.policy.prewarm import prewarm_token

    from .scenario import ML101_CLASS_START, SECRET

    hub, clock = setup["hub"], setup["clock"]
    # Given carol's server, pre-warmed by the service at 08:30 UTC for the 09:00 class,
    # on a busy GPU (so it is not idle), and nobody ever opens it,
    server = gpu_server("carol", "ml101", utc(3, 8, 30))
    token = prewarm_token(SECRET, "carol", "", "ml101", ML101_CLASS_START)
    server["user_options"] = {"profile": "ml101", "prewarm_token": token}
    hub.users = {"carol": hub_user("carol", server)}
    with AllocationLedger(tmp_path / "allocations.json").transaction(DEVICES) as pool:
        allocation = server_allocation("carol", "ml101", "ml101", "sim-0")
        pool.allocations[allocation.key] = allocation
    async with hub.serving() as api_url:
        service = setup["make"](api_url)
        # when the service runs every 5 minutes from 08:31 to 09:16,
        for minute in range(31, 77, 5):
            clock.now = utc(3, 8, 0) + timedelta(minutes=minute)
            readings(setup["readings"], {"sim-0": 95.0})
            await service.tick()

    # then it is warned at 09:06 and reclaimed at 09:16, 15 min into class, and the audit
    # log says why.
    entries = [e for e in audit(setup["audit"]) if e["action"] in ("warn", "reclaim")]
    assert [(e["action"], e["user"], e["reason"], e["time"]) for e in entries] == [
        ("warn", "carol", "unopened-prewarm", utc(3, 9, 6).isoformat()),
        ("reclaim", "carol", "unopened-prewarm", utc(3, 9, 16).isoformat()),
    ]
    assert "nobody has opened it" in entries[1]["detail"]
