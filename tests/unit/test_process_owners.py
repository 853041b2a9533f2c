"""Scenarios: a process NVML reports on a GPU is attributed to the server or job it belongs
to (its cgroup, else its process tree, as the allocation ledger records each slice's
holding process), or is said not to be, with the reason."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuspawner.core.ledger import ProcessHolder
from gpuspawner.core.telemetry import DeviceReading, ProcessReading
from gpuspawner.process_owners import (
    ProcessOwners,
    attribute,
    cgroup_name_of,
    holder_of_cgroup,
)
from gpuspawner.spawners.local import LocalGPUSpawner
from jupyter_to_job.executors.local import LocalExecutor


def test_cgroup_names_are_the_ones_the_spawner_and_the_job_service_give():
    # The names LocalGPUSpawner and LocalExecutor give their groups, read from them
    spawner_name = LocalGPUSpawner.cgroup_name.fget  # type: ignore[attr-defined]
    job_name = LocalExecutor.cgroup_name.fget  # type: ignore[attr-defined]
    for user, server in [("ana", ""), ("ana", "lab"), ("a.b@campus.edu", "gpu 1")]:
        spawner = SimpleNamespace(user=SimpleNamespace(name=user), name=server)
        assert cgroup_name_of(f"server:{user}/{server}") == spawner_name(spawner)
    assert cgroup_name_of("job:7f3c") == job_name(SimpleNamespace(job_id="7f3c"))


def test_a_cgroup_path_names_its_holder_wherever_the_hub_put_its_groups():
    keys = ["server:ana/", "server:ana/lab", "job:7f3c"]
    # cgroup v2 under a systemd unit, and the same with a folder per hub instance
    assert holder_of_cgroup("/system.slice/jupyterhub.service/campus-gpu-hub/server-ana", keys) == (
        "server:ana/"
    )
    assert holder_of_cgroup("/campus-gpu-hub/hub-3f2a/server-ana-lab", keys) == "server:ana/lab"
    assert holder_of_cgroup("/campus-gpu-hub/job-7f3c", keys) == "job:7f3c"
    # Not a group of any holder: the hub's own, a user's session
    assert holder_of_cgroup("/system.slice/jupyterhub.service/supervisor", keys) is None
    assert holder_of_cgroup("/user.slice/user-1000.slice/session-4.scope", keys) is None


def test_a_cgroup_name_two_holders_could_have_names_neither():
    # ana's server "lab" and ana-lab's default server have the same group name
    assert (
        holder_of_cgroup("/campus-gpu-hub/server-ana-lab", ["server:ana/lab", "server:ana-lab/"])
        is None
    )


def fake_proc(root: Path, pid: int, *, parent: int, ticks: int, cgroup: str, gpu: bool) -> None:
    """A /proc entry for ``pid``: its stat, its cgroup, and its open files."""
    folder = root / str(pid)
    (folder / "fd").mkdir(parents=True)
    (folder / "stat").write_text(
        f"{pid} (python3 (kernel)) S {parent} {pid} {pid} 0 -1 4194560 1 0 0 0 1 1 0 0 20 0 "
        f"1 0 {ticks} 1000 100 18446744073709551615\n"
    )
    (folder / "cgroup").write_text(f"0::{cgroup}\n")
    os.symlink("/dev/nvidia0" if gpu else "/dev/null", folder / "fd" / "3")


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    root = tmp_path / "proc"
    root.mkdir()
    (root / "stat").write_text("cpu  1 2 3\nbtime 1700000000\n")
    return root


def started(ticks: int) -> float:
    return 1700000000 + ticks / os.sysconf("SC_CLK_TCK")


def test_a_process_that_left_its_server_is_still_found_by_its_cgroup(proc):
    # Given a kernel of ana's server that detached (its parent is init), in her server's group
    fake_proc(proc, 4242, parent=1, ticks=500, cgroup="/campus-gpu-hub/server-ana", gpu=True)
    owners = ProcessOwners({"server:ana/": ProcessHolder(4000, started(100))}, proc=proc)

    # Then it is ana's server's
    assert owners.owner_of(4242) == ("server:ana/", None)


def test_a_process_without_a_group_is_found_through_its_ancestors(proc):
    # Given job 7f3c's runner (the slice's holder), its kernel, and the kernel's worker
    fake_proc(proc, 300, parent=1, ticks=100, cgroup="/", gpu=False)
    fake_proc(proc, 301, parent=300, ticks=110, cgroup="/", gpu=False)
    fake_proc(proc, 302, parent=301, ticks=120, cgroup="/", gpu=True)
    owners = ProcessOwners({"job:7f3c": ProcessHolder(300, started(100))}, proc=proc)

    # Then the worker on the GPU is the job's
    assert owners.owner_of(302) == ("job:7f3c", None)


def test_a_reused_pid_is_not_taken_for_the_holder_that_ended(proc):
    # Given a process now running as pid 300, started long after the holder recorded as 300
    fake_proc(proc, 300, parent=1, ticks=90_000, cgroup="/", gpu=False)
    fake_proc(proc, 302, parent=300, ticks=90_010, cgroup="/", gpu=True)
    owners = ProcessOwners({"job:7f3c": ProcessHolder(300, started(100))}, proc=proc)

    key, why = owners.owner_of(302)
    assert key is None
    assert why == "process 302 runs in no server's or job's cgroup or process tree of this hub"


def test_a_pid_this_reader_cannot_see_is_said_to_be_of_another_pid_namespace(proc):
    owners = ProcessOwners({"server:ana/": ProcessHolder(4000, started(100))}, proc=proc)
    key, why = owners.owner_of(31337)
    assert key is None
    assert why is not None and "not visible here" in why and "PID namespace" in why


def test_a_visible_pid_that_holds_no_gpu_is_not_nvmls_process(proc):
    # Given, here, a process 4242 in ana's group that has no NVIDIA device open: NVML's
    # 4242 is another namespace's process that happens to share the number
    fake_proc(proc, 4242, parent=1, ticks=500, cgroup="/campus-gpu-hub/server-ana", gpu=False)
    owners = ProcessOwners({"server:ana/": ProcessHolder(4000, started(100))}, proc=proc)

    key, why = owners.owner_of(4242)
    assert key is None
    assert why is not None and "no NVIDIA device open" in why


def test_under_a_process_that_holds_several_slices_it_cannot_be_told_whose(proc):
    # Given the job service holding two bookings whose runners are not started yet
    fake_proc(proc, 50, parent=1, ticks=10, cgroup="/", gpu=False)
    fake_proc(proc, 51, parent=50, ticks=20, cgroup="/", gpu=True)
    service = ProcessHolder(50, started(10))
    owners = ProcessOwners({"job:a": service, "job:b": service}, proc=proc)

    key, why = owners.owner_of(51)
    assert key is None
    assert why is not None and "job:a, job:b" in why


@pytest.fixture
def real_server() -> Iterator[tuple[int, int]]:
    """A real process standing for a server, and its child standing for its kernel."""
    server = subprocess.Popen(
        ["sh", "-c", "sleep 600 & echo $!; wait"], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    kernel = int(server.stdout.readline())
    try:
        yield server.pid, kernel
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(kernel, signal.SIGKILL)
        server.kill()
        server.wait()
        server.stdout.close()


def test_on_this_machines_proc_a_kernel_is_found_under_the_server_the_ledger_records(real_server):
    # Given ana's server process as the ledger records it (psutil's pid and start time)
    server, kernel = real_server
    holder = ProcessHolder.of_pid(server)
    assert holder is not None

    # Then its kernel, read from the real /proc, is ana's server's (the simulated reading's
    # processes hold no GPU device, so that check is off, as for simulated readings)
    owners = ProcessOwners({"server:ana/": holder, "job:x": None}, gpu_files=False)
    assert owners.owner_of(kernel) == ("server:ana/", None)
    # and where NVML's pid must have a GPU open, this one, which has none, is not taken
    key, why = ProcessOwners({"server:ana/": holder}).owner_of(kernel)
    assert key is None and why is not None and "no NVIDIA device open" in why


def test_attribution_fills_each_pid_and_keeps_processes_that_name_their_holder(proc):
    fake_proc(proc, 4242, parent=1, ticks=500, cgroup="/campus-gpu-hub/server-ana", gpu=True)
    owners = ProcessOwners({"server:ana/": None, "server:ben/": None}, proc=proc)
    reading = DeviceReading(
        "GPU-1",
        0,
        50.0,
        4096,
        81920,
        40.0,
        (ProcessReading(4242, 50.0, 1024), ProcessReading(None, 0.0, 512, holder="server:ben/")),
    )

    [attributed] = attribute([reading], owners)

    assert attributed.processes == (
        ProcessReading(4242, 50.0, 1024, holder="server:ana/"),
        ProcessReading(None, 0.0, 512, holder="server:ben/"),
    )
