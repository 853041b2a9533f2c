"""Scenarios: a job on Kubernetes runs as its owner, in their home, and its outputs come back.

The user's server is started by GPUSpawner (as the hub, with the hub's account) on the test
cluster with Zero to JupyterHub's default storage (a ``claim-<user>`` PVC at /home/jovyan,
uid 1000, fsGroup 100, as the chart's hub configuration sets them; the claim is bound to a
volume made for it, the cluster having no provisioner); the job service is a JobManager
running Kubernetes Jobs with its own account and the service's HTTP handlers in this
process (a table stands in for the hub's token check). Job pods run as local processes; a
PVC is one local folder for every pod that mounts it, so the home a job writes in is the
one the test reads.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import nbformat
import pytest
import yaml
from jupyterhub.services.auth import HubAuth
from kubernetes_asyncio import client
from tornado import web
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port

from gpuspawner.spawners.kubernetes import GPUSpawner
from jupyter_to_job.executors.kubernetes import KubernetesExecutor
from jupyter_to_job.jobs_api import JobsAPI, local_catalog
from jupyter_to_job.k8s_objects import upload_secret_name
from jupyter_to_job.manager import JobManager
from jupyter_to_job.models import CreateJob, JobStatus
from jupyter_to_job.output_uploads import MAX_OUTPUT_BYTES, TOKEN_HASH_FILE
from jupyter_to_job.scopes import READ_JOBS_SCOPE, access_scope
from jupyter_to_job.service.handlers import NotFoundHandler, service_handlers
from tests.support import eventually
from tests.support.job_managers import ManagerFactory, finished
from tests.support.k8s_job_pods import PodProcesses, make_home_claim, provide_volume
from tests.support.k8s_spawners import make_gpu_spawner, write_class_catalog
from tests.support.notebooks import notebook, wait_for_file

from .conftest import job_pod

PREFIX = "/services/jupyter-to-job/"
ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "hub_config" / "kubernetes"
Z2JH = Path(os.environ.get("Z2JH_CHART_DIR") or ROOT.parent / "shared" / "reference" / "z2jh")
Z2JH_HOME_STORAGE = {
    # What z2jh 4's hub configuration sets for the chart's default singleuser.storage
    # (type dynamic, homeMountPath /home/jovyan) and singleuser.uid / fsGid.
    "storage_pvc_ensure": True,
    "storage_capacity": "10Gi",
    "storage_access_modes": ["ReadWriteOnce"],
    "volumes": [
        {"name": "volume-{user_server}", "persistentVolumeClaim": {"claimName": "{pvc_name}"}}
    ],
    "volume_mounts": [{"name": "volume-{user_server}", "mountPath": "/home/jovyan"}],
    "uid": 1000,
    "fs_gid": 100,
}


def test_the_shipped_values_give_jobs_the_home_their_servers_have() -> None:
    if not (Z2JH / "values.yaml").is_file():
        pytest.skip(f"the z2jh 4.4.0 chart files are not at {Z2JH} (set Z2JH_CHART_DIR)")
    # Given the shipped values (and job service), which leave the chart's home storage,
    # uid and fsGid as they are: the chart's defaults, which Z2JH_HOME_STORAGE restates
    shipped = yaml.safe_load((K8S / "values.yaml").read_text())["singleuser"]
    assert not {"storage", "uid", "fsGid"} & set(shipped)
    chart = yaml.safe_load((Z2JH / "values.yaml").read_text())["singleuser"]
    assert chart["storage"]["type"] == "dynamic" and not chart["storage"]["dynamic"]["subPath"]
    assert chart["storage"]["dynamic"]["pvcNameTemplate"] is None  # KubeSpawner's claim-...
    home = chart["storage"]["homeMountPath"]
    assert Z2JH_HOME_STORAGE["volume_mounts"][0]["mountPath"] == home
    assert (Z2JH_HOME_STORAGE["uid"], Z2JH_HOME_STORAGE["fs_gid"]) == (
        chart["uid"],
        chart["fsGid"],
    )
    job_service_config = (K8S / "job-service.yaml").read_text()
    for name in ("home_", "run_as_", "fs_gid", "notebook_dir"):
        assert f"KubernetesExecutor.{name}" not in job_service_config

    # Then the executor's own defaults are that home, uid and fsGid
    traits = KubernetesExecutor.class_traits()
    assert traits["home_pvc_name_template"].default_value == "claim-{username}"
    assert traits["home_mount_path"].default_value == home
    assert traits["home_sub_path"].default_value == ""
    assert traits["run_as_uid"].default_value == chart["uid"]
    assert traits["fs_gid"].default_value == chart["fsGid"]


class TokenTable(HubAuth):
    """The hub's token check, answered from a table: each person's token is their name."""

    async def _get_user(self, handler: web.RequestHandler) -> dict[str, Any] | None:
        name = handler.request.headers.get("Authorization", "").removeprefix("token ").strip()
        if not name:
            return None
        return {
            "kind": "user",
            "name": name,
            "groups": [],
            "scopes": [access_scope(), f"{READ_JOBS_SCOPE}!user={name}"],
        }


@dataclass
class JobService:
    manager: JobManager
    url: str

    def as_(self, person: str) -> httpx.AsyncClient:
        """The service's API as ``person`` (the Jobs panel's calls, relayed)."""
        return httpx.AsyncClient(
            base_url=f"{self.url}api/", headers={"Authorization": f"token {person}"}, timeout=60
        )


@contextlib.asynccontextmanager
async def serving(manager: JobManager, port: int, sock: Any) -> AsyncIterator[None]:
    api = JobsAPI(manager, mode="hub", catalog=local_catalog, max_notebook_bytes=1_000_000)
    hub_auth = TokenTable(api_token="unused", api_url="http://127.0.0.1:1/hub/api")
    app = web.Application(
        service_handlers(PREFIX, api=api, hub_auth=hub_auth, access_scopes={access_scope()}),
        default_handler_class=NotFoundHandler,
    )
    server = HTTPServer(app)
    server.add_sockets([sock])
    try:
        yield
    finally:
        server.stop()
        await server.close_all_connections()


@pytest.fixture
async def job_service(job_pods: Any, make_k8s_manager: ManagerFactory) -> AsyncIterator[JobService]:
    """The job service: Kubernetes Jobs with z2jh's home, outputs sent back over HTTP."""
    sock, port = bind_unused_port()
    url = f"http://127.0.0.1:{port}{PREFIX}"
    manager = await make_k8s_manager(home_pvc_name_template="claim-{username}", upload_url=url)
    async with serving(manager, port, sock):
        yield JobService(manager, url)


