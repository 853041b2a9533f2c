"""GPUSpawner on the real control plane: a class starting at once, a hub restart, refusals.

The spawners run in this test process with the hub's identity, as
KubeSpawner's own cluster tests do; JupyterHub's part (waiting for the server's
HTTP endpoint) is not exercised here.
"""

from __future__ import annotations

import asyncio
import json
from fractions import Fraction

import pytest
from jupyterhub.spawner import SpawnException

from gpuspawner.spawners.kubernetes import ALLOCATION_ANNOTATION, GPUSpawner, devices_from_nodes
from tests.support.k8s_spawners import make_gpu_spawner, write_class_catalog

pytestmark = pytest.mark.usefixtures("kubespawner_env")


@pytest.fixture(autouse=True)
def fresh_inventory():
    """Each test is a fresh hub: no capacity view carried over between tests."""
    GPUSpawner._inventories.clear()
    yield
    GPUSpawner._inventories.clear()


def slices_per_gpu(k8s_controls, spawners) -> dict[str, Fraction]:
    """What the pods' own annotations say each GPU holds."""
    held: dict[str, Fraction] = {}
    for spawner in spawners:
        pod = k8s_controls.get("pods", spawner.pod_name, "default")
        allocation = json.loads(pod["metadata"]["annotations"][ALLOCATION_ANNOTATION])
        for device in allocation["device_ids"]:
            held[device] = held.get(device, Fraction(0)) + Fraction(allocation["fraction"])
    return held


async def test_a_class_of_40_on_10_gpus_fills_them_exactly_and_the_41st_is_refused(
    k8s_controls, tmp_path
):
    # Given 10 GPUs shared four ways by time-slicing, and a course of 41 students at 1/4
    k8s_controls.add_gpu_nodes(10, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})
    names = [f"student-{i:02d}" for i in range(41)]
    catalog = write_class_catalog(tmp_path / "catalog.yaml", names)
    spawners = [make_gpu_spawner(name, catalog) for name in names[:40]]

    # When 20 start at the same moment, the hub restarts, and the other 20 start at once
    first = await asyncio.gather(*(s.start() for s in spawners[:20]))
    states = [s.get_state() for s in spawners[:20]]
    GPUSpawner._inventories.clear()  # the restarted hub has no capacity view in memory
    restored = []
    for name, state in zip(names[:20], states, strict=True):
        again = make_gpu_spawner(name, catalog)
        again.load_state(state)
        restored.append(again)
    second = await asyncio.gather(*(s.start() for s in spawners[20:]))

    # Then all 40 run, each GPU holds exactly four quarters, and no slice is booked twice
    assert len(set(first + second)) == 40
    held = slices_per_gpu(k8s_controls, spawners)
    assert len(held) == 10 and set(held.values()) == {Fraction(1)}
    pool = spawners[-1].capacity_pool
    assert len(pool.allocations) == 40
    assert all(usage.fraction == 1 for usage in pool.usage().values())

    # And the 41st student is refused with a sentence, before any pod is created
    late = make_gpu_spawner(names[40], catalog)
    with pytest.raises(SpawnException) as refused:
        await late.start()
    assert refused.value.status_code == 409
    assert "All GPUs are taken right now: 10 of 10 GPUs are shared by 40" in refused.value.message
    assert k8s_controls.get("pods", late.pod_name, "default") is None

    # And a stop frees exactly one slice, which the next student gets
    await restored[0].stop()
    await late.start()
    assert len(late.capacity_pool.allocations) == 40
    await asyncio.gather(*(s.stop() for s in [*restored[1:], *spawners[20:], late]))


async def test_capacity_is_rebuilt_from_the_pods_annotations_after_a_restart(
    k8s_controls, tmp_path
):
    # Given one GPU fully held by two half-GPU servers
    k8s_controls.add_gpu_nodes(1, gpu_count=1, extended_resources={"nvidia.com/gpu": 2})
    catalog = write_class_catalog(
        tmp_path / "c.yaml", ["ana", "ben", "cai"], share="{fraction: 1/2}"
    )
    halves = {"sharing_backend_config": {"replicas": 2, "gfd_labels": False}}
    for name in ("ana", "ben"):
        await make_gpu_spawner(name, catalog, **halves).start()
    # When the hub restarts without any spawner state (e.g. a lost database)
    GPUSpawner._inventories.clear()
    cai = make_gpu_spawner("cai", catalog, **halves)
    # Then the capacity view comes back from the cluster, and Cai is refused
    with pytest.raises(SpawnException) as refused:
        await cai.start()
    assert "1 of 1 GPU is shared by 2" in refused.value.message


