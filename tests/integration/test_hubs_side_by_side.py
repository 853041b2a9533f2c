"""Several hubs on one machine: two ``make demo`` and one ``make demo-workstation``, each with a
runtime folder and ports of its own, and the same people in each.

Given student1's course server in each of the three hubs (each in a cgroup, with the same
user name) and a running job of hers in two of them, when one demo starts and stops her
server and is restarted, then the other hubs' servers, jobs and proxies are the very
processes they were, and still answer. And when her server in one hub is killed from outside,
that hub tells her so on its home page and its spawn page.

Run as root (the workstation creates system accounts, and cgroups, where the hubs once
killed each other's servers, need root); skipped otherwise with that reason. The first run
builds the workstation hub's virtualenv (``make demo-workstation``'s), which takes minutes.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

import psutil
import pytest
import requests

from gpuspawner.core.cgroups import CgroupsUnavailable, detect_hierarchy

from ..support import until
from ..support.hubprocess import REPO_ROOT, BrowserlessUser, DemoHub, copy_log
from ..support.notebooks import notebook_json

pytestmark = pytest.mark.integration

DEMO_ACCOUNTS = ["student1", "student2", "student3", "instructor", "researcher", "admin"]
SERVICES_ACCOUNT = "gpuhub-services"
ARTIFACTS = REPO_ROOT / "test-artifacts" / "integration" / "hubs-side-by-side"
# The workstation hub's virtualenv, kept between runs (its stamp says when to remake it).
WORKSTATION_VENV = REPO_ROOT / ".run" / "workstation-venv"
# Use the checkout as it is set up: neither .venv nor the lab extension is remade.
AS_SET_UP = ("-o", "setup", "-o", "jupyter_to_job/labextension/package.json")
# A job that runs until it is stopped.
LONG_CELL = "import time\nfor _ in range(3600):\n    time.sleep(1)"


def _account_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def needs_root_and_a_readable_checkout() -> None:
    if os.geteuid() != 0:
        pytest.skip(
            "needs root: make demo-workstation creates system accounts and runs each server "
            "and job as its owner, and only root makes the cgroups the hubs share (run the "
            "suite as root, as CI does)"
        )
    if shutil.which("useradd") is None:
        pytest.skip("needs useradd (Debian's passwd package) to create the demo accounts")
    for folder in [REPO_ROOT, *REPO_ROOT.parents]:
        if not folder.stat().st_mode & 0o001:
            pytest.skip(
                f"the workstation hub runs this checkout's code as other accounts, and "
                f"{folder} cannot be crossed by them: clone it outside root's home"
            )


@contextmanager
def three_hubs(request: pytest.FixtureRequest) -> Iterator[tuple[DemoHub, DemoHub, DemoHub]]:
    """Demo A, demo B and the workstation W, launched at once and ready; closed afterwards,
    with the accounts W made removed."""
    names = [*DEMO_ACCOUNTS, SERVICES_ACCOUNT]
    existed = {name for name in names if _account_exists(name)}
    folders = [Path(tempfile.mkdtemp(prefix=f"cgh-side-by-side-{n}-", dir="/tmp")) for n in "abw"]
    for folder in folders:
        folder.chmod(0o711)  # W's people and services cross it to their runtime folder
    hubs = (
        DemoHub("demo", folders[0] / "runtime", make_options=AS_SET_UP),
        DemoHub("demo", folders[1] / "runtime", make_options=AS_SET_UP),
        DemoHub(
            "demo-workstation",
            folders[2] / "runtime",
            make_options=(*AS_SET_UP, f"WORKSTATION_VENV={WORKSTATION_VENV}"),
        ),
    )
    with ExitStack() as stack:
        for folder in folders:
            stack.callback(shutil.rmtree, folder, ignore_errors=True)
        stack.callback(remove_accounts, [name for name in names if name not in existed])
        for hub in hubs:
            stack.callback(remove_empty_cgroups, hub)
            stack.callback(hub.close)
            hub.launch()
        try:
            for hub in hubs:
                hub.wait_ready(timeout=900 if hub.target == "demo-workstation" else 120)
            yield hubs
        finally:
            report = getattr(request.node, "report_call", None)
            if report is None or report.failed:
                for name, hub in zip("abw", hubs, strict=True):
                    print(f"--- {copy_log(hub, ARTIFACTS / f'hub-{name}.log')} ---")  # type: ignore[arg-type]
                    print(hub.log_tail(80))


def remove_empty_cgroups(hub: DemoHub) -> None:
    """The groups of the jobs the test ended itself (jobs outlive their hub, so nobody else
    removes them): the hub's folder and what it holds, if empty (rmdir never kills)."""
    id_file = hub.runtime / "hub-instance-id"
    if not id_file.is_file():
        return
    try:
        hierarchy = detect_hierarchy(hub_id=id_file.read_text().strip())
    except CgroupsUnavailable:
        return
    for controller in hierarchy.bases:
        folder = hierarchy.hub_folder(controller)
        for group in folder.glob("*/") if folder.is_dir() else []:
            with suppress(OSError):
                group.rmdir()
        with suppress(OSError):
            folder.rmdir()


