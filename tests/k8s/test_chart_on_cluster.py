"""The whole chart on the real control plane (issue 25, item 1).

An admin installs the campus GPU hub as hub_config/kubernetes/README.md says: the
namespace, catalog, sharing ConfigMap and secrets of its step 2, then this folder's chart
(the job service, the usage database), Zero to JupyterHub 4.4.0 with values.yaml and one
overlay, and rbac.yaml (step 3). Here, against the tests' real kube-apiserver:

- ``helm lint --strict`` passes for z2jh as its release packages it (with its
  values.schema.json, so a misspelt value fails) with values.yaml and each overlay, and for
  this folder's chart with the admin's images;
- every object ``helm template`` renders from both charts, and rbac.yaml, is applied with
  server-side apply, dry run first, then for real, into a namespace the README's own
  commands made (Pod Security "baseline" enforced, "restricted" warned: the users'
  namespace). The API server's warnings are read object by object: none under baseline,
  and the number under restricted is asserted (today none: each workload's pods meet it);
- ``helm upgrade --install`` of both releases, with the README's step 3 as written, leaves
  them deployed, every object in the API server and every pod the workloads describe
  admitted; the same commands again upgrade them; ``helm uninstall`` removes them.

The pods are not run here (no node is added: they stay Pending); the node agent running
the chart's pods is item 2 of the issue.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from tests.support.cluster.control_plane import tools_folder
from tests.support.cluster.session import USERS_NAMESPACE_LABELS, ControlPlaneCluster
from tests.support.k8s_cluster import wait_for
from tests.support.z2jh_chart import (
    ADMIN_IMAGES,
    DEMO_CATALOG,
    K8S,
    RELEASE,
    ApiResources,
    HelmRefused,
    Object,
    helm,
    helm_lint,
    helm_template,
    load_yaml,
    manifests,
    other_warnings,
    overlay_commands,
    pod_security_warnings,
    readme_commands,
    released_z2jh_chart,
    render_campus,
    render_z2jh,
    server_side_apply,
    z2jh_missing,
)

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.skipif(z2jh_missing() is not None, reason=z2jh_missing() or ""),
]

HANG_GUARD = 60.0  # seconds: only ends a test that would otherwise never end
CAMPUS_RELEASE = "campus-gpu-hub"

BACKENDS = sorted((K8S / "backends").glob("*.yaml"))
OVERLAYS: dict[str, Path | None] = {
    "values.yaml": None,
    **{f"backends/{path.name}": path for path in BACKENDS},
    "sso.yaml": K8S / "sso.yaml",
    "experimental-zone.yaml": K8S / "experimental-zone.yaml",
}
# What the API server warns under Pod Security "restricted", by overlay: none. Each
# workload's pod template (the hub, the proxy, the user scheduler, the image pullers, the
# user placeholder, the job service, the usage database) already runs as non-root with the
# runtime's seccomp profile, drops every capability and forbids privilege escalation, so
# a change that loosens one of them shows up here as a new entry.
RESTRICTED_WARNINGS: dict[str, dict[str, list[str]]] = {name: {} for name in OVERLAYS}


# -- the admin's side ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def released_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """z2jh 4.4.0 as released (version, image tags, values.schema.json)."""
    return released_z2jh_chart(tmp_path_factory.mktemp("z2jh-release"))


@pytest.fixture
def admin_folder(tmp_path: Path) -> Path:
    """The admin's checkout: hub_config/kubernetes as shipped, with a ``catalog/`` folder
    (the demo catalog), where the README's commands are run from its root."""
    root = tmp_path / "checkout"
    shutil.copytree(K8S, root / "hub_config" / "kubernetes")
    catalog = root / "hub_config" / "kubernetes" / "catalog"
    catalog.mkdir()
    shutil.copy(DEMO_CATALOG, catalog / "catalog.yaml")
    return root


@pytest.fixture
async def namespace(k8s_api: client.ApiClient) -> AsyncIterator[str]:
    """The name of the namespace the README's step 2 makes; deleted afterwards (also on a
    cluster of your own)."""
    name = f"campus-{secrets.token_hex(4)}"
    yield name
    with contextlib.suppress(client.ApiException):
        await client.CoreV1Api(k8s_api).delete_namespace(name)


