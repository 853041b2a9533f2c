"""What a GPUSpawner start leaves behind when it is refused, fails or stops (issue 12, item 6)."""

from __future__ import annotations

import asyncio

import pytest
from jupyterhub.spawner import SpawnException
from kubespawner import KubeSpawner

from gpuspawner.core.allocation_record import ALLOCATION_ANNOTATION
from gpuspawner.spawners.kubernetes import GPUSpawner
from tests.support.k8s_spawners import make_gpu_spawner, write_class_catalog

pytestmark = pytest.mark.usefixtures("kubespawner_env")

HANG_GUARD = 60  # seconds: only ends a test that would otherwise never end

DRA_GROUP, DRA_VERSION = "resource.k8s.io", "v1"


async def test_progress_ends_when_a_start_is_refused_before_its_pod(tmp_path):
    # Given a student who is not enrolled in the course she asks for
    spawner = make_gpu_spawner("eve", write_class_catalog(tmp_path / "c.yaml", ["ana"]))

    # When she starts it and the progress page follows the start
    start = spawner.start()
    events = asyncio.ensure_future(_collect(spawner.progress()))
    with pytest.raises(SpawnException) as refused:
        await start

    # Then the start is refused, and the progress events end too
    assert refused.value.status_code == 403
    messages = await asyncio.wait_for(events, HANG_GUARD)
    assert messages[0] == "Checking your profile, its class window and GPU capacity"


async def _collect(progress) -> list[str]:
    return [event.get("message", "") async for event in progress]


async def test_a_failed_start_leaves_no_toleration_or_allocation_for_the_next(
    k8s_controls, tmp_path, monkeypatch
):
    # Given a spawner whose GPU plan adds a toleration, and whose first start fails
    k8s_controls.add_gpu_nodes(1, gpu_count=2)
    GPUSpawner._inventories.clear()
    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    spawner = make_gpu_spawner(
        "ana",
        write_class_catalog(tmp_path / "c.yaml", ["ana"]),
        sharing_backend_config={"replicas": 4, "gfd_labels": False, "tolerations": [toleration]},
    )
    configured_tolerations = list(spawner.tolerations)
    configured_environment = dict(spawner.environment)

    def no_pod(self):
        raise RuntimeError("the API server went away")

    monkeypatch.setattr(KubeSpawner, "start", no_pod)
    with pytest.raises(RuntimeError):
        await spawner.start()

    # Then nothing the grant applied stays on the spawner
    assert spawner.tolerations == configured_tolerations
    assert ALLOCATION_ANNOTATION not in spawner.extra_annotations
    assert "nvidia.com/gpu" not in spawner.extra_resource_limits
    assert spawner.environment == configured_environment
    assert spawner.capacity_pool.allocations == {}


async def test_a_dra_template_follows_the_current_grant_and_goes_with_the_server(
    k8s_controls, tmp_path
):
    # Given a DRA cluster where ana's server once ran with a quarter of a GPU
    k8s_controls.add_gpu_nodes(1, gpu_count=2)
    GPUSpawner._inventories.clear()
    quarter = make_gpu_spawner(
        "ana",
        write_class_catalog(tmp_path / "q.yaml", ["ana"], share="{fraction: 1/4}"),
        sharing_backend="dra",
        sharing_backend_config={},
    )
    await quarter.ensure_inventory()
    quarter.hold_grant(quarter.decide_start())
    await quarter._create_claim_templates()
    quarter.release_allocation()
    name = f"{quarter.pod_name}-gpu"
    old = k8s_controls.get("resourceclaimtemplates", name, "default", group=DRA_GROUP)
    assert old is not None

    # When her server now starts with a whole GPU (the old template still there)
    whole = make_gpu_spawner(
        "ana",
        write_class_catalog(tmp_path / "w.yaml", ["ana"], share="{count: 1}"),
        sharing_backend="dra",
        sharing_backend_config={},
    )
    whole.hold_grant(whole.decide_start())
    await whole._create_claim_templates()

    # Then the template in the cluster is the whole GPU's, not the old quarter's (as the
    # API server stores it: with the claims' empty metadata)
    assert whole._plan is not None
    expected = whole._plan.resource_claim_templates[0]["spec"]
    current = k8s_controls.get("resourceclaimtemplates", name, "default", group=DRA_GROUP)
    assert current is not None and current["spec"] == {"metadata": {}, **expected}
    assert current["spec"] != old["spec"]

    # And when the server stops, its template goes with it
    await whole.stop()
    assert k8s_controls.get("resourceclaimtemplates", name, "default", group=DRA_GROUP) is None