@pytest.fixture
def fresh_inventory() -> Any:
    GPUSpawner._inventories.clear()
    yield
    GPUSpawner._inventories.clear()


async def submit(manager: JobManager, owner: str, nb: Any, path: str, **fields: Any) -> str:
    request = CreateJob(input_path=path, **fields)
    created = await manager.create(owner, request, notebook=nbformat.writes(nb))
    return created.job_id


async def home_claim(k8s_api: Any, user: str) -> None:
    """The home PVC the user's server made when it first started (``claim-<user>``)."""
    await make_home_claim(k8s_api, f"claim-{user}")


async def upload_token(k8s_api: Any, job_id: str) -> str:
    secret = await client.CoreV1Api(k8s_api).read_namespaced_secret(
        upload_secret_name(job_id), "default", _preload_content=False
    )
    data = json.loads(await secret.read())["data"]
    return base64.b64decode(data["upload-token"]).decode()


WRITES_BESIDE_ITSELF = (
    "import os\nprint('cwd', os.getcwd())",
    "with open('result.txt', 'w') as f:\n    f.write('trained')\nprint('saved')",
)


@pytest.mark.usefixtures("kubespawner_env", "fresh_inventory")
async def test_a_researchers_job_runs_as_them_in_their_home_and_its_outputs_open(
    job_service: JobService, pod_processes: PodProcesses, k8s_api: Any, tmp_path: Path
) -> None:
    # Given rhea's server, started by GPUSpawner with z2jh's home storage, and her notebook
    # saved in the folder "project" of her home
    catalog = write_class_catalog(tmp_path / "catalog.yaml", ["rhea"])
    await provide_volume(k8s_api, "claim-rhea")  # the storage her claim will be bound to
    spawner = make_gpu_spawner("rhea", catalog, **Z2JH_HOME_STORAGE)
    await spawner.start()
    server_pod = await client.CoreV1Api(k8s_api).read_namespaced_pod(
        spawner.pod_name, "default", _preload_content=False
    )
    server_volumes = json.loads(await server_pod.read())["spec"]["volumes"]
    home = pod_processes.claim_folder("default", "claim-rhea")
    (home / "project").mkdir()

    # When she runs it as a job, asking for HTML too
    manager = job_service.manager
    job_id = await submit(
        manager,
        "rhea",
        notebook(*WRITES_BESIDE_ITSELF),
        "project/train.ipynb",
        output_formats=["ipynb", "html"],
    )
    job = await finished(manager, job_id)

    # Then it ran in her notebook's folder, in her home, and left its file there
    assert job.status is JobStatus.COMPLETED, job.status_message
    log = manager.read_log(job_id).data
    assert f"[cell 0] cwd {home / 'project'}" in log
    assert (home / "project" / "result.txt").read_text() == "trained"

    # And its pod ran with her uid and groups, her server's home claim, and no
    # service-account token (the only secret mounted is the job's own upload token)
    pod = await job_pod(client.CoreV1Api(k8s_api), job_id)
    assert pod is not None
    spec = pod["spec"]
    assert spec["securityContext"]["runAsUser"] == 1000
    assert (spec["securityContext"]["runAsGroup"], spec["securityContext"]["fsGroup"]) == (100, 100)
    assert spec["automountServiceAccountToken"] is False
    claims = {
        v["persistentVolumeClaim"]["claimName"]
        for v in spec["volumes"]
        if "persistentVolumeClaim" in v
    }
    server_claims = {
        v["persistentVolumeClaim"]["claimName"]
        for v in server_volumes
        if "persistentVolumeClaim" in v
    }
    assert claims == server_claims == {"claim-rhea"}
    [container] = spec["containers"]
    assert container["workingDir"] == "/home/jovyan"
    assert {"name": "home", "mountPath": "/home/jovyan"} in container["volumeMounts"]
    secret_mounts = [m for m in container["volumeMounts"] if "/secrets/" in m["mountPath"]]
    assert secret_mounts == [
        {"name": "upload-token", "mountPath": "/var/run/secrets/jupyter-to-job", "readOnly": True}
    ]

    # And the executed notebook and its HTML came back, and open from the Jobs panel
    assert [(o.format, o.name) for o in job.outputs] == [
        ("ipynb", f"train-{job_id[:8]}.ipynb"),
        ("html", f"train-{job_id[:8]}.html"),
    ]
    async with job_service.as_("rhea") as rhea:
        executed = await rhea.get(f"jobs/{job_id}/outputs/ipynb")
        html = await rhea.get(f"jobs/{job_id}/outputs/html")
    assert executed.status_code == 200, executed.text
    cells = nbformat.reads(executed.text, as_version=4).cells
    assert cells[1].outputs[0]["text"] == "saved\n"
    assert html.status_code == 200 and "saved" in html.text and "<html" in html.text

    await spawner.stop()


