"""Scenarios: a job on several nodes in the one GPU pool. It holds its share on as many
distinct nodes, all at once or not at all, and every GPU of every pod counts (GPU-hours,
the GPU map's holders)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from gpuspawner.accounting.intervals import allocation_share
from gpuspawner.policy import CapacityPool, Refusal
from gpuspawner.policy.share import GPUDevice, GPUShare

TWO_GPUS = GPUShare(count=2)


def cluster(*gpus_per_node: int) -> CapacityPool:
    devices = [
        GPUDevice(id=f"gpu-node-{n}/{i}", index=i, model="A100-SXM4-80GB", memory_mib=81920)
        for n, count in enumerate(gpus_per_node)
        for i in range(count)
    ]
    return CapacityPool(devices)


def book(pool: CapacityPool, key: str, nodes: int = 2, share: GPUShare = TWO_GPUS):
    return pool.allocate(
        key, owner="alice", profile_id="two-by-two", course_id=None, share=share, nodes=nodes
    )


def test_a_two_node_job_holds_two_gpus_on_each_of_two_nodes_and_counts_four():
    # Given three nodes of four GPUs
    pool = cluster(4, 4, 4)
    # When a 2-node x 2-GPU job is booked
    allocation = book(pool, "job:j1")
    # Then it holds two GPUs on each of two distinct nodes: four GPUs in its GPU-hours
    nodes = sorted(device.split("/")[0] for device in allocation.device_ids)
    assert nodes == ["gpu-node-0", "gpu-node-0", "gpu-node-1", "gpu-node-1"]
    assert allocation_share(allocation) == Fraction(4)
    # And the pool sees four GPUs taken
    assert sum(1 for usage in pool.usage().values() if usage.holders) == 4


def test_a_job_whose_pods_do_not_all_fit_takes_nothing():
    # Given two nodes, one of them with a single free GPU left
    pool = cluster(2, 2)
    pool.allocate(
        "server:bob/", owner="bob", profile_id="one", course_id=None, share=GPUShare(count=1)
    )
    # When a 2-node x 2-GPU job asks
    with pytest.raises(Refusal) as refused:
        book(pool, "job:j2")
    # Then it is told to wait, and holds no GPU at all (not its first pod's)
    assert refused.value.code == "full"
    assert "no room for 2 whole GPUs on each of 2 nodes" in refused.value.message
    assert "waits in the queue" not in refused.value.message  # booked as a server would be
    assert "job:j2" not in pool.allocations


def test_a_cluster_with_too_few_nodes_refuses_for_good_saying_why():
    pool = cluster(4)
    with pytest.raises(Refusal) as refused:
        book(pool, "job:j3")
    assert refused.value.code == "too-large"
    assert refused.value.message.startswith(
        "This flavor asks for 2 nodes with 2 whole GPUs each, but only 1 node here has"
    )


def test_one_machine_refuses_a_job_on_several_nodes_saying_why():
    pool = CapacityPool(
        [GPUDevice(id=f"GPU-{i}", index=i, model="RTX 4090", memory_mib=24564) for i in range(8)]
    )
    with pytest.raises(Refusal) as refused:
        book(pool, "job:j4")
    assert (refused.value.code, refused.value.status) == ("too-large", 400)
    assert refused.value.message == (
        "This flavor asks for 2 nodes, but a job on 2 nodes needs jobs to run on Kubernetes: "
        "on one machine a job runs as one process on that machine, so it cannot span several "
        "nodes. Choose a flavor on one node, or ask the hub admins to run this one on their "
        "cluster."
    )
