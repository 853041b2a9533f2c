"""What the hub's and the job service's accounts may do, on the real control plane.

The accounts are made from the z2jh chart's rendered hub Role, rbac.yaml and
job-service.yaml (tests/support/cluster/identities.py). ``kubectl auth can-i --list`` for
each must be the table hub_config/kubernetes/README.md documents, and the job service's
executor, running jobs with its own account, must need nothing more than its Role.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
from pathlib import Path
from typing import Any

import pytest

from jupyter_to_job.executors.kube_client import KubeClient
from jupyter_to_job.executors.kubernetes import KubernetesExecutor
from tests.support.cluster.control_plane import tools_folder
from tests.support.cluster.session import ControlPlaneCluster
from tests.support.z2jh_chart import (
    DEMO_CATALOG,
    JOB_SERVICE,
    K8S,
    SESSIONS_SERVICE,
    ChartHub,
    catalog_mount_path,
    granted_to,
    manifests,
    one,
    render_campus,
    render_z2jh,
    services_by_name,
    shipped_values,
    z2jh_missing,
)

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.skipif(z2jh_missing() is not None, reason=z2jh_missing() or ""),
]

README = K8S / "README.md"
# Another namespace than the accounts' own: what an account may do there, it may do in
# every namespace (a ClusterRoleBinding).
ELSEWHERE = "kube-public"


def accounts_namespace(k8s_cluster: Any) -> str:
    if isinstance(k8s_cluster, ControlPlaneCluster):
        return k8s_cluster.identities["hub"].namespace
    return os.environ.get("CAMPUS_GPU_HUB_NAMESPACE", "campus")


def can_i_list(kubeconfig: Path, user: str, namespace: str) -> set[tuple[str, str]]:
    """(resource, verb) of every rule ``kubectl auth can-i --list`` shows ``user`` in
    ``namespace`` (resources as kubectl names them: ``jobs.batch``, ``pods/log``)."""
    done = subprocess.run(
        [
            str(tools_folder() / "kubectl"),
            f"--kubeconfig={kubeconfig}",
            "auth",
            "can-i",
            "--list",
            f"--as={user}",
            f"--namespace={namespace}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    header, *lines = done.stdout.splitlines()
    urls, names, verbs = (
        header.index(title) for title in ("Non-Resource", "Resource Names", "Verbs")
    )
    found = set()
    for line in lines:
        resource = line[:urls].strip()
        if not resource:
            continue  # a non-resource URL (/healthz, /version): every account's
        assert line[names:verbs].strip() == "[]", f"a rule limited to some names: {line}"
        for verb in line[verbs:].strip().strip("[]").split():
            found.add((resource, verb))
    return found


def permissions(kubeconfig: Path, account: str, namespace: str) -> dict[str, set[tuple[str, str]]]:
    """What ``account`` may do beyond what every authenticated account may (selfsubject
    reviews and the like), in its namespace and in every namespace."""

    def listed(user: str, where: str) -> set[tuple[str, str]]:
        return can_i_list(kubeconfig, user, where)

    anyone = f"system:serviceaccount:{namespace}:nobody-{secrets.token_hex(4)}"
    user = f"system:serviceaccount:{namespace}:{account}"
    everywhere = listed(user, ELSEWHERE) - listed(anyone, ELSEWHERE)
    return {
        "cluster": everywhere,
        "namespace": listed(user, namespace) - listed(anyone, namespace) - everywhere,
    }


def readme_tables() -> list[list[dict[str, str]]]:
    """The Markdown tables of README.md, each a list of rows keyed by its header."""
    tables, rows, header = [], [], None
    for line in [*README.read_text().splitlines(), ""]:
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            elif not set("".join(cells)) <= set("-: "):
                rows.append(dict(zip(header, cells, strict=True)))
        elif header is not None:
            tables.append(rows)
            rows, header = [], None
    return tables


def readme_table(*columns: str) -> list[dict[str, str]]:
    [table] = [t for t in readme_tables() if t and list(t[0])[: len(columns)] == list(columns)]
    return table


def code(cell: str) -> str:
    [name] = re.findall(r"`([^`]+)`", cell)
    return name


def documented(account: str) -> dict[str, set[tuple[str, str]]]:
    """The README's permissions of ``account``: Service account | Resource | Where | Verbs."""
    rules: dict[str, set[tuple[str, str]]] = {"namespace": set(), "cluster": set()}
    for row in readme_table("Service account", "Resource", "Where", "Verbs"):
        if code(row["Service account"]) == account:
            for verb in row["Verbs"].replace(",", " ").split():
                rules[row["Where"].split()[0]].add((code(row["Resource"]), verb))
    return rules


@pytest.mark.parametrize("account", ["hub", JOB_SERVICE])
def test_each_accounts_permissions_are_the_ones_the_readme_documents(k8s_cluster, account):
    # Given the account as the chart's Role, rbac.yaml and job-service.yaml make it
    namespace = accounts_namespace(k8s_cluster)
    # When the cluster admin asks what it may do
    granted = permissions(k8s_cluster.kubeconfig, account, namespace)
    # Then it is exactly what the README's table says
    assert granted == documented(account)
    assert granted["namespace"], "the account may do nothing: the comparison would be empty"


