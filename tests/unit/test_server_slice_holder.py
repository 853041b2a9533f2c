"""Scenarios: a server's GPU slice in the shared ledger follows the server's own process.

SimpleLocalGPUSpawner objects as the hub makes them after a restart (``load_state`` with
the state it saved), with a plain sleeping process standing for the single-user server.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from jupyterhub.objects import Hub
from traitlets.config import Config

from gpuspawner.core.ledger import AllocationLedger, ProcessHolder
from gpuspawner.spawners.local import SimpleLocalGPUSpawner
from tests.support.course_catalogs import open_class_catalog
from tests.support.hub_users import HubUser

ONE_GPU = [{"model": "RTX 4090", "memory": "24GiB"}]


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    return open_class_catalog(tmp_path, title="ML101", gpu="{count: 1}")


def spawner(name: str, catalog: Path, ledger: Path) -> SimpleLocalGPUSpawner:
    config = Config()
    config.GPUAdmission.catalog_path = str(catalog)
    config.GPUAdmission.gpu_inventory = "simulated"
    config.GPUAdmission.simulated_gpus = ONE_GPU
    config.GPUAdmission.allocation_ledger = str(ledger)
    return SimpleLocalGPUSpawner(hub=Hub(), user=HubUser(name, groups=["students"]), config=config)


def saved_state(catalog: Path, ledger: Path, pid: int) -> dict:
    """The state a hub saved for ana's running server (her GPU slice held by ``pid``)."""
    before = spawner("ana", catalog, ledger)
    before.user_options = {"profile": "ml101"}
    before.decide_start()
    before.hold_allocation(pid)
    return {"pid": pid, "gpuspawner": before.course_state()}


def test_after_a_hub_restart_the_server_holds_its_slice_again(tmp_path, catalog, server_process):
    # Given ana's server running on the one GPU, and the ledger moved aside meanwhile
    ledger = tmp_path / "gpu-allocations.json"
    state = saved_state(catalog, ledger, server_process.pid)
    assert state["gpuspawner"]["server_process"] == (
        ProcessHolder.of_pid(server_process.pid).to_dict()
    )
    ledger.unlink()
    # When the restarted hub loads her server's state
    spawner("ana", catalog, ledger).load_state(state)
    # Then the slice is recorded again, held by her server's process
    assert AllocationLedger(ledger).holders() == {
        "server:ana/": ProcessHolder.of_pid(server_process.pid)
    }


def test_a_pid_reused_after_a_reboot_does_not_hold_the_slice(tmp_path, catalog, server_process):
    # Given a saved state whose server process started at another time than the process
    # that has its pid now (the machine rebooted; the pid went to someone else)
    ledger = tmp_path / "gpu-allocations.json"
    state = saved_state(catalog, ledger, server_process.pid)
    state["gpuspawner"]["server_process"]["start_time"] -= 3600
    ledger.unlink()
    # When the restarted hub loads it
    spawner("ana", catalog, ledger).load_state(state)
    # Then nothing holds the GPU
    assert AllocationLedger(ledger).holders() == {}


def test_a_state_saved_before_holders_existed_is_held_by_the_process_with_its_pid(
    tmp_path, catalog, server_process
):
    ledger = tmp_path / "gpu-allocations.json"
    state = saved_state(catalog, ledger, server_process.pid)
    del state["gpuspawner"]["server_process"]
    ledger.unlink()
    spawner("ana", catalog, ledger).load_state(state)
    assert AllocationLedger(ledger).holders() == {
        "server:ana/": ProcessHolder.of_pid(server_process.pid)
    }


def test_a_server_that_ended_while_the_hub_was_down_holds_nothing(
    tmp_path, catalog, server_process
):
    ledger = tmp_path / "gpu-allocations.json"
    state = saved_state(catalog, ledger, server_process.pid)
    server_process.kill()
    server_process.wait()
    spawner("ana", catalog, ledger).load_state(state)
    assert AllocationLedger(ledger).holders() == {}
