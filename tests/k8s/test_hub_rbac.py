"""The hub's Kubernetes permissions cover what its code does, on the real control plane.

The hub runs with the identity it has in production: the z2jh chart's hub Role (as
``helm template`` renders it) plus ``hub_config/kubernetes/rbac.yaml``. The API server's
audit log holds every request of that service account, so the verbs the hub needs are read
from what its code paths really asked for, not from a list kept by hand.

Kueue mode runs on the test cluster's Kueue (the ``kueue`` fixture): a ClusterQueue of one
GPU's four slices and its LocalQueue, as an admin makes them (tests/support/kueue_queues.py);
Kueue gates the fifth student's pod, and admits it when a slice's quota is free again.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubespawner import KubeSpawner

from gpuspawner.core.allocation_record import ALLOCATION_ANNOTATION, decode_allocation
from gpuspawner.sessions.gpu_pools import pool_source
from gpuspawner.spawners.kubernetes import GPUSpawner
from gpuspawner.spawners.kueue import QUEUED_LABEL
from tests.support.cluster.control_plane import AuditedRequest
from tests.support.cluster.identities import HUB_RBAC, chart_hub_rbac, rbac_documents, token_for
from tests.support.k8s_cluster import wait_for
from tests.support.k8s_spawners import (
    AuditTail,
    ProgressLog,
    make_gpu_spawner,
    provide_storage_class,
    provide_volume,
    write_class_catalog,
)
from tests.support.kai_queues import make_course_queue
from tests.support.kueue_queues import cluster_queue, make_queues

pytestmark = pytest.mark.usefixtures("kubespawner_env")

QUEUE = "gpu-servers"
KUEUE_GATE = "kueue.x-k8s.io/admission"
HANG_GUARD = 60.0  # seconds: only ends a test that would otherwise never end


@pytest.fixture(autouse=True)
def fresh_inventory():
    GPUSpawner._inventories.clear()
    yield
    GPUSpawner._inventories.clear()


def queued_spawner(name, catalog) -> GPUSpawner:
    return make_gpu_spawner(name, catalog, kueue_queue_name=QUEUE)


async def fill_the_gpu_and_queue_one_more(
    k8s_controls, k8s_api, tmp_path
) -> tuple[list[GPUSpawner], GPUSpawner, asyncio.Future]:
    """One GPU shared four ways, held by four students whom the queue admitted at once;
    a fifth student's start, waiting in the queue (started, gated by Kueue)."""
    k8s_controls.add_gpu_nodes(1, gpu_count=1, extended_resources={"nvidia.com/gpu": 4})
    await make_queues(k8s_api, cluster_queue("campus-gpus", 4), [QUEUE])
    names = [f"student-{i}" for i in range(5)]
    catalog = write_class_catalog(tmp_path / "catalog.yaml", names)
    running = [queued_spawner(name, catalog) for name in names[:4]]
    await asyncio.wait_for(asyncio.gather(*(s.start() for s in running)), HANG_GUARD)
    late = queued_spawner(names[4], catalog)
    start = late.start()

    def gated() -> bool:
        pod = k8s_controls.get("pods", late.pod_name, "default")
        return bool(pod and pod["spec"].get("schedulingGates"))

    await wait_for(gated, timeout=HANG_GUARD, what="the fifth student's pod gated by Kueue")
    return running, late, start