async def test_a_job_sends_outputs_only_to_itself_and_only_while_it_runs(
    job_service: JobService, k8s_api: Any, tmp_path: Path
) -> None:
    # Given two of alice's jobs, the first waiting in its second cell
    await home_claim(k8s_api, "alice")
    manager = job_service.manager
    gate = tmp_path / "gate"
    first = await submit(
        manager, "alice", notebook("print('ready')", wait_for_file(gate)), "a.ipynb"
    )
    await eventually(lambda: "[cell 0] ready" in manager.read_log(first).data, what="ready")
    second = await submit(manager, "alice", notebook("print('two')"), "b.ipynb")
    token = await upload_token(k8s_api, first)
    uploads = httpx.AsyncClient(base_url=f"{job_service.url}api/jobs/", timeout=60)
    bearer = {"Authorization": f"Bearer {token}"}

    async with uploads:
        # When the first job's token is used for the second job, or no token at all
        elsewhere = await uploads.put(f"{second}/uploads/ipynb", content=b"{}", headers=bearer)
        anonymous = await uploads.put(f"{first}/uploads/ipynb", content=b"{}")
        forged = await uploads.put(
            f"{first}/uploads/ipynb", content=b"{}", headers={"Authorization": "Bearer forged"}
        )
        # Then each is refused, and nothing was written
        assert [r.status_code for r in (elsewhere, anonymous, forged)] == [401, 401, 401]
        assert elsewhere.json()["reason"] == "unauthenticated"
        assert not manager.job_files(second).output("ipynb").exists() or (
            manager.job_files(second).output("ipynb").read_bytes() != b"{}"
        )

        # And the service keeps only the token's hash, never the token itself
        stored = (manager.job_files(first).directory / TOKEN_HASH_FILE).read_text()
        assert token not in stored and len(stored.strip()) == 64

        # When the first job ends, its token opens nothing any more
        gate.touch()
        job = await finished(manager, first)
        assert job.status is JobStatus.COMPLETED, job.status_message
        sent = manager.job_files(first).output("ipynb").read_bytes()
        late = await uploads.put(f"{first}/uploads/ipynb", content=b"{}", headers=bearer)
        assert late.status_code == 401
        assert manager.job_files(first).output("ipynb").read_bytes() == sent
        assert "gate opened" in sent.decode()