BASELINE_WARNED = {
    # Pod Security checks a workload (a Deployment, a DaemonSet...) only at its namespace's
    # "warn" and "audit" levels: "enforce" applies to pods. What baseline says of the
    # workloads themselves is read where baseline is the level warned about.
    "pod-security.kubernetes.io/enforce": "baseline",
    "pod-security.kubernetes.io/enforce-version": "latest",
    "pod-security.kubernetes.io/warn": "baseline",
    "pod-security.kubernetes.io/warn-version": "latest",
}


@pytest.fixture
async def baseline_warned(k8s_api: client.ApiClient) -> AsyncIterator[str]:
    """A namespace where the API server warns about what Pod Security "baseline" forbids."""
    core = client.CoreV1Api(k8s_api)
    name = f"baseline-{secrets.token_hex(4)}"
    await core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=BASELINE_WARNED))
    )
    yield name
    with contextlib.suppress(client.ApiException):
        await core.delete_namespace(name)


def readme_step_2(namespace: str, backend: str) -> str:
    """The README's step 2 as written, for ``namespace`` and ``backend``."""
    script = readme_commands("### 2.")
    for variable, value in (("NS", namespace), ("BACKEND", backend)):
        script, count = re.subn(rf"^{variable}=\S+", f"{variable}={value}", script, flags=re.M)
        assert count == 1, f"the README's step 2 no longer sets {variable}"
    return script


def run_as_admin(script: str, folder: Path, kubeconfig: Path) -> str:
    """``script`` in bash from ``folder``, with the cluster's kubectl and helm and the
    project's ``gpuspawner`` on the PATH, as the cluster's admin; fails the test with what
    it said when a command fails."""
    path = os.pathsep.join(
        [str(tools_folder()), str(Path(sys.executable).parent), os.environ["PATH"]]
    )
    environment = {**os.environ, "PATH": path, "KUBECONFIG": str(kubeconfig)}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"The README's commands failed:\n{script}\n{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr


def rbac_for(namespace: str) -> list[Object]:
    """rbac.yaml with its ClusterRoleBinding's subject in ``namespace``, as the README
    tells an admin who installs elsewhere than ``campus``."""
    documents = manifests("rbac.yaml")
    subjects = [s for d in documents for s in d.get("subjects", []) if "namespace" in s]
    assert [s["namespace"] for s in subjects] == ["campus"]
    subjects[0]["namespace"] = namespace
    return documents


async def _call(api: client.ApiClient, method: str, path: str, body: Any = None) -> Any:
    data, _, _ = await api.call_api(
        path,
        method,
        body=body,
        header_params={"Accept": "application/json", "Content-Type": "application/json"},
        response_types_map={200: "object", 201: "object", 202: "object"},
        auth_settings=["BearerToken"],
        _return_http_data_only=False,
    )
    return data


async def read(api: client.ApiClient, path: str) -> Object | None:
    """The object at ``path`` as the API server has it, or None."""
    try:
        found: Object = await _call(api, "GET", path)
        return found
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


@contextlib.asynccontextmanager
async def cluster_wide_names_free(
    api: client.ApiClient, cluster: Any, objects: Sequence[Object]
) -> AsyncIterator[None]:
    """While the test installs, no other installation holds the names of its cluster-scoped
    objects; afterwards its own are deleted, and what was there is put back.

    The test cluster's session made the hub's and the job service's accounts in
    ``default`` from the same files, so it already has rbac.yaml's ClusterRoleBinding
    campus-gpu-hub-nodes and the job service's campus-gpu-hub-jupyter-to-job-nodes, bound
    to ``default``'s accounts: a second installation on one cluster. They are set aside
    and restored. On a cluster of your own, the test leaves such objects alone and skips.
    """
    resources = ApiResources(api)
    cluster_wide = [o for o in objects if not await resources.is_namespaced(o)]
    set_aside: list[tuple[str, Object]] = []
    for obj in cluster_wide:
        path = await resources.path(obj, "")
        existing = await read(api, path)
        if existing is None:
            continue
        if not isinstance(cluster, ControlPlaneCluster):
            pytest.skip(
                f"The cluster already has the {obj['kind']} {obj['metadata']['name']} of "
                "another installation; this test installs its own and leaves it alone."
            )
        set_aside.append((path, existing))
        await _call(api, "DELETE", path)
    try:
        yield
    finally:
        for obj in cluster_wide:
            with contextlib.suppress(client.ApiException):
                await _call(api, "DELETE", await resources.path(obj, ""))
        for path, existing in set_aside:
            metadata = {
                key: value
                for key, value in existing["metadata"].items()
                if key in ("name", "labels", "annotations")
            }
            await wait_for(lambda path=path: read_gone(api, path), HANG_GUARD, what=path)
            await _call(api, "POST", path.rpartition("/")[0], {**existing, "metadata": metadata})