async def test_a_server_admitted_from_the_queue_keeps_its_gpu_slice_across_a_hub_restart(
    kueue, k8s_controls, k8s_api, tmp_path
):
    # Given one GPU shared four ways, held by four students, and a fifth waiting in the
    # GPU queue: her pod is gated, labelled as queued, with no slice recorded yet
    running, late, start = await fill_the_gpu_and_queue_one_more(k8s_controls, k8s_api, tmp_path)
    waiting = k8s_controls.get("pods", late.pod_name, "default")
    assert {"name": KUEUE_GATE} in waiting["spec"]["schedulingGates"]
    assert waiting["metadata"]["labels"][QUEUED_LABEL] == "true"
    assert ALLOCATION_ANNOTATION not in (waiting["metadata"].get("annotations") or {})

    # When a student stops, and the queue admits the fifth
    await running[0].stop()
    await asyncio.wait_for(start, HANG_GUARD)

    # Then her pod records the slice the hub booked for her where she landed, and is no
    # longer marked as queued
    pod = k8s_controls.get("pods", late.pod_name, "default")
    annotations = pod["metadata"].get("annotations") or {}
    assert ALLOCATION_ANNOTATION in annotations, "the slice is not recorded on the pod"
    assert QUEUED_LABEL not in pod["metadata"]["labels"]
    held = late.capacity_pool.allocations[late._allocation.key]
    assert decode_allocation(annotations[ALLOCATION_ANNOTATION]) == held
    assert held.device_ids == (f"{pod['spec']['nodeName']}/0",)

    # And after a hub restart, the pool rebuilt from the pods holds her slice as before,
    # beside the three others: the GPU is full, nobody is given her slice
    GPUSpawner._inventories.clear()
    restarted = queued_spawner("student-1", tmp_path / "catalog.yaml")
    await restarted.ensure_inventory()
    assert restarted.capacity_pool.allocations[held.key] == held
    assert len(restarted.capacity_pool.allocations) == 4
    assert all(usage.fraction == 1 for usage in restarted.capacity_pool.usage().values())

    await asyncio.gather(*(s.stop(now=True) for s in [*running[1:], late]))


