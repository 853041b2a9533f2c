"""Scenarios: a hub signals only the server process it started, and tells a server's owner
when it ended without the hub stopping it.

SimpleLocalGPUSpawner objects as the hub makes them (``start``, or after a restart
``load_state`` with the state it saved), with a plain sleeping process standing for the
single-user server.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from jupyterhub.objects import Hub
from traitlets.config import Config

from gpuspawner.spawners.local import SimpleLocalGPUSpawner
from tests.support.hub_users import HubUser

SLEEP = "import sys, time; time.sleep(300)"
HUB = Hub()
"""The hub: at the same address before and after its restart."""


def spawner(tmp_path: Path, command: str = SLEEP) -> SimpleLocalGPUSpawner:
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text("standing:\n  - {id: cpu, title: CPU only, default: true}\n")
    config = Config()
    config.GPUAdmission.catalog_path = str(catalog)
    config.GPUAdmission.gpu_inventory = "simulated"
    config.SimpleLocalGPUSpawner.home_dir_template = str(tmp_path / "home" / "{username}")
    # The arguments the hub adds (--port, ...) end up in sys.argv, unread.
    config.SimpleLocalGPUSpawner.cmd = [sys.executable, "-c", command]
    config.SimpleLocalGPUSpawner.interrupt_timeout = 1
    config.SimpleLocalGPUSpawner.term_timeout = 1
    config.SimpleLocalGPUSpawner.kill_timeout = 1
    made = SimpleLocalGPUSpawner(hub=HUB, user=HubUser("ana"), config=config)
    made.api_token = "ana-server-token"
    made.user_options = {"profile": "cpu"}
    return made


async def ended(server: SimpleLocalGPUSpawner) -> int:
    """Poll as the hub does until the server's process has ended; its exit status."""
    for _ in range(600):
        status = await server.poll()
        if status is not None:
            return status
        await asyncio.sleep(0.05)
    raise AssertionError("the server's process did not end")


@pytest.fixture
def other_process() -> Iterator[subprocess.Popen[bytes]]:
    """A process of someone else that happens to have a pid the hub once recorded."""
    process = subprocess.Popen([sys.executable, "-c", SLEEP])
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()


# -- a server that ends without the hub stopping it ----------------------------------------


def test_a_server_killed_from_outside_is_explained_to_its_owner(tmp_path):
    async def scenario() -> tuple[int, dict]:
        server = spawner(tmp_path)
        await server.start()
        # When someone else kills it (another hub, an admin, the kernel)
        os.kill(server.pid, signal.SIGKILL)
        status = await ended(server)
        return status, server.get_state()

    status, state = asyncio.run(scenario())

    # Then the hub keeps a sentence for the home page and the next spawn page
    assert status == -signal.SIGKILL
    notice = state["gpuspawner_stop_notice"]
    assert "stopped from outside the hub" in notice
    assert "SIGKILL, signal 9" in notice
    assert "tell the hub admins" in notice
    # ... which a spawner the hub makes afterwards still has
    after = spawner(tmp_path)
    after.load_state(state)
    assert after.stop_notice == notice


def test_a_server_that_crashed_says_its_exit_code(tmp_path):
    async def scenario() -> str:
        server = spawner(tmp_path, "import sys; sys.exit(3)")
        await server.start()
        await ended(server)
        return server.stop_notice

    notice = asyncio.run(scenario())

    assert "ended with an error" in notice
    assert "exit code 3" in notice


def test_a_server_the_hub_stops_or_its_owner_shuts_down_has_no_notice(tmp_path):
    async def scenario() -> tuple[str, str]:
        stopped = spawner(tmp_path)
        await stopped.start()
        await stopped.stop()
        await stopped.poll()
        shut_down = spawner(tmp_path, "import sys; sys.exit(0)")  # File > Shut Down
        await shut_down.start()
        await ended(shut_down)
        return stopped.stop_notice, shut_down.stop_notice

    assert asyncio.run(scenario()) == ("", "")


def test_the_next_start_clears_the_notice(tmp_path):
    async def scenario() -> str:
        server = spawner(tmp_path)
        await server.start()
        os.kill(server.pid, signal.SIGTERM)
        await ended(server)
        assert "SIGTERM" in server.stop_notice
        await server.start()
        notice = server.stop_notice
        await server.stop()
        return notice

    assert asyncio.run(scenario()) == ""


# -- after a hub restart: only the very process it started ------------------------------------


def saved_state(tmp_path: Path) -> dict:
    """The state the hub saved for ana's running server, which is then stopped."""

    async def scenario() -> dict:
        server = spawner(tmp_path)
        await server.start()
        state = server.get_state()
        await server.stop()
        return state

    return asyncio.run(scenario())


def test_a_pid_now_used_by_another_process_is_never_signalled(tmp_path, other_process):
    # Given the state of ana's server, whose pid now belongs to another process, which
    # started an hour after her server (the machine rebooted, or pids wrapped around)
    state = saved_state(tmp_path)
    state["pid"] = other_process.pid
    state["gpuspawner_process"] = {
        "pid": other_process.pid,
        "start_time": psutil.Process(other_process.pid).create_time() - 3600,
    }

    async def scenario() -> tuple[int | None, str]:
        # When the restarted hub polls it and stops it
        restarted = spawner(tmp_path)
        restarted.load_state(state)
        status = await restarted.poll()
        await restarted.stop(now=True)
        return status, restarted.stop_notice

    status, notice = asyncio.run(scenario())

    # Then the other process runs on, and ana's server counts as ended, with a notice
    assert other_process.poll() is None
    assert status == 0
    assert "cannot tell how it ended" in notice


def test_the_server_it_started_is_found_and_stopped_after_a_restart(tmp_path):
    async def scenario() -> tuple[int | None, int | None, str]:
        server = spawner(tmp_path)
        await server.start()
        process = server.proc
        restarted = spawner(tmp_path)
        restarted.load_state(server.get_state())
        running = await restarted.poll()
        await restarted.stop()
        return running, process.wait(), restarted.stop_notice

    running, exit_status, notice = asyncio.run(scenario())

    assert running is None
    assert exit_status == -signal.SIGINT  # the hub's own graceful stop
    assert notice == ""


def test_a_state_saved_without_a_start_time_adopts_only_this_hubs_server(tmp_path, other_process):
    # Given a state from before start times were recorded, naming a pid that is not a
    # server of this hub for ana (its environment says nothing of her)
    state = saved_state(tmp_path)
    del state["gpuspawner_process"]
    state["pid"] = other_process.pid

    async def scenario() -> int | None:
        restarted = spawner(tmp_path)
        restarted.load_state(state)
        await restarted.stop(now=True)
        return await restarted.poll()

    # Then it is not signalled
    assert asyncio.run(scenario()) == 0
    assert other_process.poll() is None


def test_a_state_saved_without_a_start_time_still_finds_its_own_server(tmp_path):
    async def scenario() -> tuple[int | None, int]:
        server = spawner(tmp_path)
        await server.start()
        process = server.proc
        state = server.get_state()
        del state["gpuspawner_process"]
        restarted = spawner(tmp_path)
        restarted.load_state(state)
        running = await restarted.poll()
        await restarted.stop(now=True)
        return running, process.wait()

    running, exit_status = asyncio.run(scenario())

    assert running is None
    assert exit_status == -signal.SIGTERM
