"""The embedded default: a local JupyterHub with demo users, LocalGPUSpawner and simulated GPUs.

Start it with ``make demo`` (http://127.0.0.1:8000). Log in as one of the demo
users below with any password: the dummy authenticator checks none. It is for
trying the hub out on your own machine only.

``hub_config/sso/`` (``make demo-sso``) runs this same hub with campus single sign-on
instead (``GPUSPAWNER_DEMO_AUTH=sso``): people, their groups and the demo course's
enrolment then come from the identity provider.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
from datetime import UTC, datetime, timedelta
from pathlib import Path

import gpuspawner
from gpuspawner.core.hub_instance import HUB_ID_VARIABLE, hub_instance_id
from gpuspawner.persistent_secret import persistent_secret
from gpuspawner.policy import load_catalog
from gpuspawner.policy.roles import course_roles
from gpuspawner.sessions import course_sessions_service, sessions_service_role
from gpuspawner.sessions.registration import reclaim_access_scopes, with_reclaim_access
from jupyter_to_job.hub import (
    job_server_token_scopes,
    job_service,
    job_service_roles,
    job_service_url,
)
from jupyter_to_job.scopes import hub_custom_scopes

c = get_config()  # noqa: F821

HERE = Path(__file__).resolve().parent
# Every file the demo writes while it runs lives here (database, cookie secret, the proxy's
# pid file, ledger, job store, logs, sockets), so demos with other runtime folders and ports
# run side by side without touching each other.
RUNTIME = Path(os.environ.get("GPUSPAWNER_DEMO_RUNTIME") or Path.cwd()).resolve()
CATALOG = RUNTIME / "catalog"
# This hub instance's id, kept in its runtime folder: its servers' and jobs' cgroups carry it,
# so it never kills another hub's processes (gpuspawner/core/hub_instance.py).
HUB_ID = hub_instance_id(RUNTIME)
# "sso": hub_config/sso/ sets up the authenticator; enrolment comes from its groups.
SSO = os.environ.get("GPUSPAWNER_DEMO_AUTH") == "sso"

STUDENTS = ["student1", "student2", "student3"]
INSTRUCTOR = "instructor"
RESEARCHER = "researcher"
ADMIN = "admin"


def course_venv(folder: Path) -> Path:
    """The demo's second Python environment, made once: a venv (with the system's
    site-packages) that also sees the hub's packages through a ``.pth`` file, with the
    ``jupyterhub-singleuser`` launcher and JupyterLab's data and settings folders (links to
    the hub's) an install would give it. A real hub points the
    catalog's ``python:`` at environments installed for the course instead."""
    launcher = folder / "bin" / "jupyterhub-singleuser"
    if launcher.is_file():
        return folder
    # Readable by every account: hub_config/workstation runs servers as their owners.
    umask = os.umask(0o022)
    try:
        _make_course_venv(folder, launcher)
    finally:
        os.umask(umask)
    return folder


def _make_course_venv(folder: Path, launcher: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(folder)],
        check=True,
    )
    python = folder / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "demo-hub-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    launcher.write_text(
        f"#!{python}\nimport sys\nfrom jupyterhub.singleuser import main\nsys.exit(main())\n"
    )
    launcher.chmod(0o755)
    # JupyterLab's pages and its server extension's settings, as an install would put them.
    for shared in ("share/jupyter", "etc/jupyter"):
        (folder / shared).parent.mkdir(parents=True, exist_ok=True)
        (folder / shared).symlink_to(Path(sys.prefix, shared), target_is_directory=True)


def demo_environments(venv: Path) -> str:
    """Two environments the demo course offers: the hub's own Python (the default) and
    the course venv, to choose between on its spawn card."""
    return f"""\
environments:
  - id: standard
    title: Standard Python
    description: The hub's own Python environment.
    contains: [JupyterLab 4, Run as Job]
    python: {sys.prefix}
  - id: course-venv
    title: Course virtual environment
    description: A separate venv for the course's exercises.
    contains: [Python 3, JupyterLab 4]
    python: {venv}
"""


def demo_course(now: datetime, by_name: bool = True) -> str:
    """A course whose class window is open now: it began 15 minutes ago and runs 3 hours.

    ``by_name``: the demo users are its instructor and students; otherwise only its course
    groups (course-gpu-demo-students, course-gpu-demo-instructors) say who they are.
    """
    start = (now - timedelta(minutes=15)).replace(second=0, microsecond=0)
    end = start + timedelta(hours=3)
    overnight = ", overnight: true" if end.time() < start.time() else ""  # a class past midnight
    people = (
        f"""\
    instructors: [{INSTRUCTOR}]
    enrolment:
      users: [{", ".join(STUDENTS)}]
"""
        if by_name
        else ""
    )
    return f"""\
courses:
  - id: gpu-demo
    title: GPU demo course
    description: Open whenever the demo starts, so you can try a course server right away.
{people}    resources: {{cpu: 1, memory: 2GiB}}
    gpu: {{fraction: 1/4, memory: 6GiB, compute: {{min: 25, max: 100}}}}
    max_gpu_servers: 6
    budget: {{gpu_hours_per_student_per_week: 6}}
    schedule:
      timezone: UTC
      term: {{first_day: {start.date()}, last_day: {(start + timedelta(days=120)).date()}}}
      windows:
        - {{day: {start:%a}, start: "{start:%H:%M}", end: "{end:%H:%M}"{overnight}}}
      lead_time: 10m
      grace: 10m
    reclaim: {{idle_after: 30m, warning: 10m, keep_once: true}}
    environments: [standard, course-venv]
flavors:
  - id: quarter-gpu
    title: A quarter GPU
    description: Run a course notebook as a job on a quarter of a GPU.
    gpu: {{fraction: 1/4, memory: 6GiB}}
    default_deadline: 30m
    max_deadline: 2h
    access: {{courses: [gpu-demo, ml101]}}
"""