async def read_gone(api: client.ApiClient, path: str) -> bool:
    return await read(api, path) is None


def names(objects: Sequence[Object]) -> list[str]:
    return sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objects)


# -- helm lint, helm template, server-side apply ---------------------------------------------


@pytest.mark.parametrize("overlay", list(OVERLAYS))
async def test_the_chart_lints_and_every_object_it_renders_is_applied_without_warnings(
    overlay, released_chart, admin_folder, namespace, baseline_warned, k8s_cluster, k8s_api
):
    overlays = [path for path in [OVERLAYS[overlay]] if path is not None]
    backend = Path(overlay).stem if overlay.startswith("backends/") else "whole"
    # Given the namespace, catalog, gpu-sharing ConfigMap and secrets of the README's step 2
    # (and what the overlay's opening comment asks for)
    script = readme_step_2(namespace, backend) + "".join(overlay_commands(o) for o in overlays)
    run_as_admin(script, admin_folder, k8s_cluster.kubeconfig)
    made = await client.CoreV1Api(k8s_api).read_namespace(namespace)
    for level in ("enforce", "warn"):
        key = f"pod-security.kubernetes.io/{level}"
        assert made.metadata.labels[key] == USERS_NAMESPACE_LABELS[key]

    # When helm lints both charts with values.yaml, the overlay and the admin's images
    z2jh_values = [K8S / "values.yaml", *overlays]
    helm_lint(released_chart, values=z2jh_values, settings=ADMIN_IMAGES)
    helm_lint(K8S, values=overlays, settings=ADMIN_IMAGES)
    # and renders them, with rbac.yaml for the namespace
    rendered = {
        CAMPUS_RELEASE: render_campus(*overlays, namespace=namespace),
        RELEASE: render_z2jh(
            *overlays, chart=released_chart, namespace=namespace, settings=ADMIN_IMAGES
        ),
        "rbac.yaml": rbac_for(namespace),
    }
    objects = [obj for documents in rendered.values() for obj in documents]
    async with cluster_wide_names_free(k8s_api, k8s_cluster, objects):
        # and applies every object, server-side, dry run first, then for real
        dry_run = await server_side_apply(k8s_api, objects, namespace, dry_run=True)
        applied = await server_side_apply(k8s_api, objects, namespace, dry_run=False)

        # Then the API server takes every object, both times
        assert dry_run.refused == {}
        assert applied.refused == {}
        assert sorted(f"{a.kind}/{a.name}" for a in applied.applied) == names(objects)
        # with the Pod Security warnings under restricted that are expected
        assert pod_security_warnings(applied, "restricted") == RESTRICTED_WARNINGS[overlay]
        # and none under baseline, which the namespace enforces (the same objects, dry run,
        # where baseline is what the API server warns about)
        at_baseline = await server_side_apply(k8s_api, objects, baseline_warned, dry_run=True)
        assert at_baseline.refused == {}
        assert pod_security_warnings(at_baseline, "baseline") == {}
        # and no other warning (a deprecated API, an unknown field), the dry run alike
        assert other_warnings(applied) == {}
        assert dry_run.warnings == applied.warnings


