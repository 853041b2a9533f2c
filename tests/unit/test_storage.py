"""The catalog's storage: sources, Kubernetes volumes, and folders on one machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from jupyterhub.objects import Hub
from traitlets.config import Config

from gpuspawner.policy import load_catalog
from gpuspawner.policy.storage import (
    StorageSource,
    kubernetes_volumes,
    parse_mounts,
    parse_storage_source,
)
from gpuspawner.spawners.local import SimpleLocalGPUSpawner
from gpuspawner.spawners.spawn_page import ProfileCard

from ..support.hub_users import HubUser

CATALOG = """
standing:
  - id: data
    title: Course data
    environment: {{default_url: /lab/tree/data}}
    storage:
      - {{name: data, source: "path:{data}", mount: /data}}
      - {{name: results, source: "path:{results}/{{username}}", mount: /results, read_only: false}}
      - {{name: scratch, source: scratch, mount: /scratch}}
      - {{name: datasets, source: "pvc:datasets/ml101", mount: /datasets}}
      - {{name: archive, source: "nfs:files.campus.edu:/export/archive", mount: /archive}}
"""


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("pvc:claim-{username}", StorageSource("pvc", claim="claim-{username}")),
        ("pvc:datasets/ml101/2026", StorageSource("pvc", claim="datasets", path="ml101/2026")),
        (
            "nfs:files.campus.edu:/export/ml101",
            StorageSource("nfs", server="files.campus.edu", path="/export/ml101"),
        ),
        ("path:/srv/courses/ml101", StorageSource("path", path="/srv/courses/ml101")),
        ("scratch", StorageSource("scratch")),
    ],
)
def test_each_storage_source_form_is_read(text, parsed):
    assert parse_storage_source(text) == parsed


@pytest.mark.parametrize(
    "text", ["/srv/data", "pvc:Bad_Claim", "pvc:data/../etc", "nfs:server", "path:relative", "s3:x"]
)
def test_an_unknown_source_is_refused_naming_the_forms_accepted(text):
    with pytest.raises(ValueError, match="nfs:SERVER:/EXPORT/PATH"):
        parse_storage_source(text)


@pytest.fixture
def catalog(tmp_path: Path):
    data, results = tmp_path / "srv" / "data", tmp_path / "srv" / "results"
    (data).mkdir(parents=True)
    (results / "ana").mkdir(parents=True)
    path = tmp_path / "catalog.yaml"
    path.write_text(CATALOG.format(data=data, results=results))
    return path


def test_on_kubernetes_each_entry_is_a_volume_mounted_read_only_unless_asked(catalog, tmp_path):
    profile = load_catalog(catalog).standing[0]
    volumes, mounts = kubernetes_volumes(
        parse_mounts(profile.storage), lambda text: text.replace("{username}", "ana")
    )
    assert volumes == [
        {"name": "data", "hostPath": {"path": f"{tmp_path}/srv/data", "type": "Directory"}},
        {
            "name": "results",
            "hostPath": {"path": f"{tmp_path}/srv/results/ana", "type": "Directory"},
        },
        {"name": "scratch", "emptyDir": {}},
        {"name": "datasets", "persistentVolumeClaim": {"claimName": "datasets", "readOnly": True}},
        {
            "name": "archive",
            "nfs": {"server": "files.campus.edu", "path": "/export/archive", "readOnly": True},
        },
    ]
    assert mounts == [
        {"name": "data", "mountPath": "/data", "readOnly": True},
        {"name": "results", "mountPath": "/results"},
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "datasets", "mountPath": "/datasets", "subPath": "ml101", "readOnly": True},
        {"name": "archive", "mountPath": "/archive", "readOnly": True},
    ]


def test_the_spawn_card_names_what_is_mounted(catalog):
    mounts = parse_mounts(load_catalog(catalog).standing[0].storage)
    on_kubernetes = ", ".join(m.describe(local=False) for m in mounts)
    assert on_kubernetes == (
        "data at /data (read-only), results at /results, scratch at /scratch, "
        "datasets at /datasets (read-only), archive at /archive (read-only)"
    )
    assert mounts[3].describe(local=True) == "datasets (not available on this machine)"
    assert mounts[0].describe(local=True) == "data at ~/data (read-only)"


def spawner(catalog: Path, tmp_path: Path) -> SimpleLocalGPUSpawner:
    config = Config()
    config.GPUAdmission.catalog_path = str(catalog)
    config.GPUAdmission.gpu_inventory = "simulated"
    config.SimpleLocalGPUSpawner.home_dir_template = str(tmp_path / "homes" / "{username}")
    config.SimpleLocalGPUSpawner.scratch_root = str(tmp_path / "scratch-root")
    made = SimpleLocalGPUSpawner(hub=Hub(), user=HubUser("ana"), config=config)
    made.user_options = {"profile": "data"}
    return made


def test_on_one_machine_folders_appear_in_the_home_and_nothing_there_is_replaced(catalog, tmp_path):
    # Given ana's home, where she keeps a folder of her own called "results"
    server = spawner(catalog, tmp_path)
    home = tmp_path / "homes" / "ana"
    (home / "results").mkdir(parents=True)

    # When her server's grant is applied
    grant = server.decide_start()
    skipped = server._link_storage(grant)

    # Then the host folder and a private scratch folder are there, by the entries' names
    assert os.readlink(home / "data") == str(tmp_path / "srv" / "data")
    scratch = Path(os.readlink(home / "scratch"))
    assert scratch.is_dir() and scratch.stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "scratch-root").stat().st_mode & 0o777 == 0o711
    # And her own folder is kept, and the volumes a process cannot mount are said so
    assert (home / "results").is_dir() and not (home / "results").is_symlink()
    assert skipped == [
        f"results: {home}/results exists already and is kept as it is",
        "datasets: a pvc volume cannot be mounted on one machine",
        "archive: a nfs volume cannot be mounted on one machine",
    ]
    assert grant.default_url == "/lab/tree/data"
    card = next(c for c in server.profile_cards() if c.id == "data")
    assert isinstance(card, ProfileCard) and "data at ~/data (read-only)" in card.storage

    # And when the server stops, its scratch folder goes
    server._remove_scratch()
    assert not scratch.exists()
