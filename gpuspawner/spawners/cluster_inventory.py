"""The GPUs and allocations of one cluster, shared by every GPUSpawner of a hub: read from
the nodes' labels and the pods' allocation records, and kept up to date between starts.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from kubernetes_asyncio.client.rest import ApiException
from traitlets import Float
from traitlets.config import LoggingConfigurable

from ..core.allocation_record import (
    allocations_from_pods,
    devices_from_nodes,
    pods_by_allocation,
    pods_by_allocation_node,
)
from ..policy import Allocation, CapacityPool, GPUDevice

# Jobs' keys in the pool (``JobTicket.key`` of the job service).
JOB_KEY_PREFIX = "job:"


def node_of(device_id: str) -> str:
    return device_id.rsplit("/", 1)[0]


class ClusterInventory:
    """The GPUs and allocations of one cluster, shared by every spawner of the hub."""

    def __init__(self) -> None:
        self.pool: CapacityPool | None = None
        self.loaded_at = 0.0
        self.jobs_loaded_at = 0.0
        self.pods: dict[str, tuple[str, str]] = {}
        """Allocation key -> (namespace, pod), from the pods' records (for the metrics)."""
        self.node_pods: dict[tuple[str, str], tuple[str, str]] = {}
        """(allocation key, node) -> (namespace, pod): each pod of a job on several nodes."""
        self.lock = asyncio.Lock()
        self.workloads: Any = None
        """Kueue mode: the namespace's Workloads (``kueue_mode.QueueListing``)."""
        self.pod_groups: Any = None
        """KAI-scheduler: the namespace's PodGroups (a ``kueue_mode.QueueListing``)."""

    @staticmethod
    async def items(response) -> list[dict]:
        """The ``items`` of a list call made with ``_preload_content=False``, as plain dicts.

        Read as JSON, as KubeSpawner's reflectors read theirs: the typed client's models,
        turned back into dicts, cost milliseconds per pod, all on the hub's event loop.
        """
        if not response.ok:
            raise ApiException(status=response.status, reason=response.reason)
        return json.loads(await response.read())["items"]


