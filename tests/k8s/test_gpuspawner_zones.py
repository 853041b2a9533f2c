"""GPUSpawner on the real control plane: a profile in the experimental zone mounts the user's
folder of the zone's shared volume, which the course-sessions service wipes daily (it mounts
the same volume: hub_config/kubernetes/values.yaml); production profiles never mount it."""

from __future__ import annotations

import kubernetes_validate
import pytest
from jupyterhub.spawner import SpawnException
from kubernetes_asyncio import client

from gpuspawner.spawners.kubernetes import GPUSpawner
from tests.support.k8s_cluster import wait_for
from tests.support.k8s_spawners import make_gpu_spawner, provide_volume

pytestmark = pytest.mark.usefixtures("kubespawner_env")

CATALOG = """\
settings:
  timezone: Europe/Zurich
  experimental_zone: {{wipe_at: "03:00", warning: 2h{volume}}}
standing:
  - id: cpu
    title: CPU only
    default: true
  - id: try-out
    title: Try-out area
    zone: experimental
    storage:
      - {{name: scratch, source: experimental, mount: /scratch}}
      - {{name: results, source: "pvc:results-{{username}}", mount: /results, read_only: false}}
"""


async def create_claim(admin: client.ApiClient, name: str) -> None:
    """A claim the cluster's admins made (the zone's shared one, a user's results), bound to
    a volume they provisioned for it."""
    core = client.CoreV1Api(admin)
    await provide_volume(admin, claim=name, access_modes=("ReadWriteMany",))
    await core.create_namespaced_persistent_volume_claim(
        "default",
        {
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "resources": {"requests": {"storage": "10Gi"}},
            },
        },
    )

    async def bound() -> bool:
        claim = await core.read_namespaced_persistent_volume_claim(name, "default")
        return claim.status.phase == "Bound"

    await wait_for(bound, timeout=60, what=f"the claim {name} bound")


@pytest.fixture(autouse=True)
def fresh_inventory():
    GPUSpawner._inventories.clear()
    yield
    GPUSpawner._inventories.clear()


async def test_an_experimental_profile_mounts_the_users_folder_of_the_zones_volume(
    k8s_controls, k8s_api, tmp_path
):
    # Given the zone's volume is the claim experimental-zone
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(CATALOG.format(volume=", volume: pvc:experimental-zone"))

    k8s_controls.add_gpu_nodes(1, gpu_count=1)
    spawner = make_gpu_spawner("ana.lee", catalog, profile="try-out")
    user = spawner._expand_user_properties("{username}")
    for claim in ("experimental-zone", f"results-{user}"):
        await create_claim(k8s_api, claim)

    # When ana.lee starts the try-out profile
    await spawner.start()

    # Then her pod mounts her own folder of the zone's claim at /scratch, writable,
    # beside her production claim (the API server leaves out a false readOnly: writable)
    pod = k8s_controls.get("pods", spawner.pod_name, "default")
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    mounts = {m["name"]: m for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert volumes["scratch"]["persistentVolumeClaim"] == {"claimName": "experimental-zone"}
    assert mounts["scratch"] == {
        "name": "scratch",
        "mountPath": "/scratch",
        "subPath": f"{user}/scratch",
    }
    assert volumes["results"]["persistentVolumeClaim"]["claimName"] == f"results-{user}"
    # And the pod is valid for the Kubernetes versions we support
    manifest = spawner.api.api_client.sanitize_for_serialization(await spawner.get_pod_manifest())
    for version in ("1.32", "1.33", "1.34"):
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "Pod", **manifest}, version, strict=True
        )
    await spawner.stop()

    # And a production profile's pod does not mount the zone
    cpu = make_gpu_spawner("ana.lee", catalog, profile="cpu")
    await cpu.start()
    pod = k8s_controls.get("pods", cpu.pod_name, "default")
    assert all("experimental-zone" not in str(v) for v in pod["spec"].get("volumes") or [])
    await cpu.stop()


async def test_without_the_zones_volume_the_start_is_refused_before_any_pod(k8s_controls, tmp_path):
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(CATALOG.format(volume=""))
    spawner = make_gpu_spawner("ana", catalog, profile="try-out")

    with pytest.raises(SpawnException) as refused:
        await spawner.start()

    assert refused.value.status_code == 503
    assert refused.value.message == (
        "Try-out area cannot start: scratch mounts the experimental zone, which has no "
        "volume; set settings.experimental_zone.volume in the catalog. Tell the hub admins."
    )
    assert k8s_controls.get("pods", spawner.pod_name, "default") is None
