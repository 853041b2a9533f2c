"""One real control plane for a whole test session, as each test sees it.

``ControlPlaneCluster`` starts the control plane (control_plane.py), the node agent
(node_agent.py, on its own event loop in a background thread) and the components'
identities (identities.py). Each test gets it clean: no nodes, nothing in ``default`` but
what the session made, no namespace of an earlier test, node behaviour back to defaults.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..k8s_emulator.client import ClientError, KubeClient
from ..k8s_emulator.cluster import EmulatorThread
from ..k8s_emulator.kubelet import KubeletTimings
from ..k8s_emulator.node_controls import SyncNodeControls
from .control_plane import ControlPlane
from .identities import SESSION_LABEL, Identity, make_identities
from .images import Image, ImageRunner, default_images
from .kai import KAI
from .kueue import Kueue
from .node_agent import NodeAgent

Object = dict[str, Any]

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
USERS_NAMESPACE_LABELS = {
    # The users' namespace: baseline enforced, restricted reported (a managed cluster's
    # usual JupyterHub namespace).
    "pod-security.kubernetes.io/enforce": "baseline",
    "pod-security.kubernetes.io/enforce-version": "latest",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/warn-version": "latest",
}
# Objects of ``default`` the cluster itself keeps there.
KEPT_IN_DEFAULT = {
    ("", "services", "kubernetes"),
    ("", "serviceaccounts", "default"),
    ("", "configmaps", "kube-root-ca.crt"),
}
# Kinds the control plane manages in ``default`` (the kubernetes Service's endpoints).
NOT_CLEANED = {
    "endpoints",
    "endpointslices",
    "events",
    "leases",
    "bindings",
    "localsubjectaccessreviews",
}
# Cluster-scoped kinds a test may create; what is not in the session's start is removed.
CLUSTER_KINDS = (
    ("scheduling.k8s.io/v1", "priorityclasses"),
    ("rbac.authorization.k8s.io/v1", "clusterroles"),
    ("rbac.authorization.k8s.io/v1", "clusterrolebindings"),
    ("v1", "persistentvolumes"),
    ("storage.k8s.io/v1", "storageclasses"),
    ("resource.k8s.io/v1", "deviceclasses"),
    ("resource.k8s.io/v1", "resourceslices"),
    ("node.k8s.io/v1", "runtimeclasses"),
    ("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations"),
    ("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations"),
    ("kueue.x-k8s.io/v1beta2", "clusterqueues"),
    ("kueue.x-k8s.io/v1beta2", "resourceflavors"),
    ("kueue.x-k8s.io/v1beta2", "cohorts"),
    ("kueue.x-k8s.io/v1beta2", "workloadpriorityclasses"),
    ("kueue.x-k8s.io/v1beta2", "admissionchecks"),
    ("kueue.x-k8s.io/v1beta2", "topologies"),
    ("scheduling.run.ai/v2", "queues"),
)
CLEAN_GUARD = 60.0


def _api(group_version: str) -> str:
    return f"/api/{group_version}" if group_version == "v1" else f"/apis/{group_version}"


class Cleaner:
    """Puts the cluster back as the session made it, through the admin's API access."""

    def __init__(self, agent: NodeAgent) -> None:
        self.agent = agent
        self.admin: KubeClient = agent.admin
        self.baseline: dict[str, set[str]] = {}
        self.namespaced: list[tuple[str, str, bool]] = []

    async def snapshot(self) -> None:
        """Remember the session's cluster-scoped objects and the namespaced kinds served
        (again after the session installs more, such as Kueue's)."""
        self.namespaced = []
        for group_version, plural in (*CLUSTER_KINDS, ("v1", "namespaces")):
            self.baseline[plural] = await self._names(f"{_api(group_version)}/{plural}")
        discovered = [("v1", await self.admin.get("/api/v1"))]
        groups = await self.admin.get("/apis")
        for group in groups["groups"]:
            version = group["preferredVersion"]["groupVersion"]
            with contextlib.suppress(ClientError):
                discovered.append((version, await self.admin.get(f"/apis/{version}")))
        for group_version, listing in discovered:
            for resource in listing["resources"]:
                if (
                    resource["namespaced"]
                    and "/" not in resource["name"]
                    and "list" in resource["verbs"]
                    and "delete" in resource["verbs"]
                    and resource["name"] not in NOT_CLEANED
                ):
                    collection = "deletecollection" in resource["verbs"]
                    self.namespaced.append((group_version, resource["name"], collection))

    async def _names(self, path: str) -> set[str]:
        # A 429 ("storage is (re)initializing") is the API server's "ask again": a custom
        # kind's watch cache answers so for moments after its CRD is made, and again when it
        # restarts its watch of etcd on a loaded machine.
        for _ in range(50):
            try:
                listed = await self.admin.get(path)
                break
            except ClientError as error:
                if error.status == 404:
                    return set()
                if error.status != 429:
                    raise
                await asyncio.sleep(0.2)
        else:
            listed = await self.admin.get(path)
        return {item["metadata"]["name"] for item in listed["items"]}

    async def clean(self) -> None:
        kubelet = self.agent.kubelet
        kubelet.scripts.clear()
        kubelet.images.clear()  # a node a later test adds is a new node: no image pulled yet
        kubelet.unpullable_images.clear()
        kubelet.process_runner = None
        kubelet.serve_ports = False
        defaults = KubeletTimings()
        for step in vars(defaults):
            setattr(kubelet.timings, step, getattr(defaults, step))
        for name in await self._names("/api/v1/namespaces") - self.baseline["namespaces"]:
            # Its pods go at once, as default's do: the nodes are removed below, and a pod
            # left terminating on a removed node waits for the pod GC (a minute or more).
            with contextlib.suppress(ClientError):
                await self.admin.request(
                    "DELETE",
                    f"/api/v1/namespaces/{name}/pods",
                    body={"gracePeriodSeconds": 0, "propagationPolicy": "Background"},
                )
            with contextlib.suppress(ClientError):
                await self.admin.delete(f"/api/v1/namespaces/{name}")
        await self._empty_default()
        for group_version, plural in CLUSTER_KINDS:
            path = f"{_api(group_version)}/{plural}"
            for name in await self._names(path) - self.baseline[plural]:
                with contextlib.suppress(ClientError):
                    await self.admin.delete(f"{path}/{name}")
        for name in list(self.agent.hosts):
            await self.agent.remove_node(name)
        await self._wait_until_empty()

    async def _empty_default(self) -> None:
        keep = f"!{SESSION_LABEL}"
        for group_version, plural, collection in self.namespaced:
            path = f"{_api(group_version)}/namespaces/default/{plural}"
            group = group_version.rpartition("/")[0] if "/" in group_version else ""
            kept = {name for g, p, name in KEPT_IN_DEFAULT if (g, p) == (group, plural)}
            options = {"gracePeriodSeconds": 0, "propagationPolicy": "Background"}
            try:
                if collection and not kept:
                    await self.admin.request(
                        "DELETE", path, params={"labelSelector": keep}, body=options
                    )
                    continue
                listed = await self.admin.get(path, labelSelector=keep)
            except ClientError as error:
                if error.status in (404, 405):
                    continue
                raise
            for item in listed["items"]:
                if item["metadata"]["name"] not in kept:
                    with contextlib.suppress(ClientError):
                        await self.admin.delete(f"{path}/{item['metadata']['name']}", options)

    async def _left_of_cluster_kinds(self) -> list[str]:
        """The paths of the cluster-scoped objects a test made that still exist (a Kueue
        ClusterQueue or ResourceFlavor waits for Kueue's finalizer after its delete)."""
        left = []
        for group_version, plural in CLUSTER_KINDS:
            path = f"{_api(group_version)}/{plural}"
            left += [f"{path}/{name}" for name in await self._names(path) - self.baseline[plural]]
        return left

    async def _wait_until_empty(self) -> None:
        """Until no pod is left in ``default``, and no node, namespace or cluster-scoped
        object of a test remains (a test that makes one of the same name next would meet
        it "being deleted")."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CLEAN_GUARD
        while loop.time() < deadline:
            pods = await self.admin.get("/api/v1/namespaces/default/pods")
            nodes = await self._names("/api/v1/nodes")
            namespaces = await self._names("/api/v1/namespaces") - self.baseline["namespaces"]
            cluster_scoped = await self._left_of_cluster_kinds()
            if not pods["items"] and not nodes and not namespaces and not cluster_scoped:
                return
            for pod in pods["items"]:
                meta = pod["metadata"]
                if meta.get("finalizers"):
                    # A Job's tracking finalizer outlives a deleted Job only briefly; a
                    # test's own finalizer would keep the pod forever.
                    with contextlib.suppress(ClientError):
                        await self.admin.merge_patch(
                            f"/api/v1/namespaces/default/pods/{meta['name']}",
                            {"metadata": {"finalizers": None}},
                        )
            await asyncio.sleep(0.1)
        raise TimeoutError("the test cluster was not empty a minute after the clean-up began")


class ControlPlaneCluster(SyncNodeControls):
    """The session's real control plane with this project's node agent, for tests.

    ``url``, ``kubeconfig`` (the admin's), ``identities`` (the hub's and the job service's
    kubeconfigs) and the node controls of :class:`SyncNodeControls`.
    """

    is_emulated = False

    def __init__(
        self,
        plane: ControlPlane,
        runner: EmulatorThread,
        identities: dict[str, Identity],
        cleaner: Cleaner,
    ) -> None:
        self.plane = plane
        self._runner = runner
        self.nodes = runner.emulator  # type: ignore[assignment]
        self.agent: NodeAgent = runner.emulator  # type: ignore[assignment]
        self.identities = identities
        self.cleaner = cleaner
        self._kueue: Kueue | None = None
        self._kai: KAI | None = None
        self.url = plane.url
        self.kubeconfig = plane.admin_kubeconfig

    @classmethod
    def start(cls, folder: Path, *, identities: bool = True) -> ControlPlaneCluster:
        """A control plane with its node agent; ``identities``: the hub's and the job
        service's accounts in ``default`` (a cluster for a chart install makes its own)."""
        plane = ControlPlane(folder)
        plane.start()
        agent = NodeAgent(plane)
        runner = EmulatorThread(agent)  # type: ignore[arg-type]
        try:
            runner.start(timeout=60)
            runner.call(
                agent.admin.merge_patch,
                "/api/v1/namespaces/default",
                {"metadata": {"labels": USERS_NAMESPACE_LABELS}},
            )
            accounts = make_identities(plane) if identities else {}
            cleaner = Cleaner(agent)
            runner.call(cleaner.snapshot)
        except BaseException:
            runner.stop()
            plane.stop()
            raise
        return cls(plane, runner, accounts, cleaner)

    def call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self._runner.call(function, *args, **kwargs)

    def get(
        self,
        plural: str,
        name: str,
        namespace: str | None = None,
        group: str = "",
        version: str = "v1",
    ) -> Object | None:
        """The object as the API server has it now (the admin's read), or None."""
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        path = (
            f"{base}/namespaces/{namespace}/{plural}/{name}"
            if namespace
            else f"{base}/{plural}/{name}"
        )

        async def read() -> Object | None:
            try:
                return await self.agent.admin.get(path)  # type: ignore[no-any-return]
            except ClientError as error:
                if error.status == 404:
                    return None
                raise

        return self.call(read)  # type: ignore[no-any-return]

    def kueue(self) -> Kueue:
        """Kueue's controller, installed in this cluster on first use (for the session)."""
        if self._kueue is None:
            kueue = Kueue(self.plane)
            kueue.start()
            self._kueue = kueue
            self.call(self.cleaner.snapshot)
        return self._kueue

    def kai(self) -> KAI:
        """KAI-scheduler, installed in this cluster on first use (for the session)."""
        if self._kai is None:
            kai = KAI(self.plane, self.agent)
            kai.start()
            self._kai = kai
            self.call(self.cleaner.snapshot)
        return self._kai

    def run_images(self, images: dict[str, Image] | None = None) -> ImageRunner:
        """From now on (this test), the node runs pods of known images with their images'
        commands (images.py): the project's images, configurable-http-proxy, kube-scheduler,
        pause, or ``images``. Needs root (each container has a mount namespace)."""
        runner = ImageRunner(
            workdir=self.agent.node_root,
            images=images
            if images is not None
            else default_images(self.plane.bin / "kube-scheduler"),
            hosts=self.agent.services.hosts_file,
            network=self.agent.network,
            inherit_environment=False,
        )
        self.run_processes(runner)
        return runner

    def reset(self) -> None:
        """Back to the session's start: called after each test."""
        self.plane.check_running()
        self.call(self.cleaner.clean, timeout=CLEAN_GUARD + 30)

    def stop(self) -> None:
        if self._kai is not None:
            self._kai.stop()  # before the node: they talk to the API server through it
        self._runner.stop()
        self.plane.stop()