@pytest.fixture
async def hub_without_patch(kubespawner_env, k8s_controls, k8s_api, tmp_path, monkeypatch):
    """The spawners of this test run as a hub whose admin applied rbac.yaml as it was before
    it granted patch on pods (and list on KAI's PodGroups): the chart's hub Role and reading
    nodes, nothing more."""
    from kubernetes_asyncio.config import kube_config
    from kubespawner import clients

    account = "hub-without-patch"
    chart_role = next(
        doc["metadata"]["name"]
        for doc in chart_hub_rbac(k8s_controls.plane.bin / "helm", "default")
        if doc["kind"] == "Role"
    )
    subject = [{"kind": "ServiceAccount", "name": account, "namespace": "default"}]
    await client.CoreV1Api(k8s_api).create_namespaced_service_account(
        "default", {"metadata": {"name": account}}
    )
    rbac = client.RbacAuthorizationV1Api(k8s_api)
    await rbac.create_namespaced_role_binding(
        "default",
        {
            "metadata": {"name": account},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": chart_role,
            },
            "subjects": subject,
        },
    )
    await rbac.create_cluster_role_binding(
        {
            "metadata": {"name": account},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "campus-gpu-hub-nodes",
            },
            "subjects": subject,
        }
    )
    kubeconfig = k8s_controls.plane.write_kubeconfig(
        tmp_path / "hub-without-patch.kubeconfig",
        user=f"system:serviceaccount:default:{account}",
        token=token_for(k8s_controls.plane, "default", account),
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
    clients.load_config.cache_clear()


async def test_a_hub_that_may_not_patch_pods_tells_its_admins_what_is_lost_and_what_to_apply(
    kueue, hub_without_patch, k8s_controls, k8s_api, tmp_path, caplog
):
    # Given a hub whose service account may not patch pods, one GPU held by four students
    # and a fifth waiting in the queue
    running, late, start = await fill_the_gpu_and_queue_one_more(k8s_controls, k8s_api, tmp_path)

    # When the queue admits her
    with caplog.at_level(logging.INFO):
        await running[0].stop()
        await asyncio.wait_for(start, HANG_GUARD)

    # Then her server runs, and the hub's log says, as an error, what is lost and what
    # the admins apply
    pod = k8s_controls.get("pods", late.pod_name, "default")
    assert ALLOCATION_ANNOTATION not in (pod["metadata"].get("annotations") or {})
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [
        "The GPU slice of jupyter-student-4 is not recorded on its pod: the hub's service "
        "account may not patch pods (403 Forbidden). The hub holds the slice until it "
        "restarts, then forgets it, and may give the same slice to another server. Hub "
        "admins: apply hub_config/kubernetes/rbac.yaml (its Role campus-gpu-hub-pods grants "
        "patch on pods)."
    ]

    await asyncio.gather(*(s.stop(now=True) for s in [*running[1:], late]))


async def test_a_hub_that_may_not_list_podgroups_estimates_kai_places_and_tells_its_admins_once(
    kai, hub_without_patch, k8s_controls, k8s_api, tmp_path, caplog
):
    # Given a hub with the chart's Role and reading nodes but not rbac.yaml's Role
    # campus-gpu-hub-kai, one GPU, and ML101's KAI queue limited to half of a GPU, which
    # Ana and Ben hold
    k8s_controls.add_gpu_nodes(1, gpu_count=1)
    await make_course_queue(k8s_api, "course-ml101", gpus=0.5)
    names = ["ana", "ben", "zoe", "ada"]
    catalog = write_class_catalog(tmp_path / "kai.yaml", names)
    ana, ben, zoe, ada = (
        make_gpu_spawner(
            name,
            catalog,
            sharing_backend="kai",
            sharing_backend_config={"queue": "course-{course}"},
        )
        for name in names
    )
    await asyncio.wait_for(asyncio.gather(ana.start(), ben.start()), HANG_GUARD)

    # When Zoe starts, and Ada once Zoe waits in KAI's queue (in a later second: pods made
    # in the same second are ordered by the name of their PodGroup, Ada's first)
    with caplog.at_level(logging.INFO):
        starts, logs = {}, {}
        for spawner in (zoe, ada):
            starts[spawner] = spawner.start()
            logs[spawner] = ProgressLog(spawner)
            await wait_for(
                lambda s=spawner: logs[s].last("Waiting in the GPU queue"),
                timeout=HANG_GUARD,
                what="her place in KAI's queue on the progress page",
            )
            joined = k8s_controls.get("pods", spawner.pod_name, "default")["metadata"][
                "creationTimestamp"
            ]
            await wait_for(
                lambda j=joined: datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") > j,
                timeout=HANG_GUARD,
                what="a second after she joined",
            )

        # Then both wait with their places, estimated from the pods: Zoe first, Ada second
        await wait_for(
            lambda: logs[zoe].last("Waiting in the GPU queue: position 1 of 2"),
            timeout=HANG_GUARD,
            what="Zoe first of two",
        )
        await wait_for(
            lambda: logs[ada].last("Waiting in the GPU queue: position 2 of 2"),
            timeout=HANG_GUARD,
            what="Ada second of two",
        )

    # And the hub's log tells its admins once what they lose and what to apply
    told = [r.getMessage() for r in caplog.records if "KAI-scheduler's PodGroups" in r.getMessage()]
    assert told == [
        "The hub cannot read KAI-scheduler's PodGroups in default: the hub's service account "
        "may not list them (403 Forbidden). Hub admins: apply hub_config/kubernetes/rbac.yaml "
        "(its Role campus-gpu-hub-kai grants list on podgroups.scheduling.run.ai). Until it "
        "can, the places in the GPU queue shown on the spawn page are estimated from the "
        "pods, and servers that joined within the same second or two may be placed in "
        "another order."
    ]
    assert [r.levelno for r in caplog.records if r.getMessage() == told[0]] == [logging.WARNING]

    for log in logs.values():
        await log.close()
    for spawner in (zoe, ada):
        starts[spawner].cancel()
    await asyncio.gather(*starts.values(), return_exceptions=True)
    await asyncio.gather(*(s.stop(now=True) for s in (ana, ben, zoe, ada)))


# -- every request the hub makes is granted -------------------------------------------------

Request = tuple[str, str, str, str]
"""(verb, API group, resource, subresource), as the audit log names a request."""


def grants_to(account: str, namespace: str, documents: list[dict[str, Any]]):
    """The rules bound to ``account`` by ``documents``: (rule, the namespace it holds in,
    None for the whole cluster)."""
    roles = {(doc["kind"], doc["metadata"]["name"]): doc for doc in documents}
    for binding in documents:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(
            subject.get("kind") == "ServiceAccount"
            and subject["name"] == account
            and subject.get("namespace", binding["metadata"].get("namespace")) == namespace
            for subject in binding.get("subjects") or []
        ):
            continue
        ref = binding["roleRef"]
        role = roles.get((ref["kind"], ref["name"]))
        assert role is not None, f"{binding['kind']} {binding['metadata']['name']} binds no role"
        scope = namespace if binding["kind"] == "RoleBinding" else None
        for rule in role.get("rules") or []:
            yield rule, scope


def granted(request: AuditedRequest, rules) -> bool:
    resource = request.resource + (f"/{request.subresource}" if request.subresource else "")
    for rule, scope in rules:
        if scope is not None and request.namespace != scope:
            continue
        if (
            {request.group, "*"} & set(rule.get("apiGroups") or [])
            and {resource, "*"} & set(rule.get("resources") or [])
            and {request.verb, "*"} & set(rule.get("verbs") or [])
        ):
            return True
    return False


async def a_class_server_starts_restarts_and_stops(k8s_api, tmp_path: Path) -> None:
    """A student's server with a share and a home claim (z2jh's default dynamic storage):
    start with progress and events, a hub restart (state, reflectors, pool from pods),
    stop."""
    await provide_storage_class(k8s_api, "campus-local")
    await provide_volume(k8s_api, storage_class="campus-local")
    # (nora: no earlier test's claim of her name can still be going)
    catalog = write_class_catalog(tmp_path / "class.yaml", ["nora"])
    home = {
        "storage_pvc_ensure": True,
        "storage_class": "campus-local",
        "storage_capacity": "10Gi",
        "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": "{pvc_name}"}}],
        "volume_mounts": [{"name": "home", "mountPath": "/home/jovyan"}],
    }
    spawner = make_gpu_spawner("nora", catalog, **home)
    start = spawner.start()
    progress = ProgressLog(spawner)
    await asyncio.wait_for(start, HANG_GUARD)
    await wait_for(
        lambda: progress.last("Started container notebook"),
        timeout=HANG_GUARD,
        what="the pod's events on the progress page",
    )
    await progress.close()
    state = spawner.get_state()
    key = spawner._allocation.key

    # The hub restarts: a new process, new reflectors, the pool rebuilt from the pods
    await KubeSpawner._stop_all_reflectors()
    GPUSpawner._inventories.clear()
    again = make_gpu_spawner("nora", catalog, **home)
    again.load_state(state)
    assert await again.poll() is None
    await again.ensure_inventory()
    assert key in again.capacity_pool.allocations
    await again.stop()


