"""A student tries, from inside a job and from inside their own server, to reach what is not
theirs on the shared workstation (hub_config/workstation), and to use more than their share.

Given the real workstation hub (real system accounts, LocalGPUSpawner, the job service
running jobs as their owners, cgroup limits), student2 has a server, a private file and a
finished job; student1 then runs a probe notebook as a job and in a kernel of their server.
"""

from __future__ import annotations

import json
import os
import pwd
import re
from pathlib import Path
from typing import Any

import psutil
import pytest

from gpuspawner.core.cgroups import CgroupsUnavailable, detect_hierarchy

from ..support import until
from ..support.hubprocess import RunningHub
from ..support.kernels import KernelError, run_in_kernel
from ..support.notebooks import notebook_json
from .student import Student

pytestmark = pytest.mark.integration


# Runs as a job cell and in a kernel: what can this process read, write, create and list?
PROBE = r"""
import json, os
P = json.loads({paths!r})

def can_read(path):
    try:
        with open(path, "rb") as stream:
            stream.read(1)
        return True
    except OSError:
        return False

def can_write(path):
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
        return True
    except OSError:
        return False

def can_create(folder):
    name = os.path.join(folder, ".probe-%d" % os.getpid())
    try:
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError:
        return False
    os.unlink(name)
    return True

def can_list(folder):
    try:
        os.listdir(folder)
        return True
    except OSError:
        return False

def owner_of(pid):
    try:
        with open("/proc/%s/status" % pid) as status:
            return int(next(l for l in status if l.startswith("Uid:")).split()[1])
    except (OSError, StopIteration):
        return None

environs = [p for p in os.listdir("/proc") if p.isdigit() and can_read("/proc/%s/environ" % p)]
print("PROBE " + json.dumps({{
    "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "cwd": os.getcwd(),
    "home": os.environ.get("HOME"), "env": sorted(os.environ),
    "read": {{p: can_read(p) for p in P["read"]}},
    "write": {{p: can_write(p) for p in P["write"]}},
    "create": {{p: can_create(p) for p in P["create"]}},
    "list": {{p: can_list(p) for p in P["list"]}},
    "environ_owners": sorted({{owner_of(p) for p in environs}} - {{None}}),
}}))
"""


def _service_pid(marker: str) -> int:
    for process in psutil.process_iter(["cmdline"]):
        if marker in " ".join(process.info["cmdline"] or []):
            return process.pid
    raise AssertionError(f"no process running {marker}")


def probe_report(output: str) -> dict:
    match = re.search(r"PROBE (\{.*\})", output)
    assert match, f"the probe printed no report: {output[-2000:]}"
    return json.loads(match.group(1))


@pytest.fixture(scope="module")
def students(workstation: RunningHub) -> dict[str, Any]:
    """student2 with a server, a private file and a finished job; student1 with a server."""
    second = Student(workstation, "student2")
    second.start_course_server()
    second.save("private.txt", {"type": "file", "format": "text", "content": "student2 only"})
    second.save_notebook("hello/hello.ipynb", notebook_json("print('hello from student2')"))
    finished = second.run_job("hello/hello.ipynb", "cpu-job")
    assert finished["status"] == "COMPLETED", finished
    first = Student(workstation, "student1")
    first.start_course_server()
    return {"student1": first, "student2": second, "second_job": finished["job_id"]}


def forbidden_paths(hub: RunningHub, students: dict[str, Any]) -> dict[str, list[str]]:
    """What student1 must not reach: the services', the hub's and student2's."""
    runtime: Path = hub.runtime  # type: ignore[attr-defined]
    jobs = runtime / "jobs"
    other_job = students["second_job"]
    other_home = students["student2"].account.pw_dir
    environs = [
        f"/proc/{pid}/environ"
        for pid in (
            hub.pid,
            _service_pid("jupyter_to_job.service"),
            _service_pid("gpuspawner.sessions"),
            students["student2"].server_process().pid,
        )
    ]
    read = [
        str(runtime / "jupyterhub_cookie_secret"),
        str(runtime / "jupyterhub.sqlite"),
        str(runtime / "gpu-allocations.json"),
        str(runtime / "prewarm-secret"),
        str(jobs / "jobs.sqlite"),
        str(jobs / "identities.json"),
        str(jobs / "logs" / f"{other_job}.log"),
        str(jobs / "jobs" / other_job / "input.ipynb"),
        str(jobs / "jobs" / other_job / "output.ipynb"),
        f"{other_home}/private.txt",
        *environs,
    ]
    for path in read:  # as root: each one is there, so "cannot read" means something
        assert os.path.exists(path), f"{path} should exist for this scenario"
    return {
        "read": read,
        "write": [
            str(runtime / "gpu-allocations.json"),
            str(runtime / "gpu-allocations.json.lock"),
            str(jobs / "jobs.sqlite"),
            str(jobs / "logs" / f"{other_job}.log"),
            f"{other_home}/private.txt",
        ],
        "create": [str(runtime), str(jobs), str(jobs / "jobs"), str(jobs / "logs"), other_home],
        "list": [
            str(runtime),
            str(jobs / "jobs"),
            str(jobs / "logs"),
            str(jobs / "jobs" / other_job),
            str(runtime / "course-sessions"),
            other_home,
        ],
    }


