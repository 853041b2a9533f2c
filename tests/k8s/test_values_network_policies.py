"""Who job pods and user servers may reach (issue 23, defects 2 and 3).

The NetworkPolicies are the shipped ones, sent to the real API server (server-side apply,
dry run: as stored, with the server's defaults) and read as a network plugin enforces them
(tests/support/z2jh_chart.py). The pods are real too: a job's pod as the Job controller
makes it from the job service's Job, a server's pod as GPUSpawner makes it from the chart's
hub configuration. The test cluster has no network plugin, so nothing here sends a packet;
README.md lists that among what only a real cluster verifies.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from gpuspawner.backends import cpu_only_plan
from gpuspawner.spawners.kubernetes import GPUSpawner
from jupyter_to_job.k8s_objects import JOB_NAME_LABEL, make_job
from tests.support import eventually
from tests.support.cluster.control_plane import tools_folder
from tests.support.k8s_spawners import without_a_hub
from tests.support.z2jh_chart import (
    DEMO_CATALOG,
    JOB_SERVICE,
    ChartHub,
    Peer,
    as_json,
    catalog_mount_path,
    egress_allowed,
    ingress_allowed,
    manifests,
    one,
    render_campus,
    render_z2jh,
    shipped_values,
    z2jh_missing,
)

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.skipif(z2jh_missing() is not None, reason=z2jh_missing() or ""),
]

NAMESPACE = "default"
METADATA_SERVER = Peer(ip="169.254.169.254")
PYPI = Peer(ip="151.101.0.223")
API_SERVER = Peer(ip="10.96.0.1")
CAMPUS_SERVICE = Peer(ip="10.20.30.40")  # a database on the campus network, say
KUBE_DNS = Peer(
    ip="10.244.0.2",
    labels={"k8s-app": "kube-dns"},
    namespace="kube-system",
    namespace_labels={"kubernetes.io/metadata.name": "kube-system"},
)


def in_namespace(labels: dict[str, str], ip: str, **ports: int) -> Peer:
    return Peer(
        ip=ip,
        labels=labels,
        namespace=NAMESPACE,
        namespace_labels={"kubernetes.io/metadata.name": NAMESPACE},
        named_ports=ports,
    )


def applied_dry_run(kubeconfig: Path, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``objects`` as the API server would store them (``kubectl apply --server-side
    --dry-run=server``); a refusal fails the test with kubectl's words."""
    done = subprocess.run(
        [
            str(tools_folder() / "kubectl"),
            f"--kubeconfig={kubeconfig}",
            f"--namespace={NAMESPACE}",
            "apply",
            "--server-side",
            "--field-manager=campus-admin",
            "--dry-run=server",
            "--output=json",
            "-f",
            "-",
        ],
        input=as_json(objects),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"The API server refused the manifests: {done.stderr.strip()}")
    stored = json.loads(done.stdout)
    return stored["items"] if stored.get("kind") == "List" else [stored]


async def job_pod_labels(job_service_kubeconfig: Path, k8s_api: client.ApiClient) -> dict:
    """The labels of a job's pod, as the Job controller makes it from the Job the job
    service sends (with the job service's identity)."""
    job = make_job(job_id="netpol1", owner="ada", image="user-image", plan=cpu_only_plan())
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(job_service_kubeconfig), client_configuration=configuration
    )
    async with client.ApiClient(configuration) as api:
        await client.BatchV1Api(api).create_namespaced_job(NAMESPACE, job)
    name = job["metadata"]["name"]
    core = client.CoreV1Api(k8s_api)

    async def made() -> Any:
        listed = await core.list_namespaced_pod(
            NAMESPACE, label_selector=f"{JOB_NAME_LABEL}={name}"
        )
        return listed.items

    [pod] = await eventually(made, what="the Job controller's pod for the job")
    return dict(pod.metadata.labels)