async def a_dra_template_is_made_replaced_and_removed(tmp_path: Path) -> None:
    """On DRA, a server's ResourceClaimTemplate is created, replaced when one is left from
    an earlier start, and deleted with the server."""
    catalog = write_class_catalog(tmp_path / "dra.yaml", ["ben"])
    for _ in range(2):
        spawner = make_gpu_spawner("ben", catalog, sharing_backend="dra", sharing_backend_config={})
        spawner.hold_grant(spawner.decide_start())
        await spawner._create_claim_templates()
        spawner.release_allocation()
    await spawner.stop()


async def the_gpu_map_reads_the_cluster(hub_kubeconfig: Path) -> None:
    """The course-sessions service (in the hub pod, with the hub's identity) reads the GPUs."""
    source = pool_source(
        allocation_ledger=None, simulated=None, namespace="default", kubeconfig=str(hub_kubeconfig)
    )
    assert source is not None
    try:
        pool = await source.read()
    finally:
        await source.close()
    assert pool.devices


async def a_queued_server_lands(k8s_controls, k8s_api, tmp_path: Path) -> None:
    """Kueue mode: four servers admitted at once, a fifth waits with her place on the
    progress page (from Kueue's Workloads), lands and is recorded."""
    running, late, start = await fill_the_gpu_and_queue_one_more(k8s_controls, k8s_api, tmp_path)
    progress = ProgressLog(late)
    await wait_for(
        lambda: progress.last("Waiting in the GPU queue: position 1 of 1"),
        timeout=HANG_GUARD,
        what="her place on the progress page",
    )
    await running[0].stop()
    await asyncio.wait_for(start, HANG_GUARD)
    await progress.close()
    pod = k8s_controls.get("pods", late.pod_name, "default")
    assert ALLOCATION_ANNOTATION in pod["metadata"]["annotations"]
    await asyncio.gather(*(s.stop(now=True) for s in [*running[1:], late]))