# The catalog in force: the demo catalog plus the always-open demo course.
CATALOG.mkdir(parents=True, exist_ok=True)
shutil.copyfile(HERE / "catalog.yaml", CATALOG / "catalog.yaml")
(CATALOG / "gpu-demo.yaml").write_text(demo_course(datetime.now(UTC), by_name=not SSO))
(CATALOG / "environments.yaml").write_text(demo_environments(course_venv(RUNTIME / "course-venv")))

# -- authentication: demo only --------------------------------------------------------
if not SSO:
    c.JupyterHub.authenticator_class = "dummy"
    c.Authenticator.allowed_users = set(STUDENTS + [INSTRUCTOR, RESEARCHER, ADMIN])
    c.Authenticator.admin_users = {ADMIN}
    c.JupyterHub.load_groups = {
        "ml101-students": {"users": STUDENTS},
        "instructors": {"users": [INSTRUCTOR]},
        "researchers": {"users": [RESEARCHER]},
    }
    print(
        "WARNING: demo hub. Anyone can log in as "
        + ", ".join(sorted(c.Authenticator.allowed_users))
        + " with any password. Do not expose it beyond this machine.",
        file=sys.stderr,
    )

# -- the hub ----------------------------------------------------------------------------
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = int(os.environ.get("GPUSPAWNER_DEMO_PORT", "8000"))
c.JupyterHub.hub_port = int(os.environ.get("GPUSPAWNER_DEMO_HUB_PORT", "8081"))
c.ConfigurableHTTPProxy.api_url = (
    f"http://127.0.0.1:{int(os.environ.get('GPUSPAWNER_DEMO_PROXY_API_PORT', '8001'))}"
)
c.JupyterHub.db_url = f"sqlite:///{RUNTIME / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(RUNTIME / "jupyterhub_cookie_secret")
# Not the current folder's: a hub that finds a pid file stops the proxy it names.
c.ConfigurableHTTPProxy.pid_file = str(RUNTIME / "jupyterhub-proxy.pid")
c.CgroupLimits.hub_id = HUB_ID
node_bin = HERE.parent.parent / "node_modules" / ".bin" / "configurable-http-proxy"
if node_bin.exists():
    c.ConfigurableHTTPProxy.command = [str(node_bin)]

# Every server, job and kernel runs as the hub's own account: anyone signed in can read
# everyone's files and the hub's secrets. Say so on every page.
NO_ISOLATION = (
    "Demo hub: every user's server and jobs run as one system account, with no isolation "
    "between users. For a machine shared by real people, use hub_config/workstation "
    "(make demo-workstation)."
)
c.JupyterHub.template_vars = {"announcement": NO_ISOLATION, "reclaim_service": "course-sessions"}
# A link to the GPU map page on the home page (templates/home.html).
c.JupyterHub.template_vars["gpu_map_service"] = "course-sessions"
# ... and, for people who teach, to the course page (the service's courses).
c.JupyterHub.template_vars["course_page_service"] = "course-sessions"