async def test_job_pods_reach_what_user_servers_reach_but_never_the_metadata_server(
    k8s_cluster, k8s_api, job_service_kubeconfig
):
    # Given the NetworkPolicies job-service.yaml installs, as the API server stores them
    policies = applied_dry_run(
        k8s_cluster.kubeconfig,
        [d for d in manifests("job-service.yaml") if d["kind"] == "NetworkPolicy"],
    )
    # and a job's pod, as the Job controller made it
    job = in_namespace(await job_pod_labels(job_service_kubeconfig, k8s_api), "10.244.1.7")
    selecting = [
        p["metadata"]["name"]
        for p in policies
        if {"Egress", "Ingress"} <= set(p["spec"].get("policyTypes", []))
        and egress_allowed([p], job, METADATA_SERVER, 80) is False
    ]
    assert selecting, "no NetworkPolicy of job-service.yaml holds job pods' traffic"

    # and, for comparison, a user server's pod under z2jh's singleuser policy as rendered
    # with the shipped values
    z2jh_policy = applied_dry_run(
        k8s_cluster.kubeconfig,
        render_z2jh(show_only=["templates/singleuser/netpol.yaml"]),
    )
    server = in_namespace(
        {"component": "singleuser-server", "app": "jupyterhub", "release": "campus"},
        "10.244.1.8",
    )
    docs = render_campus()
    job_service = in_namespace(
        one(docs, "Deployment", JOB_SERVICE)["spec"]["template"]["metadata"]["labels"],
        "10.244.1.9",
        http=8766,
    )
    hub = in_namespace({"component": "hub", "app": "jupyterhub", "release": "campus"}, "10.1.0.3")
    usage_db = in_namespace({"app.kubernetes.io/name": "gpu-usage-db"}, "10.1.0.4", postgres=5432)
    destinations = {
        "the metadata server's API (80)": (METADATA_SERVER, 80, "TCP"),
        "the metadata server over TLS (443)": (METADATA_SERVER, 443, "TCP"),
        "the metadata server's DNS (53)": (METADATA_SERVER, 53, "UDP"),
        "the cluster's DNS": (KUBE_DNS, 53, "UDP"),
        "PyPI": (PYPI, 443, "TCP"),
        "the job service's upload port": (job_service, 8766, "TCP"),
        "the API server": (API_SERVER, 443, "TCP"),
        "a campus service": (CAMPUS_SERVICE, 5432, "TCP"),
        "the usage database": (usage_db, 5432, "TCP"),
    }

    def reach(pod: Peer, rules: list[dict[str, Any]]) -> dict[str, bool]:
        return {
            what: egress_allowed(rules, pod, target, port, protocol)
            for what, (target, port, protocol) in destinations.items()
        }

    # Then a job's pod reaches exactly what a user server reaches
    assert (
        reach(job, policies)
        == reach(server, z2jh_policy)
        == {
            "the metadata server's API (80)": False,
            "the metadata server over TLS (443)": False,
            "the metadata server's DNS (53)": True,  # as z2jh allows servers, for GKE
            "the cluster's DNS": True,
            "PyPI": True,
            "the job service's upload port": True,
            "the API server": False,
            "a campus service": False,
            "the usage database": False,
        }
    )
    # but not the hub, which servers talk to and jobs do not
    assert egress_allowed(z2jh_policy, server, hub, 8081)
    assert not egress_allowed(policies, job, hub, 8081)
    # And nothing connects to a job's pod, not even a user server or the hub
    for source in (server, hub, job_service):
        assert not ingress_allowed(policies, job, source, 8888)


@pytest.mark.usefixtures("kubespawner_env")
async def test_user_servers_are_kept_from_the_metadata_server_by_the_network_policy(
    k8s_cluster, tmp_path, monkeypatch
):
    # Given a user's pod as GPUSpawner makes it from the chart's hub configuration
    values = shipped_values()
    catalog = tmp_path / "course-catalog"
    catalog.mkdir()
    (catalog / "catalog.yaml").write_text(DEMO_CATALOG.read_text())
    hub_config = ChartHub(tmp_path, monkeypatch).run(
        values, mounts={catalog_mount_path(values): catalog}, namespace=NAMESPACE
    )
    hub_config.GPUAdmission.catalog_path = str(catalog)
    pod = await without_a_hub(GPUSpawner, "ada", hub_config).get_pod_manifest()
    # with no iptables init container of its own (Pod Security refuses it)
    assert not pod.spec.init_containers
    server = in_namespace(dict(pod.metadata.labels), "10.244.1.8")
    # When the singleuser NetworkPolicy z2jh renders with the shipped values is stored
    [policy] = applied_dry_run(
        k8s_cluster.kubeconfig, render_z2jh(show_only=["templates/singleuser/netpol.yaml"])
    )
    # Then it holds that pod, keeps it from the metadata server's API, lets it reach the
    # internet and the job service, and nothing else of the cluster's private addresses
    job_service = in_namespace({"app.kubernetes.io/name": JOB_SERVICE}, "10.244.1.9")
    assert not egress_allowed([policy], server, METADATA_SERVER, 80)
    assert egress_allowed([policy], server, PYPI, 443)
    assert egress_allowed([policy], server, job_service, 8766)
    assert not egress_allowed([policy], server, CAMPUS_SERVICE, 5432)
    # while the policy's reading can fail: without z2jh's exception, the metadata server
    # would be reached through the internet rule
    opened = json.loads(json.dumps(policy))
    for rule in opened["spec"]["egress"]:
        for peer in rule.get("to", []):
            if "ipBlock" in peer:
                peer["ipBlock"]["except"] = [
                    cidr for cidr in peer["ipBlock"].get("except", []) if "169.254" not in cidr
                ]
    assert egress_allowed([opened], server, METADATA_SERVER, 80)