@pytest.mark.parametrize(
    ("change", "levels", "check"),
    [
        (
            {"capabilities": {"add": ["NET_ADMIN"]}},
            ["baseline", "restricted"],
            'container "hub" must not include "NET_ADMIN" in securityContext.capabilities.add',
        ),
        (
            {"allowPrivilegeEscalation": True},
            ["restricted"],
            'container "hub" must set securityContext.allowPrivilegeEscalation=false',
        ),
    ],
    ids=["an added capability", "privilege escalation"],
)
async def test_a_loosened_hub_container_is_warned_about_at_its_level(
    change, levels, check, released_chart, k8s_namespace, baseline_warned, k8s_api, tmp_path
):
    # The warnings above can be counted: given the hub's container loosened in an overlay
    overlay = tmp_path / "loosened.yaml"
    overlay.write_text(json.dumps({"hub": {"containerSecurityContext": change}}))
    [deployment] = render_z2jh(
        overlay,
        chart=released_chart,
        settings=ADMIN_IMAGES,
        show_only=["templates/hub/deployment.yaml"],
    )
    # When the hub's Deployment is applied (dry run) where baseline, and where restricted,
    # is warned about (both enforce baseline, as the users' namespace)
    warned = {"baseline": baseline_warned, "restricted": k8s_namespace}
    for level, namespace in warned.items():
        outcome = await server_side_apply(k8s_api, [deployment], namespace, dry_run=True)
        # Then the API server takes it (a Deployment is only warned about) and says which
        # check its pods fail, at each level they fail
        assert outcome.refused == {}
        found = pod_security_warnings(outcome, level).get("Deployment/hub", [])
        assert any(check in text for text in found) is (level in levels), (level, found)


def test_helm_lint_refuses_a_value_the_chart_does_not_have(released_chart, tmp_path):
    # Given an overlay with a misspelt key (hub.confg for hub.config)
    overlay = tmp_path / "misspelt.yaml"
    overlay.write_text("hub:\n  confg:\n    JupyterHub: {admin_access: false}\n")
    # When helm lints z2jh as released with it, then it fails naming the key
    with pytest.raises(HelmRefused) as refused:
        helm_lint(released_chart, values=[K8S / "values.yaml", overlay], settings=ADMIN_IMAGES)
    assert "at '/hub': additional properties 'confg' not allowed" in refused.value.message


# -- helm install, upgrade, uninstall --------------------------------------------------------


def readme_step_3(test_values: Path, chart: Path) -> str:
    """The README's step 3 as written, but for where the z2jh chart comes from (the released
    copy: no network here) and ``test_values`` passed to both releases, as the README says
    an admin passes a values file of their own."""
    script = readme_commands("### 3.")
    script, repo_lines = re.subn(r"^helm repo add .*\n", "", script, flags=re.M)
    assert repo_lines == 1, "the README's step 3 no longer adds the chart repository"
    assert script.count("jupyterhub/jupyterhub") == 1
    script = script.replace("jupyterhub/jupyterhub", str(chart))
    script, installs = re.subn(
        r"^helm upgrade --install ",
        f"helm upgrade --install --values={test_values} ",
        script,
        flags=re.M,
    )
    assert installs == 2, "the README's step 3 no longer installs two releases"
    return script


async def workloads_have_their_pods(api: client.ApiClient, namespace: str) -> bool:
    """Whether each Deployment and StatefulSet has made the pods it asks for (created, so
    admitted by Pod Security; Pending, with no node)."""
    apps = client.AppsV1Api(api)
    workloads = [
        *(await apps.list_namespaced_deployment(namespace)).items,
        *(await apps.list_namespaced_stateful_set(namespace)).items,
    ]
    return bool(workloads) and all((w.status.replicas or 0) == w.spec.replicas for w in workloads)


def list_releases(namespace: str, kubeconfig: Path) -> list[dict[str, Any]]:
    """The releases in ``namespace`` (``helm list --all``: deployed, failed or pending)."""
    done = helm("list", "-n", namespace, "-o", "json", "--all", kubeconfig=kubeconfig)
    releases: list[dict[str, Any]] = json.loads(done.stdout)
    return releases


def release_objects(release: str, namespace: str, kubeconfig: Path) -> list[Object]:
    """The objects helm holds for ``release`` (``helm get manifest``)."""
    done = helm("get", "manifest", release, "-n", namespace, kubeconfig=kubeconfig)
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