@pytest.mark.parametrize(
    ("reason", "ename", "words"),
    [
        ("PreemptionByScheduler", "Preempted", "the cluster gave its place to a pod of higher"),
        ("DeletionByTaintManager", "NodeLost", "its node was lost or taken out of service"),
    ],
)
async def test_a_preempted_pod_ends_the_job_as_preempted_keeping_its_output(
    job_service: JobService, k8s_api: Any, tmp_path: Path, reason: str, ename: str, words: str
) -> None:
    # Given a job that printed forty lines and waits in its second cell
    await home_claim(k8s_api, "alice")
    manager = job_service.manager
    job_id = await submit(
        manager,
        "alice",
        notebook("for i in range(40):\n    print('before', i)", wait_for_file(tmp_path / "never")),
        "train.ipynb",
    )
    await eventually(lambda: "[cell 0] before 39" in manager.read_log(job_id).data, what="output")
    pod = await job_pod(client.CoreV1Api(k8s_api), job_id)
    assert pod is not None
    name = pod["metadata"]["name"]

    # When the cluster marks its pod for disruption and deletes it (as the scheduler's
    # preemption, or the taint manager after node loss, does through the API)
    core = client.CoreV1Api(k8s_api)
    condition = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": reason,
        "message": "taken by the cluster",
        "lastTransitionTime": "2030-01-01T00:00:00Z",
    }
    await core.patch_namespaced_pod_status(name, "default", {"status": {"conditions": [condition]}})
    await core.delete_namespaced_pod(name, "default")
    job = await finished(manager, job_id)

    # Then the job failed as preempted, saying why, and kept its log and output notebook
    assert job.status is JobStatus.FAILED
    assert job.status_message is not None
    assert job.status_message.startswith(f"The job was preempted: {words}")
    assert "after 1 of 2 code cells" in job.status_message
    assert job.error is not None and (job.error.ename, job.error.cell_index) == (ename, 1)
    log = manager.read_log(job_id).data
    assert all(f"[cell 0] before {i}\n" in log for i in range(40))
    assert [o.format for o in job.outputs] == ["ipynb", "html"]
    executed = nbformat.reads(manager.job_files(job_id).output("ipynb").read_text(), as_version=4)
    assert executed.cells[0].outputs[0]["text"].startswith("before 0\n")


