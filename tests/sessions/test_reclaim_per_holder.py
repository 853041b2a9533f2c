"""GPU-aware reclaim on a shared card, per holder: four ml101 students at 1/4 of one GPU,
one of them busy. On one machine the service reads simulated per-process readings (NVML's
shape: a pid, its SM utilisation, its memory) and attributes each pid to the server whose
process tree it runs in, through the allocation ledger's holders, as it does on a real
machine; on Kubernetes it reads HAMi's per-container series from Prometheus.

Each student's "server" is a real process the ledger records as its slice's holder, with
a child standing for its kernel, the process NVML would report."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from gpuspawner.core.ledger import AllocationLedger, ProcessHolder
from gpuspawner.core.telemetry import DeviceReading, ProcessReading, write_readings
from gpuspawner.policy.share import GPUDevice
from gpuspawner.prometheus_telemetry import ALLOCATION_INFO, SERIES
from gpuspawner.sessions.__main__ import build_parser, gpu_inputs
from gpuspawner.sessions.audit import AuditLog
from gpuspawner.sessions.hub_client import HubClient
from gpuspawner.sessions.service import SessionsService
from gpuspawner.sessions.watched_catalog import WatchedCatalog

from ..support.prometheus_api import prometheus_api, vector_sample
from .fake_hub import FakeHub
from .reclaim_scenario import RECLAIM_CATALOG_YAML, gpu_server, server_allocation
from .scenario import hub_user, utc

TOKEN = "service-token-123"
CARD = GPUDevice(id="sim-0", index=0, model="H200", memory_mib=143771)
STUDENTS = ("alice", "bob", "carol", "dave")


@dataclass
class RunningServer:
    """A stand-in server process and its kernel (the process that would use the GPU)."""

    server: subprocess.Popen
    kernel_pid: int


class Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


@pytest.fixture
def servers() -> Iterator[dict[str, RunningServer]]:
    """One server process per student, each with a kernel child; ended after the test."""
    started: dict[str, RunningServer] = {}
    try:
        for name in STUDENTS:
            server = subprocess.Popen(
                ["sh", "-c", "sleep 600 & echo $!; wait"], stdout=subprocess.PIPE, text=True
            )
            assert server.stdout is not None
            started[name] = RunningServer(server, int(server.stdout.readline()))
        yield started
    finally:
        for running in started.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(running.kernel_pid, signal.SIGKILL)
            running.server.kill()
            running.server.wait()
            if running.server.stdout is not None:
                running.server.stdout.close()


@pytest.fixture
def shared_card(tmp_path, servers):
    """The four servers' quarters of one card in the ledger, each held by its server's
    process, the hub's models of those servers, and a service reading the readings file."""
    catalog_path = tmp_path / "catalog.yaml"
    catalog_path.write_text(RECLAIM_CATALOG_YAML)
    ledger_path = tmp_path / "allocations.json"
    ledger = AllocationLedger(ledger_path)
    for name, running in servers.items():
        holder = ProcessHolder.of_pid(running.server.pid)
        assert holder is not None
        ledger.hold([CARD], server_allocation(name, "ml101", "ml101", CARD.id), holder)
    users = [hub_user(name, gpu_server(name, "ml101", utc(3, 8, 55))) for name in STUDENTS]
    hub = FakeHub(token=TOKEN, users={u["name"]: u for u in users}, now=utc(3, 8, 55))
    audit_path = tmp_path / "audit.jsonl"
    readings_path = tmp_path / "gpus.json"
    clock = Clock(utc(3, 9, 0))

    def service(api_url: str) -> SessionsService:
        # The GPU inputs `python -m gpuspawner.sessions` builds from its flags.
        args = build_parser({}).parse_args(
            [
                "--catalog",
                str(catalog_path),
                "--allocation-ledger",
                str(ledger_path),
                "--gpu-readings",
                str(readings_path),
            ]
        )
        return SessionsService(
            HubClient(api_url, TOKEN),
            WatchedCatalog(catalog_path, AuditLog(audit_path)),
            AuditLog(audit_path),
            clock=clock,
            **gpu_inputs(args),
        )

    return {
        "hub": hub,
        "clock": clock,
        "readings": readings_path,
        "audit": audit_path,
        "service": service,
    }


def card_readings(path: Path, processes: tuple[ProcessReading, ...] | None) -> None:
    """The card 88 % busy, 8 GiB in use, with ``processes`` on it (None: NVML gave no
    per-process readings)."""
    write_readings(path, [DeviceReading("sim-0", 0, 88.0, 8192, CARD.memory_mib, 55.0, processes)])


def bob_busy(servers: dict[str, RunningServer]) -> tuple[ProcessReading, ...]:
    """Each kernel on the card with 2 GiB; bob's runs at 88 % SM, the others at 0."""
    return tuple(
        ProcessReading(running.kernel_pid, 88.0 if name == "bob" else 0.0, 2048)
        for name, running in servers.items()
    )