def test_the_course_sessions_service_runs_with_the_hubs_account(tmp_path, monkeypatch):
    # Given the README's table of who runs as which account
    runs_as = {
        row["Part"]: code(row["Service account"])
        for row in readme_table("Part")
        if "`" in row["Service account"]
    }
    hub = [part for part in runs_as if part.startswith("the hub ")]
    sessions = [part for part in runs_as if "course-sessions" in part]
    job_service = [part for part in runs_as if "Run as Job service" in part]
    assert [runs_as[p] for p in hub + sessions + job_service] == ["hub", "hub", JOB_SERVICE]
    # Then the course-sessions service is a process the hub starts in its own pod (a
    # command, no pod of its own), so it has the hub pod's account
    values = shipped_values()
    catalog = tmp_path / "course-catalog"
    catalog.mkdir()
    (catalog / "catalog.yaml").write_text(DEMO_CATALOG.read_text())
    config = ChartHub(tmp_path, monkeypatch).run(
        values, mounts={catalog_mount_path(values): catalog}
    )
    assert services_by_name(config)[SESSIONS_SERVICE]["command"]
    [hub_deployment] = render_z2jh(show_only=["templates/hub/deployment.yaml"])
    assert hub_deployment["spec"]["template"]["spec"]["serviceAccountName"] == "hub"
    # and the job service runs in its own pod with its own account
    deployment = one(render_campus(), "Deployment", JOB_SERVICE)
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == JOB_SERVICE


def api_permission(method: str, path: str, query: list[tuple[str, Any]]) -> tuple[str, ...]:
    """The RBAC (scope, API group, resource, verb) that an API request needs."""
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    scope = "cluster"
    if rest[0] == "namespaces" and len(rest) > 2:
        scope, rest = "namespace", rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    if method == "GET":
        watch = any(key == "watch" and str(value) == "true" for key, value in query)
        verb = "watch" if watch else "get" if len(rest) > 1 else "list"
    else:
        verb = verbs[method]
    return scope, group, resource, verb


def test_api_permission_reads_requests_as_rbac_does():
    assert api_permission("GET", "/api/v1/nodes", []) == ("cluster", "", "nodes", "list")
    pods = "/api/v1/namespaces/campus/pods"
    assert api_permission("GET", pods, [("watch", "true")])[3] == "watch"
    assert api_permission("GET", f"{pods}/p/log", [])[2:] == ("pods/log", "get")
    jobs = "/apis/batch/v1/namespaces/campus/jobs/j"
    assert api_permission("PATCH", jobs, []) == ("namespace", "batch", "jobs", "patch")


async def test_what_the_executor_sends_with_its_own_account_is_granted(
    job_service_kubeconfig, k8s_controls, tmp_path, monkeypatch
):
    """A job that completes and one that is stopped, and the GPU pool's read, by the
    executor with the job service's account: every request it makes is one the job
    service's Role allows (a 403 would fail the job)."""
    import nbformat

    from jupyter_to_job.manager import JobManager
    from jupyter_to_job.models import CreateJob, JobStatus
    from tests.support import eventually
    from tests.support.job_managers import finished, shut_down
    from tests.support.k8s_job_pods import JOB_PODS, PodProcesses, k8s_job_config, kill_kernels
    from tests.support.notebooks import notebook, wait_for_file

    sent: set[tuple[str, ...]] = set()
    send = KubeClient._send

    async def recorded(self: KubeClient, method: str, path: str, **options: Any) -> Any:
        sent.add(api_permission(method, path, options.get("query") or []))
        return await send(self, method, path, **options)

    monkeypatch.setattr(KubeClient, "_send", recorded)
    pods_dir = tmp_path / "pods"
    k8s_controls.add_gpu_nodes(1, product="NVIDIA-A100-SXM4-80GB", gpu_count=4)
    k8s_controls.run_processes(PodProcesses(match=JOB_PODS, workdir=pods_dir))
    config = k8s_job_config(job_service_kubeconfig, ttl_seconds_after_finished=60)
    manager = JobManager(root_dir=str(tmp_path / "jobs"), config=config)
    await manager.start()
    try:

        async def submit(nb: Any) -> str:
            request = CreateJob(input_path="train.ipynb", output_formats=["ipynb"])
            return (await manager.create("ada", request, notebook=nbformat.writes(nb))).job_id

        done = await finished(manager, await submit(notebook("print('one')")))
        assert done.status is JobStatus.COMPLETED, done.status_message
        waiting = await submit(notebook("print('ready')\n" + wait_for_file(tmp_path / "never")))
        await eventually(
            lambda: "ready" in manager.read_log(waiting).data, what="the second job to run"
        )
        await manager.stop(waiting)
        stopped = await finished(manager, waiting)
        assert stopped.status is JobStatus.STOPPED, stopped.status_message
        await KubernetesExecutor.cluster_pool_reader(config)()
    finally:
        await shut_down([manager])
        kill_kernels(pods_dir)

    granted = granted_to(JOB_SERVICE, render_campus() + manifests("rbac.yaml"))
    assert sent - granted == set()
    # The scenario went the whole way: created, followed, expired, deleted, and the pool.
    assert {
        ("namespace", "batch", "jobs", "create"),
        ("namespace", "", "pods", "watch"),
        ("namespace", "", "pods/log", "get"),
        ("namespace", "batch", "jobs", "patch"),
        ("namespace", "batch", "jobs", "delete"),
        ("cluster", "", "nodes", "list"),
    } <= sent
