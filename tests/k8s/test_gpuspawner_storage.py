"""GPUSpawner mounts the catalog's storage and opens its default URL (issue 12, item 3)."""

from __future__ import annotations

import kubernetes_validate
import pytest

from gpuspawner.spawners.kubernetes import GPUSpawner
from tests.support.k8s_spawners import make_gpu_spawner

pytestmark = pytest.mark.usefixtures("kubespawner_env")

CATALOG = """
standing:
  - id: data
    title: Course data
    environment: {default_url: /lab/tree/data, image: "quay.io/jupyter/scipy-notebook:2025-01-06"}
    storage:
      - {name: home, source: "pvc:claim-{username}", mount: /home/jovyan, read_only: false}
      - {name: course-data, source: "nfs:files.campus.edu:/export/ml101", mount: /data}
      - {name: scratch, source: scratch, mount: /scratch}
"""


async def test_the_pod_mounts_the_catalogs_storage_and_opens_its_default_url(tmp_path):
    GPUSpawner._inventories.clear()
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(CATALOG)
    spawner = make_gpu_spawner("ana.lee", catalog, profile="data")
    await spawner.ensure_inventory()
    spawner.hold_grant(spawner.decide_start())

    pod = spawner.api.api_client.sanitize_for_serialization(await spawner.get_pod_manifest())
    container = pod["spec"]["containers"][0]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}

    # The user's own claim, by KubeSpawner's escaping of her name, writable
    claim = volumes["home"]["persistentVolumeClaim"]
    assert claim == {
        "claimName": spawner._expand_user_properties("claim-{username}"),
        "readOnly": False,
    }
    assert claim["claimName"].startswith("claim-ana-lee") and "." not in claim["claimName"]
    assert mounts["home"] == {"name": "home", "mountPath": "/home/jovyan"}
    # The course's NFS data read-only, and a scratch folder
    assert volumes["course-data"]["nfs"] == {
        "server": "files.campus.edu",
        "path": "/export/ml101",
        "readOnly": True,
    }
    assert mounts["course-data"]["readOnly"] is True
    assert volumes["scratch"] == {"name": "scratch", "emptyDir": {}}
    # And the profile's image and default URL
    assert container["image"] == "quay.io/jupyter/scipy-notebook:2025-01-06"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["JUPYTERHUB_DEFAULT_URL"] == "/lab/tree/data"
    # And the whole pod is valid for the Kubernetes versions we support
    for version in ("1.32", "1.33", "1.34"):
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "Pod", **pod}, version, strict=True
        )