# -- the spawner ----------------------------------------------------------------------------
c.JupyterHub.spawner_class = "gpuspawner.local.SimpleLocalGPUSpawner"
# The hub's one admission: every start is a Grant from it (the job service gets the same
# settings below, through job_service()).
c.GPUAdmission.catalog_path = str(CATALOG)
c.GPUAdmission.simulated_gpus = [{"model": "RTX 4090", "memory": "24GiB", "count": 2}]
# Shared with the job service, so servers and jobs never get the same GPU slice.
c.GPUAdmission.allocation_ledger = str(RUNTIME / "gpu-allocations.json")
# GPU-hours of every server and job, for `gpuspawner usage`, the course API's api/usage and
# the catalog's budgets; the job service and the course-sessions service get it below.
c.GPUAdmission.usage_db_url = f"sqlite:///{RUNTIME / 'gpu-usage.sqlite'}"
# The experimental zone's folder (the catalog's try-out profile links ~/experimental into
# it); the course-sessions service wipes it every day.
c.GPUAdmission.experimental_root = str(RUNTIME / "experimental")
c.SimpleLocalGPUSpawner.home_dir_template = str(RUNTIME / "homes" / "{username}")
# The single-user server from the hub's own environment, whatever PATH says.
c.Spawner.cmd = [str(Path(sys.executable).parent / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.http_timeout = 60
if not isinstance(c.Spawner.args, list):  # unless a wrapping configuration began it
    c.Spawner.args = []
if os.geteuid() == 0:
    c.Spawner.args.append("--allow-root")

# -- the course-sessions service: pre-warm before class, reclaim after grace -------------
# Kept in the runtime folder (mode 0600), so it stays the same when the hub restarts.
prewarm_secret = os.environ.get("GPUSPAWNER_PREWARM_SECRET") or persistent_secret(
    RUNTIME / "prewarm-secret"
)
c.GPUAdmission.prewarm_secret = prewarm_secret
# It also answers the instructors' course API (list and stop their course's servers).
SESSIONS_PORT = int(os.environ.get("GPUSPAWNER_DEMO_SESSIONS_PORT", "8767"))
# The job service's port (Run as Job, below): the course page lists students' jobs.
JOB_SERVICE_PORT = int(os.environ.get("GPUSPAWNER_DEMO_JOBS_PORT", "8766"))
# Lists a wrapping configuration may have begun (hub_config/workstation, a test harness).
for listed in ("services", "load_roles"):
    if not isinstance(c.JupyterHub[listed], list):
        c.JupyterHub[listed] = []
# It reclaims idle GPU shares too: the ledger says who holds which simulated GPU, and
# simulated readings (a JSON file, empty until written) say how busy each one is.
GPU_READINGS = os.environ.get("GPUSPAWNER_DEMO_GPU_READINGS") or str(RUNTIME / "gpu-readings.json")
SESSIONS_SERVICE = course_sessions_service(
    str(CATALOG),
    prewarm_secret=prewarm_secret,
    interval=float(os.environ.get("GPUSPAWNER_DEMO_SESSIONS_INTERVAL", "30")),
    audit_log=str(RUNTIME / "course-sessions.jsonl"),
    port=SESSIONS_PORT,
    usage_db_url=c.GPUAdmission.usage_db_url,
    allocation_ledger=str(RUNTIME / "gpu-allocations.json"),
    gpu_readings=GPU_READINGS,
    # ... and shows who holds which slice: the GPU map page, in the Services menu.
    simulated_gpus=c.GPUAdmission.simulated_gpus,
    job_service_url=job_service_url(JOB_SERVICE_PORT),
    experimental_root=c.GPUAdmission.experimental_root,
)
SESSIONS_SERVICE.setdefault("environment", {})[HUB_ID_VARIABLE] = HUB_ID
c.JupyterHub.services.append(SESSIONS_SERVICE)
c.JupyterHub.load_roles.append(sessions_service_role(job_service="jupyter-to-job"))
# Reclaim warnings on the home page (templates/home.html) and in JupyterLab.
c.JupyterHub.template_paths = [str(Path(gpuspawner.__file__).parent / "templates")]

# -- Run as Job: the job service, its scopes and roles, and each server's token ----------
# The service owns the job store and runs jobs as local processes, apart from the servers:
# jobs survive their owner's server being stopped. It shares the spawner's GPUs and
# allocation ledger, so a job never gets a slice a server holds.
c.JupyterHub.custom_scopes = hub_custom_scopes()
JOB_SERVICE = job_service(
    port=JOB_SERVICE_PORT,
    catalog_path=c.GPUAdmission.catalog_path,
    root_dir=str(RUNTIME / "jobs"),
    simulated_gpus=c.GPUAdmission.simulated_gpus,
    allocation_ledger=c.GPUAdmission.allocation_ledger,
    usage_db_url=c.GPUAdmission.usage_db_url,
    # Jobs start in their notebook's folder, so what a notebook writes lands beside it.
    notebook_dir_template=c.SimpleLocalGPUSpawner.home_dir_template,
    hub_id=HUB_ID,
)
c.JupyterHub.services.append(JOB_SERVICE)
# Every user: Run as Job on their own notebooks; the admin: every user's jobs.
c.JupyterHub.load_roles.extend(job_service_roles(admins=[] if SSO else [ADMIN]))
# ... and read their own reclaim warnings (home page, and their servers for JupyterLab).
c.JupyterHub.load_roles = with_reclaim_access(c.JupyterHub.load_roles)
# Each course's instructors see and stop their students' servers (the hub's admin page and
# the course API) and read their jobs. Roles are loaded at start: restart the hub after
# adding a course.
c.JupyterHub.load_roles.extend(course_roles(load_catalog(CATALOG)))
# Each server's $JUPYTERHUB_API_TOKEN may call the service, for its own user only.
c.Spawner.server_token_scopes = job_server_token_scopes() + reclaim_access_scopes()
c.Spawner.environment.update(
    {
        "JUPYTER_TO_JOB_SERVICE_URL": job_service_url(JOB_SERVICE_PORT),
        "COURSE_SESSIONS_SERVICE_URL": (
            f"http://127.0.0.1:{SESSIONS_PORT}/services/course-sessions/"
        ),
    }
)
# The wheel enables the server extension (etc/jupyter/jupyter_server_config.d); an
# editable install (make setup) does not install that file, so enable it here too.
c.Spawner.args.append("--ServerApp.jpserver_extensions=jupyter_to_job=True")