def remove_accounts(names: list[str]) -> None:
    for name in names:
        if _account_exists(name):
            subprocess.run(["userdel", "--remove", name], capture_output=True, check=False)


# -- what a person and the test see of one hub --------------------------------------------


class Student:
    """student1 in front of one hub: her course server, its contents, her jobs."""

    def __init__(self, hub: DemoHub, name: str = "student1"):
        self.hub = hub
        self.user = BrowserlessUser(hub, name)  # type: ignore[arg-type]
        self.user.login()

    def start_course_server(self) -> None:
        answer = self.user.spawn_via_api({"profile": "gpu-demo"})
        assert answer.status_code in (201, 202), answer.text
        self.user.wait_ready()

    def request(self, method: str, path: str, **kwargs) -> requests.Response:
        headers = {"Authorization": f"token {self.user.token}"}
        return requests.request(
            method, self.user.server_url() + path, headers=headers, timeout=60, **kwargs
        )

    def server_answers(self) -> bool:
        return self.request("GET", "api/status").status_code == 200

    def start_long_job(self) -> str:
        content = notebook_json(LONG_CELL)
        saved = self.request(
            "PUT", "api/contents/long.ipynb", json={"type": "notebook", "content": content}
        )
        assert saved.status_code in (200, 201), saved.text
        created = self.request(
            "POST",
            "jupyter-to-job/api/jobs",
            json={"input_path": "long.ipynb", "flavor": "cpu-job"},
        )
        assert created.status_code == 201, created.text
        job_id = created.json()["job_id"]
        until(lambda: self.job_status(job_id) == "RUNNING", f"job {job_id} to run")
        return job_id

    def job_status(self, job_id: str) -> str:
        answer = self.request("GET", f"jupyter-to-job/api/jobs/{job_id}")
        assert answer.status_code == 200, answer.text
        return answer.json()["status"]


def identity(process: psutil.Process) -> tuple[int, float]:
    """A process as a pid alone cannot say: pid and start time."""
    return process.pid, process.create_time()


def server_process(hub: DemoHub, user: str = "student1") -> psutil.Process:
    """``user``'s single-user server of ``hub`` (its environment names the hub's API)."""
    api = f":{hub.ports['GPUSPAWNER_DEMO_HUB_PORT']}/"
    for process in psutil.process_iter(["cmdline"]):
        if "jupyterhub-singleuser" not in " ".join(process.info["cmdline"] or []):
            continue
        try:
            environment = process.environ()
        except psutil.Error:
            continue
        if environment.get("JUPYTERHUB_USER") == user and api in environment.get(
            "JUPYTERHUB_API_URL", ""
        ):
            return process
    raise AssertionError(f"no server process of {user} in the hub at {hub.url}")


