"""Scenarios: what the hub's admin page shows of a GPU server comes with the server model.

JupyterHub's admin table shows a server's ``user_options.profile`` (the profile id, as the
spawn API takes it) and, in its details, the server model. The spawner keeps the profile's
title, the GPU share and the GPUs it is on in its state, which the hub gives to readers
with ``admin:server_state``; ``templates/admin.html`` shows them in the table.
"""

from __future__ import annotations

from pathlib import Path

from jupyterhub.objects import Hub
from traitlets.config import Config

from gpuspawner.spawners.local import SimpleLocalGPUSpawner
from tests.support.course_catalogs import open_class_catalog
from tests.support.hub_users import HubUser


def catalog(tmp_path: Path) -> Path:
    return open_class_catalog(tmp_path, title="Machine Learning 101", gpu="{fraction: 0.25}")


def spawner(tmp_path: Path) -> SimpleLocalGPUSpawner:
    config = Config()
    config.GPUAdmission.catalog_path = str(catalog(tmp_path))
    config.GPUAdmission.gpu_inventory = "simulated"
    config.GPUAdmission.simulated_gpus = [{"model": "RTX 4090", "memory": "24GiB"}]
    config.GPUAdmission.allocation_ledger = str(tmp_path / "ledger.json")
    return SimpleLocalGPUSpawner(hub=Hub(), user=HubUser("ana", groups=["students"]), config=config)


def test_a_granted_server_keeps_its_title_share_and_gpu_in_its_state(tmp_path):
    # Given ana starts the ML101 course server with a quarter of the hub's RTX 4090
    ana = spawner(tmp_path)
    ana.user_options = {"profile": "ml101"}
    ana.decide_start()
    # When the hub saves her server's state
    saved = ana.get_state()["gpuspawner"]
    # Then it says the profile's title, the share in words and the GPU it is on
    assert saved["profile"] == "ml101"
    assert saved["title"] == "Machine Learning 101"
    assert saved["share"] == "1/4 of an RTX 4090, 6 GiB"
    assert saved["gpus"] == ["GPU 0 (RTX 4090, 24 GiB, simulated)"]


def test_after_a_hub_restart_the_state_still_tells_them(tmp_path):
    # Given the state a hub saved for ana's running server
    ana = spawner(tmp_path)
    ana.user_options = {"profile": "ml101"}
    ana.decide_start()
    saved = ana.get_state()
    ana.release_allocation()
    # When the restarted hub loads it and saves it again
    restarted = spawner(tmp_path)
    restarted.load_state(saved)
    again = restarted.get_state()["gpuspawner"]
    # Then the admin page still reads her profile's title and her share
    assert (again["title"], again["share"], again["gpus"]) == (
        "Machine Learning 101",
        "1/4 of an RTX 4090, 6 GiB",
        ["GPU 0 (RTX 4090, 24 GiB, simulated)"],
    )


def test_a_stopped_server_tells_nothing(tmp_path):
    ana = spawner(tmp_path)
    ana.user_options = {"profile": "ml101"}
    ana.decide_start()
    ana.clear_state()
    assert "gpuspawner" not in ana.get_state()