def audit(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def rounds(setup, processes, until_minute: int) -> None:
    """A round every 5 minutes from 09:00 UTC to ``until_minute``, the card read each time."""
    service = setup["service"](setup["api_url"])
    for minute in range(0, until_minute + 1, 5):
        setup["clock"].now = utc(3, 9, 0) + timedelta(minutes=minute)
        card_readings(setup["readings"], processes)
        await service.tick()


async def test_the_idle_holders_of_a_shared_card_are_reclaimed_and_the_busy_one_is_not(
    shared_card, servers
):
    hub = shared_card["hub"]
    async with hub.serving() as api_url:
        shared_card["api_url"] = api_url
        # Given the card busy at 88 % because of bob's kernel alone, from 09:00 UTC,
        # when the service runs a round every 5 minutes until 10:30,
        await rounds(shared_card, bob_busy(servers), until_minute=90)

    # then alice, carol and dave were warned at 09:20 (10 min before 30 min idle) and
    # their servers reclaimed at 09:30; bob's server still runs.
    # (one round's warnings and reclaims run side by side: in time order, then by name)
    entries = [e for e in audit(shared_card["audit"]) if e["action"] in ("warn", "reclaim")]
    entries.sort(key=lambda e: (e["time"], e["user"]))
    assert [(e["action"], e["user"], e["reason"], e["time"]) for e in entries] == [
        ("warn", name, "idle", utc(3, 9, 20).isoformat()) for name in ("alice", "carol", "dave")
    ] + [
        ("reclaim", name, "idle", utc(3, 9, 30).isoformat()) for name in ("alice", "carol", "dave")
    ]
    assert sorted(r.path for r in hub.calls("DELETE")) == [
        f"/hub/api/users/{name}/server" for name in ("alice", "carol", "dave")
    ]
    assert "" in hub.users["bob"]["servers"]


async def test_without_per_process_readings_the_busy_card_keeps_every_holder(shared_card):
    hub = shared_card["hub"]
    async with hub.serving() as api_url:
        shared_card["api_url"] = api_url
        # Given the same busy card, but only its device-wide numbers (no per-process
        # readings), when the service runs until 10:30,
        await rounds(shared_card, None, until_minute=90)

    # then nobody is warned or reclaimed: a share counts as busy while its GPU is.
    assert hub.calls("DELETE") == []
    assert [e for e in audit(shared_card["audit"]) if e["action"] == "warn"] == []


async def test_pids_of_another_pid_namespace_fall_back_to_the_device_and_say_so(
    shared_card, servers, caplog
):
    # Given NVML's pids as a reader in another PID namespace gets them: none is a
    # process the service can see (pids past the kernel's pid_max cannot exist here),
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    unseen = tuple(
        ProcessReading(pid_max + n, 88.0 if n == 1 else 0.0, 2048) for n in range(len(STUDENTS))
    )
    hub = shared_card["hub"]
    with caplog.at_level(logging.WARNING, logger="gpuspawner.process_owners"):
        async with hub.serving() as api_url:
            shared_card["api_url"] = api_url
            # when the service runs until 10:30,
            await rounds(shared_card, unseen, until_minute=90)

    # then nobody is reclaimed (the card is busy, and whose work it is cannot be told),
    assert hub.calls("DELETE") == []
    # and the admins are told why, once per process, naming the other PID namespace.
    told = [r.getMessage() for r in caplog.records if "device-wide" in r.getMessage()]
    assert len(told) == len(STUDENTS), told
    assert all("PID namespace" in message for message in told)


async def test_on_kubernetes_hamis_per_container_use_reclaims_the_idle_students(tmp_path):
    # Given the four students' pods at 1/4 of one HAMi-shared card, bob's container busy,
    # as Prometheus has them from HAMi's monitor and the hub's allocation info
    answers: dict[str, list] = {name: [] for name in (*SERIES, ALLOCATION_INFO)}
    card = {"namespace": "jhub", "container": "notebook", "device_uuid": "GPU-aaa"}
    answers["hami_container_device_utilization_ratio"] = [
        vector_sample(64.0 if name == "bob" else 0.0, pod=f"jupyter-{name}", **card)
        for name in STUDENTS
    ]
    answers[ALLOCATION_INFO] = [
        vector_sample(1, user=name, kind="server", name="", namespace="jhub", pod=f"jupyter-{name}")
        for name in STUDENTS
    ]
    catalog_path = tmp_path / "catalog.yaml"
    catalog_path.write_text(RECLAIM_CATALOG_YAML)
    audit_path = tmp_path / "audit.jsonl"
    users = [hub_user(name, gpu_server(name, "ml101", utc(3, 8, 55))) for name in STUDENTS]
    hub = FakeHub(token=TOKEN, users={u["name"]: u for u in users}, now=utc(3, 8, 55))
    clock = Clock(utc(3, 9, 0))

    with prometheus_api(answers) as prometheus_url:
        # and the service started for the cluster with the admins' Prometheus,
        args = build_parser({}).parse_args(
            [
                "--catalog",
                str(catalog_path),
                "--kubernetes-namespace",
                "jhub",
                "--prometheus-url",
                prometheus_url,
            ]
        )
        async with hub.serving() as api_url:
            service = SessionsService(
                HubClient(api_url, TOKEN),
                WatchedCatalog(catalog_path, AuditLog(audit_path)),
                AuditLog(audit_path),
                clock=clock,
                **gpu_inputs(args),
            )
            # when it runs a round every 5 minutes from 09:00 to 10:30 UTC,
            for minute in range(0, 91, 5):
                clock.now = utc(3, 9, 0) + timedelta(minutes=minute)
                await service.tick()

    # then alice, carol and dave are reclaimed at 09:30 and bob keeps his server.
    # (one round's reclaims run side by side, so the audit lists them as they finish)
    reclaimed = sorted(
        (e["user"], e["time"]) for e in audit(audit_path) if e["action"] == "reclaim"
    )
    assert reclaimed == [(name, utc(3, 9, 30).isoformat()) for name in ("alice", "carol", "dave")]
    assert "" in hub.users["bob"]["servers"]