async def a_server_waits_in_kais_queue(k8s_controls, k8s_api, tmp_path: Path) -> None:
    """KAI-scheduler: a server beyond its course queue's limit waits unbound, with her
    place on the progress page (from KAI's PodGroups), and leaves the queue."""
    k8s_controls.add_gpu_nodes(1, gpu_count=1, prefix="kai-node")
    await make_course_queue(k8s_api, "course-ml101", gpus=0)  # full: she waits
    catalog = write_class_catalog(tmp_path / "kai.yaml", ["kai"])
    spawner = make_gpu_spawner(
        "kai", catalog, sharing_backend="kai", sharing_backend_config={"queue": "course-{course}"}
    )
    start = spawner.start()
    progress = ProgressLog(spawner)
    await wait_for(
        lambda: progress.last("Waiting in the GPU queue: position 1 of 1"),
        timeout=HANG_GUARD,
        what="her place in KAI's queue on the progress page",
    )
    await progress.close()
    start.cancel()
    await asyncio.gather(start, return_exceptions=True)
    await spawner.stop(now=True)


# What the scenarios above ask the API server for, as the test reads it from the audit log.
# A request the hub starts (or stops) making shows here first, not as a 403 in a cluster.
HUB_REQUESTS: set[Request] = {
    ("create", "", "pods", ""),  # KubeSpawner's start
    ("delete", "", "pods", ""),  # KubeSpawner's stop
    ("list", "", "pods", ""),  # KubeSpawner's pod reflector; the GPU pool and the map
    ("watch", "", "pods", ""),  # KubeSpawner's pod reflector
    ("list", "", "events", ""),  # KubeSpawner's event reflector (progress)
    ("watch", "", "events", ""),
    ("create", "", "persistentvolumeclaims", ""),  # the home claim (z2jh's dynamic storage)
    ("patch", "", "pods", ""),  # Kueue mode: the slice of a server landed from the queue
    ("list", "kueue.x-k8s.io", "workloads", ""),  # Kueue mode: the places in the queue
    ("list", "scheduling.run.ai", "podgroups", ""),  # KAI: the places in its queues
    ("list", "", "nodes", ""),  # the GPU inventory and the map (rbac.yaml)
    ("create", "resource.k8s.io", "resourceclaimtemplates", ""),  # DRA (rbac.yaml)
    ("delete", "resource.k8s.io", "resourceclaimtemplates", ""),
}


async def test_every_request_of_the_hubs_code_paths_is_granted_by_the_shipped_rbac(
    kueue, kai, k8s_controls, k8s_api, hub_kubeconfig, tmp_path
):
    # Given the hub's service account, bound as the chart and rbac.yaml bind it
    hub = k8s_controls.identities["hub"]
    documents = chart_hub_rbac(k8s_controls.plane.bin / "helm", hub.namespace)
    documents += rbac_documents(HUB_RBAC, hub.namespace)
    rules = list(grants_to(hub.name, hub.namespace, documents))
    audit = AuditTail(k8s_controls.plane.audit_log, hub.user)

    # When the hub lands a server from the Kueue queue (on a GPU node it adds), shows a
    # server her place in KAI-scheduler's queue, starts, restarts and stops a server with
    # its home claim, makes DRA templates and shows the GPU map
    await a_queued_server_lands(k8s_controls, k8s_api, tmp_path)
    await a_server_waits_in_kais_queue(k8s_controls, k8s_api, tmp_path)
    await a_class_server_starts_restarts_and_stops(k8s_api, tmp_path)
    await a_dra_template_is_made_replaced_and_removed(tmp_path)
    await the_gpu_map_reads_the_cluster(hub_kubeconfig)
    # (the reflectors' watches are written down when they end)
    await KubeSpawner._stop_all_reflectors()

    def made() -> list[AuditedRequest]:
        found = audit.requests()
        watched = {r.resource for r in found if r.verb == "watch"}
        return found if {"pods", "events"} <= watched else []

    requests = await wait_for(
        made, timeout=HANG_GUARD, what="the end of KubeSpawner's two watches in the audit log"
    )

    # Then the API server refused none of its requests
    assert [r for r in requests if r.code == 403] == []
    # And every kind of request is granted by the chart's hub Role or rbac.yaml
    used = {(r.verb, r.group, r.resource, r.subresource) for r in requests}
    assert sorted(r for r in requests if not granted(r, rules)) == []
    assert used == HUB_REQUESTS
    # And rbac.yaml, the grants this project adds to z2jh's, grants nothing they do not use
    ours = list(grants_to(hub.name, hub.namespace, rbac_documents(HUB_RBAC, hub.namespace)))
    unused = [
        (verb, group, resource)
        for rule, _ in ours
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        if (verb, group, resource, "") not in used
    ]
    assert unused == []