class ClusterInventoryMixin(LoggingConfigurable):
    """GPUSpawner's view of the cluster's GPUs: one pool per namespace, servers and jobs alike."""

    # KubeSpawner's, on the spawner this is mixed into.
    api: Any
    namespace: str
    component_label: str
    k8s_api_request_timeout: int

    inventory_refresh_seconds = Float(
        60.0,
        config=True,
        help="""
        How often the GPU inventory is re-read from the nodes' labels (and the research
        jobs' slices from their pods).

        Example::

            c.GPUSpawner.inventory_refresh_seconds = 300
        """,
    )

    job_slices_refresh_seconds = Float(
        5.0,
        config=True,
        help="""
        How often the GPU slices of research jobs (the job service's pods) are re-read
        between inventory refreshes, so a server is not given a slice a job took. Each
        look lists the namespace's pods that are not this hub's servers (KubeSpawner's
        ``component`` label), so its cost follows the number of jobs, not of students.

        Example::

            c.GPUSpawner.job_slices_refresh_seconds = 2
        """,
    )

    _inventories: dict[str, ClusterInventory] = {}

    @property
    def _inventory(self) -> ClusterInventory:
        key = f"{self.namespace}"
        if key not in self._inventories:
            self._inventories[key] = ClusterInventory()
        return self._inventories[key]

    def allocation_pods(self) -> dict[str, tuple[str, str]]:
        """The pod of each server's and job's slice, by allocation key: (namespace, pod).

        For the metrics, which join the DCGM exporter's per-pod readings to holders.
        """
        return dict(self._inventory.pods)

    def allocation_node_pods(self) -> dict[tuple[str, str], tuple[str, str]]:
        """The pod of each slice on each node, by (allocation key, node): a job on several
        nodes holds the GPUs of each node through that node's pod."""
        return dict(self._inventory.node_pods)

    def gpu_devices(self) -> list[GPUDevice]:
        pool = self._inventory.pool
        return pool.devices if pool else []

    @property
    def capacity_pool(self) -> CapacityPool:
        inventory = self._inventory
        if inventory.pool is None:
            inventory.pool = CapacityPool([])
        return inventory.pool

    async def ensure_inventory(self) -> None:
        """Read GPUs from the nodes and allocations from the pods, when due.

        Servers and jobs draw from one pool: the first load restores every slice recorded
        on a pod (this hub's servers and the job service's jobs); each later refresh keeps
        the servers this hub holds in memory and takes the jobs' slices from their pods
        again, so a job that started or ended meanwhile is counted, and shown, as it is.
        When the nodes still have the same GPUs (the usual refresh) the pool itself is
        kept: rebuilding it re-places every running server, a cost that grows with
        servers times GPUs, in the middle of a class start.
        """
        inventory = self._inventory
        if inventory.pool is not None and (
            time.monotonic() - inventory.loaded_at < self.inventory_refresh_seconds
        ):
            if time.monotonic() - inventory.jobs_loaded_at >= self.job_slices_refresh_seconds:
                async with inventory.lock:
                    if time.monotonic() - inventory.jobs_loaded_at >= (
                        self.job_slices_refresh_seconds
                    ):
                        await self._sync_job_slices(inventory.pool)
                        inventory.jobs_loaded_at = time.monotonic()
            return
        async with inventory.lock:
            if inventory.pool is not None and (
                time.monotonic() - inventory.loaded_at < self.inventory_refresh_seconds
            ):
                return
            nodes = await ClusterInventory.items(
                await self.api.list_node(
                    _request_timeout=self.k8s_api_request_timeout, _preload_content=False
                )
            )
            devices = devices_from_nodes(nodes)
            if inventory.pool is not None and devices and inventory.pool.devices == devices:
                await self._sync_job_slices(inventory.pool)
                inventory.loaded_at = inventory.jobs_loaded_at = time.monotonic()
                return
            first_load = inventory.pool is None or not inventory.pool.devices
            pool = CapacityPool(devices)
            if inventory.pool is not None:
                for allocation in inventory.pool.allocations.values():
                    if first_load or not allocation.key.startswith(JOB_KEY_PREFIX):
                        pool.restore(allocation)
            for allocation in await self._allocations_from_pods(servers=first_load):
                if first_load or allocation.key.startswith(JOB_KEY_PREFIX):
                    for warning in pool.restore(allocation):
                        self.log.warning("Rebuilding GPU capacity: %s", warning)
            inventory.pool = pool
            inventory.loaded_at = inventory.jobs_loaded_at = time.monotonic()
            self.log.info(
                "GPU inventory: %d GPUs on %d nodes, %d allocations",
                len(devices),
                len({node_of(d.id) for d in devices}),
                len(pool.allocations),
            )

    async def _sync_job_slices(self, pool: CapacityPool) -> None:
        """Take the jobs' slices in ``pool`` from their pods again (servers' stay as they are)."""
        jobs = {
            a.key: a
            for a in await self._allocations_from_pods(servers=False)
            if a.key.startswith(JOB_KEY_PREFIX)
        }
        for key in [k for k in pool.allocations if k.startswith(JOB_KEY_PREFIX)]:
            if key not in jobs:
                pool.release(key)
        for key, allocation in jobs.items():
            if key not in pool.allocations:
                for warning in pool.restore(allocation):
                    self.log.warning("Counting a job's GPU slice: %s", warning)

    async def _allocations_from_pods(self, *, servers: bool = True) -> list[Allocation]:
        """The slices recorded on the namespace's pods: servers' and jobs' alike.

        With ``servers=False`` the hub's own server pods are left out by the API server
        (a label selector), for the looks that only want the jobs' slices: a class of
        hundreds is not listed and decoded every few seconds.
        """
        selector = "" if servers else f"component!={self.component_label}"
        pods = await ClusterInventory.items(
            await self.api.list_namespaced_pod(
                self.namespace,
                label_selector=selector,
                _request_timeout=self.k8s_api_request_timeout,
                _preload_content=False,
            )
        )
        found, warnings = allocations_from_pods(pods)
        inventory = self._inventory

        def kept(key: str) -> bool:  # servers' pods, when only jobs' were listed again
            return not servers and not key.startswith(JOB_KEY_PREFIX)

        inventory.pods = {
            **{key: pod for key, pod in inventory.pods.items() if kept(key)},
            **pods_by_allocation(pods),
        }
        inventory.node_pods = {
            **{where: pod for where, pod in inventory.node_pods.items() if kept(where[0])},
            **pods_by_allocation_node(pods),
        }
        for warning in warnings:
            self.log.warning("%s", warning)
        return found
