"""Scenarios: the GPU map shows how busy each GPU is and, to whom may see a slice's holder,
that holder's own use of its GPU, or says the number is the whole GPU's, and why."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from fractions import Fraction
from types import SimpleNamespace

from gpuspawner.core.ledger import AllocationLedger
from gpuspawner.core.telemetry import DeviceReading, ProcessReading, write_readings
from gpuspawner.gpu_map import MapViewer, gpu_map_json
from gpuspawner.holder_use import use_by_holder
from gpuspawner.policy import Allocation, CapacityPool, GPUDevice, GPUShare
from gpuspawner.sessions.gpu_map_page import GPUMap
from gpuspawner.sessions.gpu_pools import pool_source

QUARTER = GPUShare(fraction=Fraction(1, 4))


def shared_card() -> CapacityPool:
    """ana and ben (ML101) at 1/4 of GPU 0 each; GPU 1 free."""
    pool = CapacityPool(
        [GPUDevice("sim-0", 0, "H200", 143771), GPUDevice("sim-1", 1, "H200", 143771)]
    )
    for name in ("ana", "ben"):
        pool.allocate(
            f"server:{name}/", owner=name, profile_id="ml101", course_id="ml101", share=QUARTER
        )
    return pool


def slices(picture: dict) -> dict[str, dict | None]:
    """Each slice's use by its label."""
    return {item["label"]: item["use"] for item in picture["gpus"][0]["slices"]}


def test_an_admin_sees_each_holders_own_use_and_each_gpus_reading():
    # Given ben's kernel busy and ana's idle on the shared card
    pool = shared_card()
    processes = (
        ProcessReading(11, 0.0, 2048, holder="server:ana/"),
        ProcessReading(12, 71.0, 6144, holder="server:ben/"),
    )
    readings = [DeviceReading("sim-0", 0, 71.0, 8192, 143771, 58.0, processes)]

    picture = gpu_map_json(
        pool, MapViewer("root", admin=True), readings=readings, uses=use_by_holder(readings, pool)
    )

    # Then each slice has its holder's own numbers, and the card its own reading
    assert slices(picture) == {
        "ana": {
            "utilization_pct": 0.0,
            "memory_used_mib": 2048,
            "measured": "holder",
            "device_wide_because": None,
        },
        "ben": {
            "utilization_pct": 71.0,
            "memory_used_mib": 6144,
            "measured": "holder",
            "device_wide_because": None,
        },
    }
    assert picture["gpus"][0]["reading"] == {
        "utilization_pct": 71.0,
        "memory_used_mib": 8192,
        "temperature_c": 58.0,
    }
    assert picture["gpus"][1]["reading"] is None


def test_a_student_sees_their_own_use_and_not_another_students():
    pool = shared_card()
    processes = (
        ProcessReading(11, 0.0, 2048, holder="server:ana/"),
        ProcessReading(12, 71.0, 6144, holder="server:ben/"),
    )
    readings = [DeviceReading("sim-0", 0, 71.0, 8192, 143771, 58.0, processes)]
    picture = gpu_map_json(
        pool, MapViewer("ana"), readings=readings, uses=use_by_holder(readings, pool)
    )

    assert slices(picture)["you"] == {
        "utilization_pct": 0.0,
        "memory_used_mib": 2048,
        "measured": "holder",
        "device_wide_because": None,
    }
    assert slices(picture)["ml101"] is None
    # The card's own reading is no one's in particular
    assert picture["gpus"][0]["reading"]["utilization_pct"] == 71.0


def test_where_holders_cannot_be_told_apart_the_map_says_the_number_is_the_gpus():
    pool = shared_card()
    because = "NVML gives no per-process utilisation on this GPU (Not Supported)"
    readings = [DeviceReading("sim-0", 0, 71.0, 8192, 143771, 58.0, None, because)]
    picture = gpu_map_json(
        pool, MapViewer("root", admin=True), readings=readings, uses=use_by_holder(readings, pool)
    )
    assert slices(picture)["ana"] == {
        "utilization_pct": 71.0,
        "memory_used_mib": 8192,
        "measured": "device",
        "device_wide_because": because,
    }


def test_the_map_page_reads_the_ledger_and_the_readings_file_the_service_is_given(tmp_path):
    # Given the one-machine ledger with ana's and ben's quarters, and the simulated readings
    # file naming each process's holder, as the service's flags give them
    devices = [GPUDevice("sim-0", 0, "H200", 143771, simulated=True)]
    ledger = tmp_path / "allocations.json"
    with AllocationLedger(ledger).transaction(devices) as pool:
        for name in ("ana", "ben"):
            pool.allocations[f"server:{name}/"] = Allocation(
                f"server:{name}/", name, "ml101", "ml101", ("sim-0",), Fraction(1, 4), 35942, 0
            )
    readings_path = tmp_path / "gpus.json"
    write_readings(
        readings_path,
        [
            DeviceReading(
                "sim-0",
                0,
                40.0,
                5000,
                143771,
                50.0,
                (
                    ProcessReading(None, 40.0, 3000, holder="server:ana/"),
                    ProcessReading(None, 0.0, 2000, holder="server:ben/"),
                ),
            )
        ],
    )
    source = pool_source(
        allocation_ledger=str(ledger),
        simulated='[{"model": "H200", "memory": "143771MiB"}]',
        namespace=None,
        gpu_readings=str(readings_path),
    )
    service = SimpleNamespace(
        catalog=SimpleNamespace(current=lambda now: None),
        clock=lambda: datetime(2026, 3, 2, 10, 0, tzinfo=UTC),
    )
    gpu_map = GPUMap(SimpleNamespace(service=service), source)

    # When a hub admin looks
    picture = asyncio.run(gpu_map.picture({"name": "root", "admin": True, "kind": "user"}))

    # Then each slice shows its holder's use
    assert {s["holder"]: s["use"]["utilization_pct"] for s in picture["gpus"][0]["slices"]} == {
        "ana": 40.0,
        "ben": 0.0,
    }
    assert picture["gpus"][0]["reading"]["utilization_pct"] == 40.0
