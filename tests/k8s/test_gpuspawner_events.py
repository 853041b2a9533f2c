"""GPUSpawner's ``events``: KubeSpawner's list for the pod, found without sorting the namespace.

KubeSpawner reads ``events`` to mark where a start begins, to log the pod's events at
launch and on every progress tick. GPUSpawner picks its pod's events before sorting;
the list it returns must be the one KubeSpawner's own property returns on the same
spawner, before and after a restart of the server (the marker of the previous start).
"""

from __future__ import annotations

import asyncio

import pytest
from kubespawner import KubeSpawner

from gpuspawner.spawners.kubernetes import GPUSpawner
from tests.support.k8s_spawners import make_gpu_spawner, write_class_catalog

pytestmark = pytest.mark.usefixtures("kubespawner_env")


def kubespawners_events(spawner: GPUSpawner) -> list[dict]:
    """What KubeSpawner's own ``events`` property gives for this spawner."""
    return KubeSpawner.events.fget(spawner)


async def test_each_pod_sees_exactly_kubespawners_events_before_and_after_a_restart(
    k8s_controls, tmp_path
):
    # Given three students of a class starting at once, so the namespace holds the
    # events of several pods interleaved
    GPUSpawner._inventories.clear()
    k8s_controls.add_gpu_nodes(1, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})
    names = ["ada", "grace", "alan"]
    catalog = write_class_catalog(tmp_path / "catalog.yaml", names)
    spawners = [make_gpu_spawner(name, catalog) for name in names]
    await asyncio.gather(*(s.start() for s in spawners))
    try:
        # Then each spawner's events are its own pod's, in KubeSpawner's order
        for spawner in spawners:
            ours = spawner.events
            assert ours, "a started pod has events (Scheduled, Pulled, Started)"
            assert {e["involvedObject"]["name"] for e in ours} == {spawner.pod_name}
            assert ours == kubespawners_events(spawner)

        # When one student's server stops and starts again
        again = spawners[0]
        await again.stop(now=True)
        await again.start()

        # Then its events are those after the previous start's marker, as KubeSpawner's
        assert again.events == kubespawners_events(again)
        everything = [
            e
            for e in again.event_reflector.resources.values()
            if e["involvedObject"]["name"] == again.pod_name
        ]
        assert len(again.events) < len(everything), "the first start's events are left out"
    finally:
        await asyncio.gather(*(s.stop(now=True) for s in spawners))
        GPUSpawner._inventories.clear()
