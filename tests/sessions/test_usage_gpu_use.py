"""Scenario: the GPU-hour report says how much of what each student held was used, from the
course-sessions service's readings, per holder where the card's processes can be told
apart, and says when the numbers were the whole card's instead."""

from __future__ import annotations

from datetime import timedelta
from fractions import Fraction

from gpuspawner.accounting.intervals import UsageInterval
from gpuspawner.accounting.report import usage_report
from gpuspawner.accounting.store import UsageStore
from gpuspawner.core.ledger import AllocationLedger
from gpuspawner.core.telemetry import DeviceReading, ProcessReading, write_readings
from gpuspawner.policy.share import GPUDevice
from gpuspawner.sessions.__main__ import build_parser, gpu_inputs
from gpuspawner.sessions.audit import AuditLog
from gpuspawner.sessions.hub_client import HubClient
from gpuspawner.sessions.service import SessionsService
from gpuspawner.sessions.watched_catalog import WatchedCatalog

from .fake_hub import FakeHub
from .reclaim_scenario import RECLAIM_CATALOG_YAML, gpu_server, server_allocation
from .scenario import hub_user, utc

TOKEN = "service-token-123"
CARD = GPUDevice(id="sim-0", index=0, model="H200", memory_mib=143771)
STUDENTS = ("alice", "bob")
ROUND = timedelta(minutes=5)


class Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


async def report_after_a_class_hour(tmp_path, processes) -> dict[str, dict]:
    """alice's and bob's servers at 1/4 of one card from 09:00, the service reading the
    card every 5 minutes until 10:00 with ``processes`` on it; the report by user."""
    catalog_path = tmp_path / "catalog.yaml"
    catalog_path.write_text(RECLAIM_CATALOG_YAML)
    ledger = tmp_path / "allocations.json"
    readings = tmp_path / "gpus.json"
    usage = UsageStore(f"sqlite:///{tmp_path / 'usage.db'}")
    with AllocationLedger(ledger).transaction([CARD]) as pool:
        for name in STUDENTS:
            allocation = server_allocation(name, "ml101", "ml101", CARD.id)
            pool.allocations[allocation.key] = allocation
            usage.open(
                UsageInterval(
                    allocation.key,
                    "server",
                    name,
                    "",
                    "ml101",
                    Fraction(1, 4),
                    utc(3, 9, 0),
                    course="ml101",
                )
            )
    users = [hub_user(name, gpu_server(name, "ml101", utc(3, 9, 0))) for name in STUDENTS]
    hub = FakeHub(token=TOKEN, users={u["name"]: u for u in users}, now=utc(3, 9, 0))
    clock = Clock(utc(3, 9, 0))
    args = build_parser({}).parse_args(
        [
            "--catalog",
            str(catalog_path),
            "--allocation-ledger",
            str(ledger),
            "--gpu-readings",
            str(readings),
        ]
    )
    async with hub.serving() as api_url:
        service = SessionsService(
            HubClient(api_url, TOKEN),
            WatchedCatalog(catalog_path, AuditLog(tmp_path / "audit.jsonl")),
            AuditLog(tmp_path / "audit.jsonl"),
            interval=ROUND.total_seconds(),
            clock=clock,
            usage=usage,
            **gpu_inputs(args),
        )
        for step in range(13):  # 09:00, 09:05, ... 10:00
            clock.now = utc(3, 9, 0) + step * ROUND
            write_readings(
                readings, [DeviceReading("sim-0", 0, 80.0, 9000, CARD.memory_mib, 50.0, processes)]
            )
            await service.tick()
    report = usage_report(
        usage.intervals(), begin=utc(3, 0, 0), finish=utc(4, 0, 0), now=utc(3, 10, 0), by="user"
    )
    return {row["user"]: row for row in report.rows()}


async def test_the_report_says_what_each_holder_used_of_its_share(tmp_path):
    # Given bob's kernel busy at 80 % and alice's idle, on the card they share
    processes = (
        ProcessReading(None, 0.0, 2048, holder="server:alice/"),
        ProcessReading(None, 80.0, 6144, holder="server:bob/"),
    )

    rows = await report_after_a_class_hour(tmp_path, processes)

    # Then the report says each held a quarter for the hour, alice used none of it and bob
    # 0.8 GPU-hours of work, measured for each (none of it device-wide)
    assert rows["alice"]["gpu_hours_exact"] == rows["bob"]["gpu_hours_exact"] == "1/4"
    assert rows["alice"]["observed_hours"] == rows["bob"]["observed_hours"] == 1.0
    assert (rows["alice"]["used_gpu_hours"], rows["alice"]["mean_utilization_pct"]) == (0.0, 0.0)
    assert (rows["bob"]["used_gpu_hours"], rows["bob"]["mean_utilization_pct"]) == (0.8, 80.0)
    assert rows["alice"]["device_wide_pct"] == rows["bob"]["device_wide_pct"] == 0.0


async def test_where_the_holders_cannot_be_told_apart_the_report_says_it_is_the_cards(tmp_path):
    # Given only the card's own numbers (no per-process readings)
    rows = await report_after_a_class_hour(tmp_path, None)

    # Then both are said to have used the card's 80 %, all of it device-wide
    for name in STUDENTS:
        assert rows[name]["mean_utilization_pct"] == 80.0
        assert rows[name]["device_wide_pct"] == 100.0