def job_process(job_id: str) -> psutil.Process:
    """The runner of job ``job_id`` (its command line names the job's folder; a warm
    runner's, its environment)."""
    for process in psutil.process_iter(["cmdline"]):
        try:
            command = " ".join(process.info["cmdline"] or [])
            if "jupyter_to_job.runner" in command and (
                job_id in command or process.environ().get("JUPYTER_TO_JOB_ID") == job_id
            ):
                return process
        except psutil.Error:
            continue
    raise AssertionError(f"no runner process of job {job_id}")


def proxy_process(hub: DemoHub) -> psutil.Process:
    """The hub's configurable-http-proxy, from the pid file in its runtime folder."""
    pid_file = hub.runtime / "jupyterhub-proxy.pid"
    assert pid_file.is_file(), f"{pid_file} is missing: the proxy's pid file is elsewhere"
    return psutil.Process(int(pid_file.read_text()))


def running(process_identity: tuple[int, float]) -> bool:
    pid, start = process_identity
    try:
        process = psutil.Process(pid)
        return process.create_time() == start and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# -- the scenario ---------------------------------------------------------------------------


def test_demos_and_a_workstation_hub_never_touch_each_others_servers_jobs_or_proxies(request):
    needs_root_and_a_readable_checkout()
    with three_hubs(request) as (a, b, w):
        # Given student1's course server in each hub, and a running job of hers in A and W
        students = {hub: Student(hub) for hub in (a, b, w)}
        for hub in (a, b, w):
            students[hub].start_course_server()
        jobs = {hub: students[hub].start_long_job() for hub in (a, w)}
        kept = {
            hub: {
                "server": identity(server_process(hub)),
                "proxy": identity(proxy_process(hub)),
                "job": identity(job_process(jobs[hub])),
            }
            for hub in (a, w)
        }
        # Each hub has its own id, in its runtime folder, and runs her server in a cgroup of
        # that id: the same user's group in three hubs, where they once shared one
        ids = {hub: (hub.runtime / "hub-instance-id").read_text().strip() for hub in (a, b, w)}
        assert len(set(ids.values())) == 3
        for hub in (a, b, w):
            groups = Path(f"/proc/{server_process(hub).pid}/cgroup").read_text()
            assert f"/campus-gpu-hub/{ids[hub]}/server-student1" in groups
        # ... and its job service, handed the hub's id, its jobs in the same hub's folder
        for hub in (a, w):
            groups = Path(f"/proc/{kept[hub]['job'][0]}/cgroup").read_text()
            assert f"/campus-gpu-hub/{ids[hub]}/job-{jobs[hub]}" in groups

        # When demo B stops student1's server, starts it again, and is restarted
        students[b].user.stop_server()
        students[b].start_course_server()
        b.restart()
        students[b] = Student(b)
        students[b].start_course_server()
        students[b].user.stop_server()

        # Then A's and W's servers, jobs and proxies are the very processes they were
        for hub in (a, w):
            assert running(kept[hub]["server"]), f"student1's server in {hub.url} was killed"
            assert running(kept[hub]["proxy"]), f"the proxy of {hub.url} was killed"
            assert running(kept[hub]["job"]), f"student1's job in {hub.url} was killed"
            assert identity(proxy_process(hub)) == kept[hub]["proxy"]
            # ... and still answer: the server through its hub's proxy, the job's API
            assert students[hub].server_answers()
            assert students[hub].job_status(jobs[hub]) == "RUNNING"

        # When student1's server in A is killed from outside any hub
        os.kill(kept[a]["server"][0], signal.SIGKILL)

        # Then A tells her so on its home page (the page's own poll notices) and when she
        # starts again; W's server is untouched
        student = students[a].user

        def home_notice() -> str | None:
            page = student.session.get(f"{a.url}/hub/home", timeout=60)
            return page.text if "server-stop-notice" in page.text else None

        home = until(home_notice, "A's home page to say student1's server was killed")
        assert "stopped from outside the hub" in home
        assert "SIGKILL, signal 9" in home
        spawn_page = student.get_spawn_page()
        assert "stopped from outside the hub" in spawn_page.text
        assert running(kept[w]["server"])
        assert students[w].server_answers()