async def test_helm_installs_both_releases_as_the_readme_says_upgrades_and_uninstalls_them(
    released_chart, admin_folder, namespace, k8s_cluster, k8s_api, tmp_path
):
    # Given the admin's checkout with the images pushed to their registry (values.yaml's
    # REGISTRY replaced, where it says THE IMAGES), rbac.yaml's subject in the namespace
    folder = admin_folder / "hub_config" / "kubernetes"
    values = folder / "values.yaml"
    values.write_text(values.read_text().replace("REGISTRY/", "registry.campus.test/"))
    rbac = folder / "rbac.yaml"
    assert rbac.read_text().count("namespace: campus") == 1
    rbac.write_text(rbac.read_text().replace("namespace: campus", f"namespace: {namespace}"))
    # and a values file of the test's own for both releases: z2jh's image pre-puller hook
    # off. Its pre-install Job waits until every node has pulled the user image, and helm
    # waits for that Job; no node here pulls images, so helm would wait until its timeout.
    # (values.yaml does not set it, so the order of the files does not matter.)
    assert "prePuller" not in load_yaml(K8S / "values.yaml")
    test_values = tmp_path / "no-pre-pull-hook.yaml"
    test_values.write_text("prePuller:\n  hook:\n    enabled: false\n")
    backend = "hami"  # the README's own
    kubeconfig = k8s_cluster.kubeconfig
    campus_objects = render_campus(values, namespace=namespace, images=None)
    z2jh_objects = helm_template(
        released_chart,
        release=RELEASE,
        namespace=namespace,
        values=[values, folder / "backends" / f"{backend}.yaml", test_values],
    )
    rendered = [*campus_objects, *z2jh_objects, *rbac_for(namespace)]
    install = readme_step_2(namespace, backend) + readme_step_3(test_values, released_chart)
    async with cluster_wide_names_free(k8s_api, k8s_cluster, rendered):
        # When the README's steps 2 and 3 run, as the cluster's admin
        said = run_as_admin(install, admin_folder, kubeconfig)

        # Then both releases are deployed, z2jh's as its 4.4.0 release
        releases = {r["name"]: r for r in list_releases(namespace, kubeconfig)}
        assert {name: r["status"] for name, r in releases.items()} == {
            CAMPUS_RELEASE: "deployed",
            RELEASE: "deployed",
        }
        assert releases[RELEASE]["chart"] == "jupyterhub-4.4.0"
        assert releases[CAMPUS_RELEASE]["chart"] == "campus-gpu-hub-0.1.0"
        for release in releases:
            status = helm("status", release, "-n", namespace, "-o", "json", kubeconfig=kubeconfig)
            assert json.loads(status.stdout)["info"]["status"] == "deployed"
        # holding what helm template renders, every object of it in the API server
        held = {release: release_objects(release, namespace, kubeconfig) for release in releases}
        assert names(held[CAMPUS_RELEASE]) == names(campus_objects)
        assert names(held[RELEASE]) == names(z2jh_objects)
        resources = ApiResources(k8s_api)
        for obj in rendered:
            assert await read(k8s_api, await resources.path(obj, namespace)), obj["metadata"]
        # with no Pod Security warning on the way
        assert "PodSecurity" not in said
        # and every pod the workloads ask for is made, so admitted where baseline is enforced
        await wait_for(
            lambda: workloads_have_their_pods(k8s_api, namespace), HANG_GUARD, what="the pods"
        )

        # When the same commands run again (an upgrade, as after a change to the values)
        again = f"cd hub_config/kubernetes\nNS={namespace}\nBACKEND={backend}\n"
        run_as_admin(again + readme_step_3(test_values, released_chart), admin_folder, kubeconfig)
        # Then both are deployed, at revision 2
        releases = {r["name"]: r for r in list_releases(namespace, kubeconfig)}
        assert {name: (r["status"], r["revision"]) for name, r in releases.items()} == {
            CAMPUS_RELEASE: ("deployed", "2"),
            RELEASE: ("deployed", "2"),
        }

        # When both are uninstalled
        for release in releases:
            helm("uninstall", release, "-n", namespace, "--wait", kubeconfig=kubeconfig)
        # Then no release is left, and none of their objects
        assert list_releases(namespace, kubeconfig) == []
        for obj in [*campus_objects, *z2jh_objects]:
            assert await read(k8s_api, await resources.path(obj, namespace)) is None, obj[
                "metadata"
            ]