async def test_a_pod_the_scheduler_cannot_place_ends_the_spawn_with_a_readable_reason(
    k8s_controls, tmp_path
):
    # Given a node whose device plugin advertises no GPU slots (the hub's labels say 1 GPU)
    k8s_controls.add_gpu_nodes(1, gpu_count=1, extended_resources={"nvidia.com/gpu": 0})
    catalog = write_class_catalog(tmp_path / "c.yaml", ["ana"])
    spawner = make_gpu_spawner(
        "ana", catalog, start_timeout=300, scheduling_failure_grace_seconds=0.5
    )
    # When Ana starts, the scheduler reports FailedScheduling
    with pytest.raises(SpawnException) as refused:
        await spawner.start()
    # Then the spawn ends (long before start_timeout) with the missing resource named
    assert refused.value.status_code == 409
    assert "no node has enough nvidia.com/gpu free" in refused.value.message
    assert k8s_controls.get("pods", spawner.pod_name, "default") is None
    assert spawner.capacity_pool.allocations == {}


async def test_a_cpu_profile_hides_the_nodes_gpus(k8s_controls, tmp_path):
    k8s_controls.add_gpu_nodes(1, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})
    catalog = write_class_catalog(tmp_path / "c.yaml", ["ana"])
    spawner = make_gpu_spawner("ana", catalog, profile="cpu")
    await spawner.start()
    pod = k8s_controls.get("pods", spawner.pod_name, "default")
    container = pod["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert "nvidia.com/gpu" not in (container["resources"].get("limits") or {})
    await spawner.stop()


def test_the_gpu_inventory_comes_from_gpu_feature_discovery_labels():
    nodes = [
        {
            "metadata": {
                "name": "b",
                "labels": {
                    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-SHARED",
                    "nvidia.com/gpu.count": "2",
                    "nvidia.com/gpu.memory": "81920",
                },
            }
        },
        {
            "metadata": {
                "name": "a",
                "labels": {
                    "nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-4090",
                    "nvidia.com/gpu.count": "1",
                    "nvidia.com/gpu.memory": "24564",
                },
            }
        },
        {"metadata": {"name": "cpu-only", "labels": {}}},
        {
            "metadata": {
                "name": "cordoned",
                "labels": {
                    "nvidia.com/gpu.product": "NVIDIA-H100",
                    "nvidia.com/gpu.count": "8",
                    "nvidia.com/gpu.memory": "81559",
                },
            },
            "spec": {"unschedulable": True},
        },
    ]
    devices = devices_from_nodes(nodes)
    assert [(d.id, d.index, d.model, d.memory_mib) for d in devices] == [
        ("a/0", 0, "RTX-4090", 24564),
        ("b/0", 1, "A100-SXM4-80GB", 81920),
        ("b/1", 2, "A100-SXM4-80GB", 81920),
    ]


async def test_without_a_catalog_it_is_kubespawner_with_its_profile_list(tmp_path):
    # Given GPUSpawner configured as KubeSpawner would be: a profile_list, no course catalog
    profile_list = [
        {"display_name": "Small", "slug": "small", "default": True},
        {"display_name": "Large", "slug": "large", "kubespawner_override": {"cpu_limit": 4}},
    ]
    spawner = make_gpu_spawner("ada", tmp_path, catalog_path="", profile_list=profile_list)

    # When JupyterHub asks for the form and reads a submitted one
    form = spawner.options_form
    options = spawner.options_from_form({"profile": ["large"]})

    # Then it is KubeSpawner's own form and options, and start() would load them
    assert 'name="profile"' in form and "Large" in form and "gpus-card" not in form
    assert options == {"profile": "large"}
    spawner.user_options = options
    await spawner.load_user_options()
    assert spawner.cpu_limit == 4