async def test_a_stopped_job_still_sends_back_what_it_ran(
    job_service: JobService, k8s_api: Any, tmp_path: Path
) -> None:
    # Given a job waiting in its second cell
    await home_claim(k8s_api, "alice")
    manager = job_service.manager
    job_id = await submit(
        manager, "alice", notebook("print('first')", wait_for_file(tmp_path / "never")), "t.ipynb"
    )
    await eventually(lambda: "[cell 0] first" in manager.read_log(job_id).data, what="output")

    # When its owner stops it (its Kubernetes Job, Secret included, is deleted)
    await manager.stop(job_id)
    job = await finished(manager, job_id)

    # Then the runner, given its grace period, sent the cells that ran
    assert job.status is JobStatus.STOPPED, job.status_message
    assert [o.format for o in job.outputs] == ["ipynb", "html"]
    executed = nbformat.reads(manager.job_files(job_id).output("ipynb").read_text(), as_version=4)
    assert executed.cells[0].outputs[0]["text"] == "first\n"
    assert not (manager.job_files(job_id).directory / TOKEN_HASH_FILE).exists()


async def test_a_job_preempted_before_its_pod_started_says_so(
    job_service: JobService, k8s_api: Any
) -> None:
    # Given a job whose pod waits for a node (bob's home claim is not there yet)
    manager = job_service.manager
    job_id = await submit(manager, "bob", notebook("print('never')"), "t.ipynb")

    async def pending_pod() -> Any:
        pod = await job_pod(client.CoreV1Api(k8s_api), job_id)
        return pod if pod and pod["status"].get("conditions") else None

    pod = await eventually(pending_pod, what="the job's pod, waiting")

    # When the cluster evicts it before it ever ran
    core = client.CoreV1Api(k8s_api)
    condition = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "EvictionByEvictionAPI",
        "lastTransitionTime": "2030-01-01T00:00:00Z",
    }
    name = pod["metadata"]["name"]
    await core.patch_namespaced_pod_status(name, "default", {"status": {"conditions": [condition]}})
    await core.delete_namespaced_pod(name, "default")
    job = await finished(manager, job_id)

    # Then the job failed as preempted, not as "deleted by someone"
    assert job.status is JobStatus.FAILED
    assert job.status_message is not None
    assert job.status_message.startswith("The job was preempted: its pod was evicted")
    assert "before any cell ran" in job.status_message
    assert job.error is not None and job.error.ename == "Preempted"


async def test_a_job_may_send_only_the_outputs_it_was_asked_for_within_the_limit(
    job_service: JobService, k8s_api: Any, tmp_path: Path
) -> None:
    # Given a running job asked for its notebook only
    await home_claim(k8s_api, "alice")
    manager = job_service.manager
    gate = tmp_path / "gate"
    job_id = await submit(
        manager, "alice", notebook(wait_for_file(gate)), "t.ipynb", output_formats=["ipynb"]
    )
    await eventually(lambda: "started on" in manager.read_log(job_id).data, what="its pod")
    token = await upload_token(k8s_api, job_id)

    # When it sends HTML, or announces more than an output may hold
    async with httpx.AsyncClient(base_url=f"{job_service.url}api/jobs/", timeout=60) as uploads:
        html = await uploads.put(
            f"{job_id}/uploads/html",
            content=b"<html></html>",
            headers={"Authorization": f"Bearer {token}"},
        )
    host, port = job_service.url.split("/")[2].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        (
            f"PUT {PREFIX}api/jobs/{job_id}/uploads/ipynb HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Length: {MAX_OUTPUT_BYTES + 1}\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 30)
    writer.close()

    # Then both are refused, and nothing is written
    assert html.status_code == 400 and html.json()["reason"] == "invalid"
    assert status_line.split()[1] == b"413"
    assert not manager.job_files(job_id).output("html").exists()
    assert not [p.name for p in manager.job_files(job_id).directory.glob(".output.*")]
    gate.touch()
    assert (await finished(manager, job_id)).status is JobStatus.COMPLETED