def assert_confined(report: dict, student: Student, paths: dict[str, list[str]]) -> None:
    uid = student.account.pw_uid
    assert (report["uid"], report["euid"]) == (uid, uid), report
    assert report["gid"] == student.account.pw_gid
    assert report["home"] == student.account.pw_dir
    for kind in ("read", "write", "create", "list"):
        reached = [path for path, ok in report[kind].items() if ok]
        assert reached == [], f"student1 could {kind}: {reached}"
    # The only process environments it could read are its own account's.
    assert report["environ_owners"] == [uid], report["environ_owners"]


def test_a_students_job_runs_as_them_beside_the_notebook_and_reaches_nothing_else(
    workstation, students
):
    # Given student1's probe notebook in a folder of their home
    student = students["student1"]
    paths = forbidden_paths(workstation, students)
    student.save_notebook(
        "probe/probe.ipynb",
        notebook_json(
            PROBE.format(paths=json.dumps(paths)),
            "with open('results.csv', 'w') as out:\n    out.write('epoch,loss\\n1,0.5\\n')",
        ),
    )

    # When they run it as a job
    job = student.run_job("probe/probe.ipynb", "cpu-job")

    # Then it ran as student1, in the notebook's folder, with no service's token
    assert job["status"] == "COMPLETED", job
    report = probe_report(student.job_log(job["job_id"]))
    assert report["cwd"] == os.path.join(student.account.pw_dir, "probe")
    assert "JUPYTERHUB_API_TOKEN" not in report["env"]
    # and reached nothing of the hub's, the services' or student2's
    assert_confined(report, student, paths)
    # and the file it wrote is beside the notebook, student1's own
    results = Path(student.account.pw_dir) / "probe" / "results.csv"
    assert results.read_text() == "epoch,loss\n1,0.5\n"
    assert results.stat().st_uid == student.account.pw_uid
    # and the executed notebook is still served through the API
    executed = student.request("GET", f"jupyter-to-job/api/jobs/{job['job_id']}/outputs/ipynb")
    assert executed.status_code == 200
    assert "PROBE" in executed.text
    # while its folder in the job store is student1's alone
    job_dir = workstation.runtime / "jobs" / "jobs" / job["job_id"]  # type: ignore[attr-defined]
    info = job_dir.stat()
    assert (info.st_uid, info.st_mode & 0o777) == (student.account.pw_uid, 0o700)


def test_a_students_server_runs_as_them_and_reaches_nothing_else(workstation, students):
    # Given student1's running server
    student = students["student1"]
    paths = forbidden_paths(workstation, students)
    assert student.server_process().uids().real == student.account.pw_uid

    # When code in one of its kernels probes the machine
    output = run_in_kernel(
        student.user.server_url(), student.user.token, PROBE.format(paths=json.dumps(paths))
    )

    # Then it runs as student1 and reaches nothing of the hub's, the services' or student2's
    report = probe_report(output)
    assert report["cwd"] == student.account.pw_dir
    assert_confined(report, student, paths)


def test_the_services_keep_their_files_private(workstation, students):
    # The job store, its logs and the ledger are the services' alone (0600/0700)
    runtime: Path = workstation.runtime  # type: ignore[attr-defined]
    private = {
        runtime / "jupyterhub.sqlite": 0o600,
        runtime / "jupyterhub_cookie_secret": 0o600,
        runtime / "gpu-allocations.json": 0o600,
        runtime / "prewarm-secret": 0o600,
        runtime / "jobs" / "jobs.sqlite": 0o600,
        runtime / "jobs" / "logs": 0o700,
        runtime / "jobs" / "logs" / f"{students['second_job']}.log": 0o600,
    }
    modes = {str(path): oct(path.stat().st_mode & 0o777) for path in private}
    assert modes == {str(path): oct(mode) for path, mode in private.items()}
    # and the course-sessions service runs as its own account, not root
    sessions = psutil.Process(_service_pid("gpuspawner.sessions"))
    assert pwd.getpwuid(sessions.uids().real).pw_name == "gpuhub-services"

    # and no secret is on any command line (those every account can read)
    jobs = psutil.Process(_service_pid("jupyter_to_job.service"))
    secrets = {
        "job service token": jobs.environ()["JUPYTERHUB_API_TOKEN"],
        "sessions token": sessions.environ()["JUPYTERHUB_API_TOKEN"],
        "pre-warm secret": (runtime / "prewarm-secret").read_text().strip(),
        "cookie secret": (runtime / "jupyterhub_cookie_secret").read_text().strip(),
    }
    assert all(len(value) >= 16 for value in secrets.values()), "a secret was not found"
    exposed = {
        (name, process.pid)
        for process in psutil.process_iter(["cmdline"])
        for name, value in secrets.items()
        if value in " ".join(process.info["cmdline"] or [])
    }
    assert exposed == set()


