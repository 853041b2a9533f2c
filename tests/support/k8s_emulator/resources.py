"""The resource types the emulator serves, and the discovery documents that describe them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

KUBERNETES_VERSION = {"major": "1", "minor": "34", "gitVersion": "v1.34.0"}

_ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class ResourceType:
    """One REST resource, such as ``pods`` in the core group or ``jobs`` in ``batch``."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    # Field selectors beyond metadata.name/metadata.namespace that the API server indexes.
    field_labels: tuple[str, ...] = ()
    # Whether DELETE answers with the deleted object (pods) or with a Status (jobs).
    returns_deleted_object: bool = False
    # What DELETE without a propagationPolicy does to dependents (batch/v1 Jobs orphan).
    default_propagation: str = "Background"
    has_status: bool = field(default=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    def allows_field(self, path: str) -> bool:
        if path == "metadata.name" or (self.namespaced and path == "metadata.namespace"):
            return True
        return path in self.field_labels

    def base_path(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(
        self, namespace: str | None, name: str | None = None, subresource: str | None = None
    ) -> str:
        parts = [self.base_path()]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name:
            parts.append(name)
        if subresource:
            parts.append(subresource)
        return "/".join(parts)


POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)

# returns_deleted_object follows the API's OpenAPI description (what kubernetes_asyncio's
# delete_* methods deserialize): the object for pods, services, PVCs, service accounts and
# the DRA kinds; a Status for the others.
RESOURCE_TYPES: tuple[ResourceType, ...] = (
    ResourceType(
        group="",
        version="v1",
        plural="pods",
        kind="Pod",
        namespaced=True,
        short_names=("po",),
        subresources=("status", "log", "binding", "eviction", "exec"),
        field_labels=POD_FIELDS,
        returns_deleted_object=True,
        has_status=True,
    ),
    ResourceType(
        group="",
        version="v1",
        plural="events",
        kind="Event",
        namespaced=True,
        short_names=("ev",),
        field_labels=EVENT_FIELDS,
    ),
    ResourceType(
        group="",
        version="v1",
        plural="services",
        kind="Service",
        namespaced=True,
        short_names=("svc",),
        subresources=("status",),
        field_labels=("spec.clusterIP", "spec.type"),
        returns_deleted_object=True,
        has_status=True,
    ),
    ResourceType(
        group="",
        version="v1",
        plural="persistentvolumeclaims",
        kind="PersistentVolumeClaim",
        namespaced=True,
        short_names=("pvc",),
        subresources=("status",),
        returns_deleted_object=True,
        has_status=True,
    ),
    ResourceType(
        group="",
        version="v1",
        plural="secrets",
        kind="Secret",
        namespaced=True,
        field_labels=("type",),
    ),
    ResourceType(
        group="",
        version="v1",
        plural="configmaps",
        kind="ConfigMap",
        namespaced=True,
        short_names=("cm",),
    ),
    ResourceType(
        group="",
        version="v1",
        plural="serviceaccounts",
        kind="ServiceAccount",
        namespaced=True,
        short_names=("sa",),
        returns_deleted_object=True,
    ),
    ResourceType(
        group="",
        version="v1",
        plural="namespaces",
        kind="Namespace",
        namespaced=False,
        short_names=("ns",),
        subresources=("status", "finalize"),
        field_labels=("status.phase",),
        returns_deleted_object=True,  # a terminating namespace is returned, as kubectl shows
        has_status=True,
    ),
    ResourceType(
        group="",
        version="v1",
        plural="nodes",
        kind="Node",
        namespaced=False,
        short_names=("no",),
        subresources=("status",),
        field_labels=("spec.unschedulable",),
        has_status=True,
    ),
    ResourceType(
        group="batch",
        version="v1",
        plural="jobs",
        kind="Job",
        namespaced=True,
        subresources=("status",),
        field_labels=("status.successful",),
        default_propagation="Orphan",
        has_status=True,
    ),
    ResourceType(
        group="resource.k8s.io",
        version="v1",
        plural="resourceclaims",
        kind="ResourceClaim",
        namespaced=True,
        subresources=("status",),
        returns_deleted_object=True,
        has_status=True,
    ),
    ResourceType(
        group="resource.k8s.io",
        version="v1",
        plural="resourceclaimtemplates",
        kind="ResourceClaimTemplate",
        namespaced=True,
        returns_deleted_object=True,
    ),
    ResourceType(
        group="resource.k8s.io",
        version="v1",
        plural="deviceclasses",
        kind="DeviceClass",
        namespaced=False,
        returns_deleted_object=True,
    ),
    ResourceType(
        group="resource.k8s.io",
        version="v1",
        plural="resourceslices",
        kind="ResourceSlice",
        namespaced=False,
        field_labels=("spec.nodeName", "spec.driver"),
        returns_deleted_object=True,
    ),
)

# resource.k8s.io by the Kubernetes minor version that first serves it: v1beta1 from 1.32,
# v1beta2 from 1.33, v1 (GA) from 1.34; all three are served by 1.34. Each version keeps its
# own objects here (the emulator converts nothing between versions).
DRA_GROUP = "resource.k8s.io"
DRA_VERSIONS = {"v1": 34, "v1beta2": 33, "v1beta1": 32}
SUPPORTED_MINORS = range(32, 35)
RESOURCE_TYPES += tuple(
    replace(rt, version=version)
    for version in ("v1beta2", "v1beta1")
    for rt in RESOURCE_TYPES
    if rt.group == DRA_GROUP and rt.version == "v1"
)


def minor_of(kubernetes_version: str) -> int:
    """34 for "1.34" (or "v1.34.0"); ValueError for versions the emulator cannot play."""
    parts = kubernetes_version.lstrip("v").split(".")
    minor = int(parts[1]) if len(parts) > 1 and parts[0] == "1" and parts[1].isdigit() else -1
    if minor not in SUPPORTED_MINORS:
        raise ValueError(
            f"the emulator plays Kubernetes 1.{SUPPORTED_MINORS.start} to 1.{SUPPORTED_MINORS.stop - 1}, not {kubernetes_version!r}"
        )
    return minor


def served(group: str, version: str, minor: int = 34) -> bool:
    """Whether Kubernetes 1.<minor> serves ``group/version``."""
    return group != DRA_GROUP or minor >= DRA_VERSIONS.get(version, 99)


def version_info(minor: int = 34) -> dict[str, str]:
    """/version's major, minor and gitVersion for 1.<minor>."""
    return {"major": "1", "minor": str(minor), "gitVersion": f"v1.{minor}.0"}


_BY_PATH = {(rt.group, rt.version, rt.plural): rt for rt in RESOURCE_TYPES}
_BY_KIND = {(rt.api_version, rt.kind): rt for rt in RESOURCE_TYPES}


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    return _BY_PATH.get((group, version, plural))


def by_kind(api_version: str, kind: str) -> ResourceType | None:
    return _BY_KIND.get((api_version, kind))


POD = _BY_PATH[("", "v1", "pods")]
NAMESPACE = _BY_PATH[("", "v1", "namespaces")]
JOB = _BY_PATH[("batch", "v1", "jobs")]


def groups(minor: int = 34) -> dict[str, list[str]]:
    """{group: [versions]} for the named (non-core) groups 1.<minor> serves, newest first."""
    result: dict[str, list[str]] = {}
    for rt in RESOURCE_TYPES:
        if not served(rt.group, rt.version, minor):
            continue
        if rt.group and rt.version not in result.setdefault(rt.group, []):
            result[rt.group].append(rt.version)
    return result


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group_document(name: str, versions: list[str]) -> dict[str, Any]:
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


def api_group_list(minor: int = 34) -> dict[str, Any]:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group_document(name, versions) for name, versions in groups(minor).items()],
    }


def api_group(name: str, minor: int = 34) -> dict[str, Any] | None:
    versions = groups(minor).get(name)
    if versions is None:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_document(name, versions)}


_SUBRESOURCE_VERBS = {
    "status": (["get", "patch", "update"], None),
    "log": (["get"], None),
    "binding": (["create"], "Binding"),
    "eviction": (["create"], "Eviction"),
    "exec": (["create", "get"], "PodExecOptions"),
    "finalize": (["update"], None),
}


def api_resource_list(group: str, version: str, minor: int = 34) -> dict[str, Any] | None:
    if not served(group, version, minor):
        return None
    selected = [rt for rt in RESOURCE_TYPES if rt.group == group and rt.version == version]
    if not selected:
        return None
    resources: list[dict[str, Any]] = []
    for rt in selected:
        entry: dict[str, Any] = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(_ALL_VERBS),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        resources.append(entry)
        for sub in rt.subresources:
            verbs, kind = _SUBRESOURCE_VERBS[sub]
            resources.append(
                {
                    "name": f"{rt.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": kind or rt.kind,
                    "verbs": verbs,
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }
