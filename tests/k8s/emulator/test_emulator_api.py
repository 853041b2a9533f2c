"""The emulator answers like a Kubernetes API server, as kubernetes_asyncio sees it."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio import client

from tests.support.k8s_cluster import status_body, wait_for
from tests.support.k8s_emulator.patch import strategic_merge_patch
from tests.support.k8s_manifests import job, pod


async def raw(call) -> dict:
    response = await call
    return json.loads(await response.read())


async def test_discovery_documents_list_the_served_resources(k8s_api):
    core = await raw(
        k8s_api.call_api("/api/v1", "GET", _preload_content=False, auth_settings=["BearerToken"])
    )
    names = {r["name"] for r in core["resources"]}
    assert {
        "pods",
        "pods/status",
        "pods/log",
        "events",
        "services",
        "persistentvolumeclaims",
        "secrets",
        "configmaps",
        "namespaces",
        "nodes",
    } <= names
    batch = await raw(k8s_api.call_api("/apis/batch/v1", "GET", _preload_content=False))
    assert {"jobs", "jobs/status"} <= {r["name"] for r in batch["resources"]}
    for path in ("/api", "/api/", "/apis", "/apis/", "/version", "/version/"):
        document = await raw(k8s_api.call_api(path, "GET", _preload_content=False))
        assert document
    version = await client.VersionApi(k8s_api).get_code()
    assert version.major == "1"
    groups = await client.ApisApi(k8s_api).get_api_versions()
    assert "batch" in {g.name for g in groups.groups}


async def test_create_sets_server_metadata_and_pending_status(k8s_api):
    core = client.CoreV1Api(k8s_api)
    body = pod("")
    body["metadata"] = {"generateName": "worker-"}
    created = await core.create_namespaced_pod("default", body)
    meta = created.metadata
    assert meta.name.startswith("worker-") and len(meta.name) == len("worker-") + 5
    assert meta.namespace == "default"
    assert meta.uid and meta.creation_timestamp and int(meta.resource_version) > 0
    assert created.status.phase == "Pending"
    assert created.spec.scheduler_name == "default-scheduler"
    assert created.spec.restart_policy == "Always"
    second = await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "cm"}, "data": {"a": "1"}}
    )
    assert int(second.metadata.resource_version) > int(meta.resource_version), (
        "one counter for every write"
    )


async def test_duplicate_create_is_409_already_exists_with_a_status_body(k8s_api):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_pod("default", pod("twice"))
    with pytest.raises(client.ApiException) as raised:
        await core.create_namespaced_pod("default", pod("twice"))
    assert raised.value.status == 409
    assert status_body(raised.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "twice" already exists',
        "reason": "AlreadyExists",
        "details": {"name": "twice", "kind": "pods"},
        "code": 409,
    }


async def test_missing_objects_and_namespaces_are_404_not_found(k8s_api):
    core = client.CoreV1Api(k8s_api)
    with pytest.raises(client.ApiException) as raised:
        await core.read_namespaced_pod("nobody", "default")
    assert raised.value.status == 404
    assert status_body(raised.value)["reason"] == "NotFound"
    assert status_body(raised.value)["message"] == 'pods "nobody" not found'
    with pytest.raises(client.ApiException) as raised:
        await core.create_namespaced_pod("no-such-namespace", pod("p"))
    assert status_body(raised.value)["message"] == 'namespaces "no-such-namespace" not found'
    with pytest.raises(client.ApiException) as raised:
        await client.BatchV1Api(k8s_api).read_namespaced_job("nothing", "default")
    assert status_body(raised.value)["message"] == 'jobs.batch "nothing" not found'


async def test_a_stale_resource_version_in_a_replace_is_409_conflict(k8s_api):
    core = client.CoreV1Api(k8s_api)
    first = await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "settings"}, "data": {"v": "1"}}
    )
    first.data = {"v": "2"}
    second = await core.replace_namespaced_config_map("settings", "default", first)
    assert second.data == {"v": "2"}
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)
    first.data = {"v": "3"}  # still carries the old resourceVersion
    with pytest.raises(client.ApiException) as raised:
        await core.replace_namespaced_config_map("settings", "default", first)
    assert raised.value.status == 409
    assert status_body(raised.value)["reason"] == "Conflict"


async def test_invalid_manifests_are_422_with_the_field_named(k8s_api):
    core = client.CoreV1Api(k8s_api)
    with pytest.raises(client.ApiException) as raised:
        await core.create_namespaced_pod(
            "default", pod("half-a-gpu", resources={"limits": {"nvidia.com/gpu": "0.5"}})
        )
    body = status_body(raised.value)
    assert raised.value.status == 422 and body["reason"] == "Invalid"
    assert "spec.containers[0].resources.limits[nvidia.com/gpu]" in body["message"]
    assert "must be an integer" in body["message"]
    with pytest.raises(client.ApiException) as raised:
        await core.create_namespaced_pod("default", pod("Bad_Name"))
    assert raised.value.status == 422
    with pytest.raises(client.ApiException) as raised:
        await client.BatchV1Api(k8s_api).create_namespaced_job(
            "default",
            {
                **job("j"),
                "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
            },
        )
    assert 'Unsupported value: "Always"' in status_body(raised.value)["message"]


async def test_list_has_kind_resource_version_and_honours_selectors(k8s_api):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespace({"metadata": {"name": "other"}})
    await core.create_namespaced_pod("default", pod("a", labels={"app": "hub", "tier": "gpu"}))
    await core.create_namespaced_pod("default", pod("b", labels={"app": "hub"}))
    await core.create_namespaced_pod("default", pod("c", labels={"app": "job"}))
    await core.create_namespaced_pod("other", pod("d", labels={"app": "hub", "tier": "cpu"}))

    async def names(**kwargs) -> list[str]:
        if "namespace" in kwargs:
            listed = await core.list_namespaced_pod(**kwargs)
        else:
            listed = await core.list_pod_for_all_namespaces(**kwargs)
        return sorted(p.metadata.name for p in listed.items)

    listed = await raw(core.list_namespaced_pod("default", _preload_content=False))
    assert listed["kind"] == "PodList" and listed["apiVersion"] == "v1"
    assert int(listed["metadata"]["resourceVersion"]) > 0
    assert await names() == ["a", "b", "c", "d"]
    assert await names(namespace="default", label_selector="app=hub") == ["a", "b"]
    assert await names(label_selector="app==hub,tier!=gpu") == ["b", "d"]
    assert await names(label_selector="app in (job, nothing)") == ["c"]
    assert await names(label_selector="app notin (hub)") == ["c"]
    assert await names(label_selector="tier") == ["a", "d"]
    assert await names(label_selector="!tier") == ["b", "c"]
    assert await names(field_selector="metadata.namespace=other") == ["d"]
    assert await names(field_selector="metadata.name!=a,status.phase=Pending") == ["b", "c", "d"]
    assert await names(field_selector="spec.nodeName=") == ["a", "b", "c", "d"]
    with pytest.raises(client.ApiException) as raised:
        await names(field_selector="spec.containers=x")
    assert raised.value.status == 400
    assert status_body(raised.value)["message"] == "field label not supported: spec.containers"
    first_page = await core.list_namespaced_pod("default", limit=2)
    assert [p.metadata.name for p in first_page.items] == ["a", "b"]
    rest = await core.list_namespaced_pod(
        "default", limit=2, _continue=first_page.metadata._continue
    )
    assert [p.metadata.name for p in rest.items] == ["c"]


async def test_strategic_merge_patch_merges_containers_by_name(k8s_api):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "cm", "labels": {"keep": "yes", "drop": "yes"}}}
    )
    # kubernetes_asyncio sends dict bodies as strategic merge patches
    patched = await core.patch_namespaced_config_map(
        "cm", "default", {"metadata": {"labels": {"drop": None, "new": "yes"}}}
    )
    assert patched.metadata.labels == {"keep": "yes", "new": "yes"}
    created = pod("patched")
    created["spec"]["containers"].append({"name": "sidecar", "image": "busybox"})
    await core.create_namespaced_pod("default", created)
    result = await core.patch_namespaced_pod(
        "patched",
        "default",
        {
            "metadata": {"finalizers": ["example.com/keep"]},
            "spec": {"containers": [{"name": "main", "image": "python:3.13-slim"}]},
        },
    )
    main, sidecar = result.spec.containers
    assert (main.name, main.image, sidecar.name, sidecar.image) == (
        "main",
        "python:3.13-slim",
        "sidecar",
        "busybox",
    )
    assert result.metadata.finalizers == ["example.com/keep"]
    # As on a real cluster, a pod's spec is immutable apart from images and a few fields.
    with pytest.raises(client.ApiException) as raised:
        await core.patch_namespaced_pod(
            "patched",
            "default",
            {"spec": {"containers": [{"name": "main", "env": [{"name": "A", "value": "1"}]}]}},
        )
    assert raised.value.status == 422
    assert "pod updates may not change fields" in status_body(raised.value)["message"]


def test_strategic_merge_uses_the_kubernetes_merge_keys():
    template = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                            "ports": [{"containerPort": 8888, "name": "notebook-port"}],
                            "volumeMounts": [{"name": "home", "mountPath": "/home/jovyan"}],
                        }
                    ],
                    "volumes": [
                        {"name": "home", "emptyDir": {}},
                        {"name": "shm", "emptyDir": {"medium": "Memory"}},
                    ],
                    "tolerations": [{"key": "a", "operator": "Exists"}],
                }
            }
        }
    }
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "env": [
                                {"name": "B", "value": "3"},
                                {"name": "C", "value": "4"},
                                {"name": "A", "$patch": "delete"},
                            ],
                            "ports": [{"containerPort": 8888, "protocol": "TCP"}],
                            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                        },
                        {"name": "sidecar", "image": "busybox"},
                    ],
                    "volumes": [{"name": "scratch", "emptyDir": {}}],
                    "tolerations": [{"key": "b", "operator": "Exists"}],
                }
            }
        }
    }
    spec = strategic_merge_patch(template, patch, "Job")["spec"]["template"]["spec"]
    main, sidecar = spec["containers"]
    assert main["env"] == [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]
    assert main["ports"] == [{"containerPort": 8888, "name": "notebook-port", "protocol": "TCP"}]
    assert [m["mountPath"] for m in main["volumeMounts"]] == ["/home/jovyan", "/scratch"]
    assert sidecar == {"name": "sidecar", "image": "busybox"}
    assert [v["name"] for v in spec["volumes"]] == ["home", "shm", "scratch"]
    assert spec["tolerations"] == [{"key": "b", "operator": "Exists"}], (
        "lists without a merge key are replaced"
    )


async def test_json_merge_and_json_patch_and_apply_patch(k8s_api):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "cm"}, "data": {"a": "1", "b": "2"}}
    )
    merged = await core.patch_namespaced_config_map(
        "cm",
        "default",
        {"data": {"a": None, "c": "3"}},
        _content_type="application/merge-patch+json",
    )
    assert merged.data == {"b": "2", "c": "3"}
    patched = await core.patch_namespaced_config_map(
        "cm",
        "default",
        [
            {"op": "replace", "path": "/data/b", "value": "20"},
            {"op": "add", "path": "/data/d", "value": "4"},
        ],
    )
    assert patched.data == {"b": "20", "c": "3", "d": "4"}
    with pytest.raises(client.ApiException) as raised:
        await core.patch_namespaced_config_map(
            "cm",
            "default",
            {"data": {}},
            _content_type="application/apply-patch+yaml",
            field_manager="test",
        )
    assert raised.value.status == 415


async def test_status_subresource_and_main_resource_write_different_parts(k8s_api):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_pod("default", pod("split"))
    await core.patch_namespaced_pod("split", "default", {"status": {"phase": "Running"}})
    assert (await core.read_namespaced_pod("split", "default")).status.phase == "Pending", (
        "main resource ignores status"
    )
    updated = await core.patch_namespaced_pod_status(
        "split", "default", {"status": {"phase": "Running"}, "metadata": {"labels": {"x": "y"}}}
    )
    assert updated.status.phase == "Running"
    assert not updated.metadata.labels, "status writes ignore metadata"


async def test_deleting_a_namespace_cascades_to_its_objects(k8s_api, k8s_cluster):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespace({"metadata": {"name": "course"}})
    await core.create_namespaced_pod("course", pod("student"))
    await core.create_namespaced_secret(
        "course", {"metadata": {"name": "s"}, "stringData": {"token": "abc"}}
    )
    await core.delete_namespace("course")
    with pytest.raises(client.ApiException) as raised:
        await core.create_namespaced_config_map("course", {"metadata": {"name": "late"}})
    assert raised.value.status in (403, 404)

    async def gone() -> bool:
        try:
            await core.read_namespace("course")
        except client.ApiException as error:
            return error.status == 404
        return False

    await wait_for(gone, what="namespace removal")
    with pytest.raises(client.ApiException):
        await core.read_namespaced_secret("s", "course")


async def test_owner_references_cascade_by_propagation_policy(k8s_api, k8s_controls):
    core = client.CoreV1Api(k8s_api)

    async def owned(name: str) -> dict:
        owner = await core.create_namespaced_config_map("default", {"metadata": {"name": name}})
        ref = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": name,
            "uid": owner.metadata.uid,
            "blockOwnerDeletion": True,
        }
        await core.create_namespaced_secret(
            "default", {"metadata": {"name": f"{name}-child", "ownerReferences": [ref]}}
        )
        return ref

    await owned("background")
    await core.delete_namespaced_config_map("background", "default")
    await wait_for(lambda: _absent(core, "background-child"), what="background cascade")

    await owned("foreground")
    await core.delete_namespaced_config_map(
        "foreground", "default", propagation_policy="Foreground"
    )
    await wait_for(lambda: _absent(core, "foreground-child"), what="foreground cascade")
    await wait_for(
        lambda: _absent(core, "foreground", kind="config_map"), what="foreground owner removal"
    )

    await owned("orphan")
    await core.delete_namespaced_config_map("orphan", "default", propagation_policy="Orphan")
    await wait_for(
        lambda: _absent(core, "orphan", kind="config_map"), what="orphaning owner removal"
    )
    child = await core.read_namespaced_secret("orphan-child", "default")
    assert not child.metadata.owner_references


async def _absent(core: client.CoreV1Api, name: str, kind: str = "secret") -> bool:
    try:
        await getattr(core, f"read_namespaced_{kind}")(name, "default")
    except client.ApiException as error:
        return error.status == 404
    return False


async def test_deleting_a_job_without_a_policy_orphans_its_pods_and_warns(k8s_api, k8s_controls):
    batch = client.BatchV1Api(k8s_api)
    await batch.create_namespaced_job("default", job("left-behind", command=["sleep", "60"]))
    core = client.CoreV1Api(k8s_api)
    pods = await wait_for(lambda: _job_pods(core, "left-behind"), what="job pod")
    response = await batch.delete_namespaced_job("left-behind", "default", _preload_content=False)
    assert "child pods are preserved by default" in response.headers.get("Warning", "")
    await wait_for(lambda: _absent_job(batch, "left-behind"), what="job removal")
    survivor = await wait_for(
        lambda: _released(core, pods[0].metadata.name), what="the orphan's finalizer release"
    )
    assert not survivor.metadata.owner_references
    assert not survivor.metadata.deletion_timestamp

    k8s_controls.add_gpu_nodes(1)
    await batch.create_namespaced_job("default", job("cleaned-up", command=["sleep", "60"]))
    await wait_for(lambda: _job_pods(core, "cleaned-up"), what="job pod")
    response = await batch.delete_namespaced_job(
        "cleaned-up", "default", propagation_policy="Background", _preload_content=False
    )
    assert "Warning" not in response.headers
    await wait_for(
        lambda: _no_job_pods(core, "cleaned-up"), what="the pods to be deleted with the job"
    )


async def _released(core: client.CoreV1Api, name: str):
    current = await core.read_namespaced_pod(name, "default")
    return None if current.metadata.finalizers else current


async def _no_job_pods(core: client.CoreV1Api, name: str) -> bool:
    return not await _job_pods(core, name)


async def _job_pods(core: client.CoreV1Api, name: str) -> list:
    return (await core.list_namespaced_pod("default", label_selector=f"job-name={name}")).items


async def _absent_job(batch: client.BatchV1Api, name: str) -> bool:
    try:
        await batch.read_namespaced_job(name, "default")
    except client.ApiException as error:
        return error.status == 404
    return False


async def test_finalizers_hold_an_object_until_they_are_cleared(k8s_api):
    core = client.CoreV1Api(k8s_api)
    await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    )
    await core.delete_namespaced_config_map("held", "default")
    held = await core.read_namespaced_config_map("held", "default")
    assert held.metadata.deletion_timestamp is not None
    await core.patch_namespaced_config_map(
        "held", "default", [{"op": "remove", "path": "/metadata/finalizers"}]
    )
    assert await _absent(core, "held", kind="config_map")


async def test_secrets_fold_string_data_and_services_get_a_cluster_ip(k8s_api):
    core = client.CoreV1Api(k8s_api)
    secret = await core.create_namespaced_secret(
        "default", {"metadata": {"name": "s"}, "stringData": {"token": "abc"}}
    )
    assert secret.data == {"token": "YWJj"} and secret.type == "Opaque"
    service = await core.create_namespaced_service(
        "default",
        {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}], "selector": {"a": "b"}}},
    )
    assert service.spec.cluster_ip.startswith("10.96.")
    assert service.spec.ports[0].target_port == 80


async def test_dry_run_validates_without_storing(k8s_api):
    core = client.CoreV1Api(k8s_api)
    checked = await core.create_namespaced_pod("default", pod("maybe"), dry_run="All")
    assert checked.metadata.name == "maybe" and checked.status.phase == "Pending"
    with pytest.raises(client.ApiException) as raised:
        await core.read_namespaced_pod("maybe", "default")
    assert raised.value.status == 404
    with pytest.raises(client.ApiException) as raised:
        await core.create_namespaced_pod(
            "default",
            pod("too-much", gpus=0, resources={"limits": {"nvidia.com/gpu": "1.5"}}),
            dry_run="All",
        )
    assert raised.value.status == 422


async def test_dra_resource_claims_and_templates_are_stored(k8s_api):
    resource = client.ResourceV1Api(k8s_api)
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu-slice"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
                }
            }
        },
    }
    created = await resource.create_namespaced_resource_claim_template("default", template)
    assert created.metadata.uid
    listed = await resource.list_namespaced_resource_claim_template("default")
    assert [t.metadata.name for t in listed.items] == ["gpu-slice"]
    claim = await resource.create_namespaced_resource_claim(
        "default", {"metadata": {"name": "c1"}, "spec": template["spec"]["spec"]}
    )
    assert claim.spec.devices.requests[0].name == "gpu"
    await resource.delete_namespaced_resource_claim("c1", "default")
