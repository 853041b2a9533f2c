"""Where the GPU map page reads who holds which slice: the ledger, or the cluster's pods.

Design notes: docs/design/sessions.md, "gpuspawner.sessions.gpu_pools".
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable
from typing import Any, Protocol

from gpuspawner.core.allocation_record import pool_from_cluster
from gpuspawner.core.inventory import discover_nvml_gpus, simulated_gpus
from gpuspawner.core.ledger import AllocationLedger
from gpuspawner.core.telemetry import DeviceTelemetry
from gpuspawner.policy import CapacityPool, GPUDevice

log = logging.getLogger("gpuspawner.sessions.gpu_map")


class GPUPoolSource(Protocol):
    """Reads the GPU pool as it is now."""

    where: str
    """``"one machine"`` or ``"Kubernetes"``: shown on the page."""
    telemetry: DeviceTelemetry | None
    """How busy the GPUs and each holder are; None: the map shows no use."""

    async def read(self) -> CapacityPool: ...


def machine_devices(simulated: list[dict[str, Any]] | None) -> list[GPUDevice]:
    """This machine's GPUs as the hub sees them: NVML's, else the simulated ones."""
    return discover_nvml_gpus() or simulated_gpus(simulated or [])


class LedgerPool:
    """The pool of one machine, from the allocation ledger."""

    where = "one machine"

    def __init__(
        self,
        path: str,
        devices: Callable[[], list[GPUDevice]],
        telemetry: DeviceTelemetry | None = None,
    ):
        self.ledger = AllocationLedger(path, log)
        self.telemetry = telemetry
        self._devices = devices
        self._known: list[GPUDevice] | None = None

    async def read(self) -> CapacityPool:
        if self._known is None:  # NVML is asked once, as the hub does
            self._known = await asyncio.to_thread(self._devices)
        return await asyncio.to_thread(self.ledger.snapshot, self._known)


class ClusterPool:
    """The pool of a cluster, from its GPU nodes and the pods of ``namespace``."""

    where = "Kubernetes"

    def __init__(
        self,
        namespace: str,
        kubeconfig: str | None = None,
        telemetry: DeviceTelemetry | None = None,
    ):
        self.namespace = namespace
        self.telemetry = telemetry
        self.kubeconfig = kubeconfig
        self._api: Any = None

    async def _client(self) -> Any:
        # Imported here: the service needs kubernetes_asyncio only on Kubernetes.
        from kubernetes_asyncio import client, config

        if self._api is None:
            configuration = client.Configuration()
            if os.environ.get("KUBERNETES_SERVICE_HOST") and not self.kubeconfig:
                config.load_incluster_config(client_configuration=configuration)
            else:
                await config.load_kube_config(
                    config_file=self.kubeconfig, client_configuration=configuration
                )
            self._api = client.CoreV1Api(client.ApiClient(configuration))
        return self._api

    async def read(self) -> CapacityPool:
        api = await self._client()
        nodes = await _items(await api.list_node(_preload_content=False))
        pods = await _items(await api.list_namespaced_pod(self.namespace, _preload_content=False))
        pool, warnings = pool_from_cluster(nodes, pods)
        for warning in warnings:
            log.warning("GPU map: %s", warning)
        return pool

    async def close(self) -> None:
        if self._api is not None:
            await self._api.api_client.close()
            self._api = None


async def _items(response: Any) -> list[dict]:
    """A list call's ``items`` as plain dicts (``_preload_content=False``)."""
    if response.status >= 400:
        raise RuntimeError(
            f"The Kubernetes API refused to list pods or nodes ({response.status} "
            f"{response.reason}); give the course-sessions service's account list on pods "
            "in the hub's namespace and on nodes."
        )
    return json.loads(await response.read())["items"]


def pool_source(
    *,
    allocation_ledger: str | None,
    simulated: str | None,
    namespace: str | None,
    kubeconfig: str | None = None,
    gpu_readings: str | None = None,
    prometheus_url: str | None = None,
) -> GPUPoolSource | None:
    """The source the service's flags name: the cluster's pods when a namespace is given,
    else the ledger; None when neither (the page then says the map is not configured).

    GPU use comes from NVML, or the simulated readings file ``gpu_readings``, on one
    machine; from the Prometheus at ``prometheus_url`` on Kubernetes (none without it).
    """
    if namespace:
        from gpuspawner.prometheus_telemetry import PrometheusTelemetry

        readings = PrometheusTelemetry(prometheus_url) if prometheus_url else None
        return ClusterPool(namespace, kubeconfig, readings)
    if allocation_ledger:
        specs = json.loads(simulated) if simulated else None
        if specs is not None and not isinstance(specs, list):
            raise ValueError(
                "--simulated-gpus must be a JSON list such as "
                '[{"model": "RTX 4090", "memory": "24GiB", "count": 2}]'
            )
        from gpuspawner.core.telemetry import telemetry_from_config
        from gpuspawner.process_owners import ledger_telemetry

        telemetry = ledger_telemetry(
            telemetry_from_config(gpu_readings), allocation_ledger, simulated=bool(gpu_readings)
        )
        return LedgerPool(allocation_ledger, lambda: machine_devices(specs), telemetry)
    return None
