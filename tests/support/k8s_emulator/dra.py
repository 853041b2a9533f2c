"""Dynamic Resource Allocation, simulated: claims from templates, and a device allocator.

Off by default (pods with ``spec.resourceClaims`` are then scheduled as if they had none).
With ``simulate_dra()`` the scheduler consults this module for such pods, as the real
scheduler's DynamicResources plugin does:

- the resource claim controller's part: for each ``resourceClaimTemplateName`` entry a
  ResourceClaim ``<pod>-<entry>-xxxxx`` is created from the template (owned by the pod,
  annotated ``resource.kubernetes.io/pod-claim-name``) and recorded in the pod's
  ``status.resourceClaimStatuses``; a missing template or claim keeps the pod Pending;
- the allocator: each request (``exactly.deviceClassName``/``count`` in v1 and v1beta2,
  ``deviceClassName``/``count`` in v1beta1; ``allocationMode: All``) takes free devices
  from the ResourceSlices of one node whose driver the DeviceClass selects. A DeviceClass
  selector is a CEL expression; only ``device.driver == "..."`` is understood (any other
  selects every driver), and request selectors are not evaluated. Until every claim can
  be allocated the pod stays Pending, PodScheduled False/Unschedulable with the
  scheduler's "cannot allocate all claims" message; it is retried when slices, classes or
  claims change. Once placed, ``status.allocation`` (results and the node selector) and
  ``status.reservedFor`` are written, then the pod is bound to that node. A device is free
  again when its claim is deleted (the garbage collector deletes a pod's claims with it).
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterable
from typing import Any

from .client import ClientError, Informer, KubeClient

log = logging.getLogger(__name__)

Object = dict[str, Any]
Device = tuple[str, str, str, str]  # node, driver, pool, device
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
_DRIVER_SELECTOR = re.compile(r'device\.driver\s*==\s*["\']([^"\']+)["\']')


def cannot_allocate(total: int) -> str:
    return (
        f"0/{total} nodes are available: {total} cannot allocate all claims. "
        f"still not schedulable, preemption: 0/{total} nodes are available: "
        f"{total} Preemption is not helpful for scheduling."
    )


def _requests(claim: Object) -> list[tuple[str, str | None, int, bool]]:
    """(request name, device class, count, all) for each request of a claim."""
    found = []
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        exact = request.get("exactly") or request  # v1/v1beta2 nest it, v1beta1 does not
        found.append(
            (
                request.get("name", ""),
                exact.get("deviceClassName"),
                int(exact.get("count") or 1),
                exact.get("allocationMode") == "All",
            )
        )
    return found


def _allocated(claim: Object) -> list[Object]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return (allocation.get("devices") or {}).get("results") or []


def _allocated_node(claim: Object) -> str | None:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return str(field["values"][0])
    return None


class DeviceAllocator:
    """The DRA part of the simulated scheduler (see the module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        claims: Informer,
        slices: Informer,
        classes: Informer,
        version: str = "v1",
    ) -> None:
        self.client = client
        self.api_version = f"resource.k8s.io/{version}"
        self.api = f"/apis/{self.api_version}"  # the newest version the cluster serves
        self.claims = claims
        self.slices = slices
        self.classes = classes

    # --- devices ------------------------------------------------------------------------

    def _devices(self) -> list[Device]:
        devices = []
        for slice_ in sorted(self.slices.cache.values(), key=lambda s: s["metadata"]["name"]):
            spec = slice_.get("spec") or {}
            node = spec.get("nodeName")
            if not node:
                continue
            pool = (spec.get("pool") or {}).get("name", node)
            for device in spec.get("devices") or []:
                devices.append((node, spec.get("driver", ""), pool, device["name"]))
        return devices

    def _taken(self) -> set[tuple[str, str, str]]:
        return {
            (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
            for claim in self.claims.cache.values()
            for r in _allocated(claim)
        }

    def _class_drivers(self, name: str | None) -> set[str] | None:
        """The drivers a DeviceClass selects; None: any driver (unknown selectors)."""
        device_class = self.classes.cache.get(("", name or ""))
        if device_class is None:
            return set()  # a request for a class that does not exist cannot be allocated
        drivers = set()
        for selector in (device_class.get("spec") or {}).get("selectors") or []:
            match = _DRIVER_SELECTOR.search((selector.get("cel") or {}).get("expression", ""))
            if match is None:
                return None
            drivers.add(match.group(1))
        return drivers or None

    def _plan(self, claims: list[Object], node: str) -> list[tuple[Object, list[Object]]] | None:
        """Results for each unallocated claim on ``node``, or None if they do not all fit."""
        free = [d for d in self._devices() if d[0] == node]
        taken = self._taken()
        free = [d for d in free if (d[1], d[2], d[3]) not in taken]
        plans = []
        for claim in claims:
            if _allocated(claim):
                if _allocated_node(claim) not in (None, node):
                    return None
                continue
            results = []
            for request, device_class, count, everything in _requests(claim):
                drivers = self._class_drivers(device_class)
                matching = [d for d in free if drivers is None or d[1] in drivers]
                wanted = len(matching) if everything else count
                if not matching or len(matching) < wanted:
                    return None
                for chosen in matching[:wanted]:
                    free.remove(chosen)
                    results.append(
                        {
                            "request": request,
                            "driver": chosen[1],
                            "pool": chosen[2],
                            "device": chosen[3],
                        }
                    )
            plans.append((claim, results))
        return plans

    def feasible_nodes(self, claims: list[Object], nodes: Iterable[str]) -> set[str]:
        return {node for node in nodes if self._plan(claims, node) is not None}

    # --- claims -------------------------------------------------------------------------

    async def pod_claims(self, pod: Object) -> list[Object] | str:
        """The pod's ResourceClaims (made from templates when needed), or why not yet."""
        meta = pod["metadata"]
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
        statuses = {
            s["name"]: s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        }
        claims, recorded = [], dict(statuses)
        for entry in pod["spec"].get("resourceClaims") or []:
            claim_name = entry.get("resourceClaimName") or statuses.get(entry["name"])
            if claim_name is None and entry.get("resourceClaimTemplateName"):
                claim_name = self._owned_claim(namespace, uid, entry["name"])
                if claim_name is None:
                    made = await self._claim_from_template(pod, entry)
                    if isinstance(made, str):
                        return made
                    claim_name = made["metadata"]["name"]
                recorded[entry["name"]] = claim_name
            try:
                claims.append(
                    await self.client.get(
                        f"{self.api}/namespaces/{namespace}/resourceclaims/{claim_name}"
                    )
                )
            except ClientError as error:
                if error.status == 404:
                    return f'resourceclaim "{claim_name}" not found'
                raise
        if recorded != statuses:
            with contextlib.suppress(ClientError):
                await self.client.merge_patch(
                    f"/api/v1/namespaces/{namespace}/pods/{name}/status",
                    {
                        "status": {
                            "resourceClaimStatuses": [
                                {"name": k, "resourceClaimName": v} for k, v in recorded.items()
                            ]
                        }
                    },
                )
        return claims

    def _owned_claim(self, namespace: str, pod_uid: str, entry: str) -> str | None:
        for (claim_namespace, claim_name), claim in self.claims.cache.items():
            meta = claim["metadata"]
            if (
                claim_namespace == namespace
                and (meta.get("annotations") or {}).get(POD_CLAIM_NAME) == entry
                and any(r.get("uid") == pod_uid for r in meta.get("ownerReferences") or [])
            ):
                return claim_name
        return None

    async def _claim_from_template(self, pod: Object, entry: Object) -> Object | str:
        meta = pod["metadata"]
        template_name = entry["resourceClaimTemplateName"]
        try:
            template = await self.client.get(
                f"{self.api}/namespaces/{meta['namespace']}/resourceclaimtemplates/{template_name}"
            )
        except ClientError as error:
            if error.status == 404:
                return f'resourceclaimtemplate "{template_name}" not found'
            raise
        body = {
            "apiVersion": self.api_version,
            "kind": "ResourceClaim",
            "metadata": {
                "generateName": f"{meta['name']}-{entry['name']}-",
                "annotations": {POD_CLAIM_NAME: entry["name"]},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
                **(
                    {"labels": (template.get("spec") or {}).get("metadata", {}).get("labels")}
                    if (template.get("spec") or {}).get("metadata", {}).get("labels")
                    else {}
                ),
            },
            "spec": (template.get("spec") or {}).get("spec") or {},
        }
        return await self.client.create(
            f"{self.api}/namespaces/{meta['namespace']}/resourceclaims", body
        )

    async def allocate(self, pod: Object, claims: list[Object], node: str) -> bool:
        """Write the allocation of every claim on ``node`` and reserve them for the pod."""
        plans = self._plan(claims, node)
        if plans is None:
            return False
        meta = pod["metadata"]
        selector = {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        }
        planned = {claim["metadata"]["name"]: results for claim, results in plans}
        for claim in claims:
            status = dict(claim.get("status") or {})
            name = claim["metadata"]["name"]
            if name in planned:
                status["allocation"] = {
                    "devices": {"results": planned[name]},
                    "nodeSelector": selector,
                }
            reserved = [r for r in status.get("reservedFor") or [] if r.get("uid") != meta["uid"]]
            status["reservedFor"] = [
                *reserved,
                {"resource": "pods", "name": meta["name"], "uid": meta["uid"]},
            ]
            updated = await self.client.merge_patch(
                f"{self.api}/namespaces/{meta['namespace']}/resourceclaims/{name}/status",
                {"status": status},
            )
            self.claims.cache[Informer.key(updated)] = updated  # seen before the next pod is placed
        return True
