"""Where the hub pod mounts the experimental zone for the course-sessions service's wipe
(gpuspawner.policy.zones.hub_zone_root), for the volume kinds values.yaml's extraConfig
does not meet with the shipped overlay: an NFS export, and a claim production also uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuspawner.policy import load_catalog
from gpuspawner.policy.storage import kubernetes_volumes, parse_mounts, parse_storage_source
from gpuspawner.policy.zones import hub_zone_root

CATALOG = """\
settings:
  experimental_zone: {{wipe_at: "03:00", warning: 2h, volume: "{volume}"}}
standing:
  - id: try-out
    title: Try-out area
    zone: experimental
    storage:
      - {{name: scratch, source: experimental, mount: /scratch}}
  - id: thesis
    title: Thesis work
    storage:
      - {{name: results, source: "pvc:results", mount: /results, read_only: false}}
"""


def catalog_with_zone_on(tmp_path: Path, volume: str):
    path = tmp_path / "catalog.yaml"
    path.write_text(CATALOG.format(volume=volume))
    return load_catalog(path)


def test_on_an_nfs_export_the_hub_mounts_the_whole_export_where_servers_mount_folders(
    tmp_path,
):
    # Given the zone on an NFS export
    catalog = catalog_with_zone_on(tmp_path, "nfs:files.campus:/zone")
    hub_volumes = [{"name": "zone", "nfs": {"server": "files.campus", "path": "/zone"}}]
    hub_mounts = [{"name": "zone", "mountPath": "/srv/experimental"}]

    # When the hub's configuration asks where the service wipes
    root = hub_zone_root(catalog, hub_volumes, hub_mounts)

    # Then it is the hub's mount of the whole export, and a server's sub-path of the same
    # export is <user>/<entry> below it, the layout the wipe expects
    assert root == "/srv/experimental"
    [profile] = [p for p in catalog.standing if p.id == "try-out"]
    volumes, mounts = kubernetes_volumes(
        parse_mounts(profile.storage),
        lambda text: text.replace("{username}", "ana"),
        parse_storage_source("nfs:files.campus:/zone"),
    )
    assert volumes[0]["nfs"] == {"server": "files.campus", "path": "/zone", "readOnly": False}
    assert mounts[0]["subPath"] == "ana/scratch"

    # And a hub mount of one person's sub-folder is refused, saying what to change
    hub_mounts[0]["subPath"] = "ana"
    with pytest.raises(ValueError, match="give its mount no subPath"):
        hub_zone_root(catalog, hub_volumes, hub_mounts)


def test_a_zone_on_a_production_claim_is_refused(tmp_path):
    # Given the zone, by mistake, on the claim the thesis profile keeps its results on
    catalog = catalog_with_zone_on(tmp_path, "pvc:results")
    hub_volumes = [{"name": "zone", "persistentVolumeClaim": {"claimName": "results"}}]
    hub_mounts = [{"name": "zone", "mountPath": "/srv/experimental"}]

    # Then the hub's configuration refuses it, rather than wipe production results daily
    with pytest.raises(ValueError) as refused:
        hub_zone_root(catalog, hub_volumes, hub_mounts)
    assert str(refused.value) == (
        "The experimental zone's volume pvc:results is the claim of thesis's production "
        "storage 'results', which the daily wipe would empty; give the zone a claim of its own."
    )