def _needs_cgroups() -> None:
    try:
        detect_hierarchy()
    except CgroupsUnavailable as error:
        pytest.skip(f"needs cgroups to enforce limits: {error}")


def test_a_job_past_its_memory_ends_failed_out_of_memory_with_its_earlier_log(
    workstation, students
):
    _needs_cgroups()
    # Given a notebook that prints, then allocates 1 GiB, under a 512 MiB flavor
    student = students["student1"]
    student.save_notebook(
        "limits/memory.ipynb",
        notebook_json(
            "print('before the allocation', flush=True)",
            "block = bytearray(b'x') * (1024 ** 3)\nprint('allocated', len(block))",
        ),
    )

    # When it runs as a job
    job = student.run_job("limits/memory.ipynb", "half-gig")

    # Then it failed as out of memory, and the log keeps what it printed before
    assert job["status"] == "FAILED", job
    assert "out of memory" in job["status_message"], job["status_message"]
    assert "512 MiB" in job["status_message"]
    assert job["error"]["ename"] == "OutOfMemory"
    log = student.job_log(job["job_id"])
    assert "before the allocation" in log
    assert "allocated" not in log.replace("before the allocation", "")


def test_a_job_of_a_one_cpu_flavor_cannot_use_two_cores(workstation, students):
    _needs_cgroups()
    # Given a notebook that keeps four processes busy and measures the CPU time they got
    student = students["student1"]
    burn = """\
import multiprocessing, os, time

def burn(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass

before, start = os.times(), time.monotonic()
workers = [multiprocessing.Process(target=burn, args=(3,)) for _ in range(4)]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join()
after, wall = os.times(), time.monotonic() - start
used = (after.children_user - before.children_user) + (after.children_system - before.children_system)
print(f"CORES_USED {used / wall:.3f}")
"""
    student.save_notebook("limits/cpu.ipynb", notebook_json(burn))

    # When it runs as a job of the one-CPU flavor
    job = student.run_job("limits/cpu.ipynb", "one-cpu")

    # Then its processes together got at most one core's time (a quota of 100 ms per
    # 100 ms period; the slack covers the last period), where this machine has two
    assert os.cpu_count() >= 2
    assert job["status"] == "COMPLETED", job
    cores = float(re.search(r"CORES_USED ([0-9.]+)", student.job_log(job["job_id"])).group(1))
    assert cores <= 1.1, f"four busy processes used {cores} cores under a one-CPU limit"


def test_a_server_past_its_memory_is_stopped_and_the_spawn_page_says_why(workstation, students):
    _needs_cgroups()
    # Given student3's course server, whose profile has 2 GiB of memory
    student = Student(workstation, "student3")
    student.start_course_server()

    # When code in it allocates 3 GiB
    with pytest.raises(KernelError):
        run_in_kernel(
            student.user.server_url(),
            student.user.token,
            "block = bytearray(b'x') * (3 * 1024 ** 3)\nprint('allocated')",
        )

    # Then the server is stopped as a whole, and the next spawn page says why
    until(lambda: "" not in student.user.model()["servers"], "the hub to see the server end")
    page = student.user.get_spawn_page()
    assert page.status_code == 200
    assert "used more than its memory limit of 2 GiB" in page.text
    # and starting again works, without the notice
    student.start_course_server()
    assert student.server_process().uids().real == student.account.pw_uid


def test_a_link_left_in_a_jobs_folder_does_not_make_the_service_read_for_the_student(
    workstation, students
):
    # Given a finished job of student1
    student = students["student1"]
    student.save_notebook("links/plain.ipynb", notebook_json("print('plain')"))
    job = student.run_job("links/plain.ipynb", "cpu-job")
    assert job["status"] == "COMPLETED", job
    runtime: Path = workstation.runtime  # type: ignore[attr-defined]
    output = runtime / "jobs" / "jobs" / job["job_id"] / "output.ipynb"
    secret = runtime / "jupyterhub_cookie_secret"

    # When, from their server, they swap the job's output for a link to the cookie secret
    run_in_kernel(
        student.user.server_url(),
        student.user.token,
        f"import os\nos.remove({str(output)!r})\nos.symlink({str(secret)!r}, {str(output)!r})",
    )
    assert output.is_symlink()

    # Then the service (root) does not follow it: no output, and no secret
    answer = student.request("GET", f"jupyter-to-job/api/jobs/{job['job_id']}/outputs/ipynb")
    assert answer.status_code == 404, answer.text
    assert secret.read_text().strip() not in answer.text
    listed = student.request("GET", f"jupyter-to-job/api/jobs/{job['job_id']}").json()
    assert "ipynb" not in [output["format"] for output in listed["outputs"]]
