"""The demo hub for the browser tests: hub_config/local/jupyterhub_config.py (or, for the
SSO tests, hub_config/sso/jupyterhub_config.py), unchanged, plus what a test run needs on
a machine where other hubs may run.

Playwright starts it (the ``hub`` webServer in playwright.config.js) from a fresh runtime
folder, ``$GPUSPAWNER_DEMO_RUNTIME`` (.run/ui-hub-tests/). On top of the demo settings:

- every port is free, picked by playwright.config.js: the public one
  (``GPUSPAWNER_DEMO_PORT``), the job service's (``GPUSPAWNER_DEMO_JOBS_PORT``), the
  course-sessions service's (``GPUSPAWNER_DEMO_SESSIONS_PORT``), the hub API's and the
  proxy API's (``UI_HUB_API_PORT``, ``UI_HUB_PROXY_API_PORT``), and with SSO the campus
  provider's (``CAMPUS_IDP_PORT``);
- the single-user servers load Run as Job's JupyterLab extension as last built in
  jupyter_to_job/labextension/ (an editable install does not put it on Jupyter's path);
- short spawner timeouts, so the hub's shutdown at the end of the run is quick.
"""

import os
from pathlib import Path

c = get_config()  # noqa: F821

REPO = Path(__file__).resolve().parents[2]
# The local demo hub, or (UI_HUB_BASE_CONFIG) the same hub with campus single sign-on,
# hub_config/sso/jupyterhub_config.py, for the `sso` project.
BASE_CONFIG = os.environ.get(
    "UI_HUB_BASE_CONFIG", str(REPO / "hub_config" / "local" / "jupyterhub_config.py")
)
# The course-sessions service's rounds every 2 s, so a reclaim warning comes quickly.
os.environ.setdefault("GPUSPAWNER_DEMO_SESSIONS_INTERVAL", "2")
load_subconfig(BASE_CONFIG)  # noqa: F821

RUNTIME = Path(os.environ["GPUSPAWNER_DEMO_RUNTIME"])
EXTENSION_NAME = "@campus-gpu-hub/jupyter-to-job"
BUILT_EXTENSION = REPO / "jupyter_to_job" / "labextension"

c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(os.environ["UI_HUB_API_PORT"])
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{os.environ['UI_HUB_PROXY_API_PORT']}"

if not (BUILT_EXTENSION / "package.json").is_file():
    raise SystemExit(
        f"The Run as Job extension is not built ({BUILT_EXTENSION} is missing). "
        "Build it first: make labextension"
    )
jupyter_path = RUNTIME / "share" / "jupyter"
linked = jupyter_path / "labextensions" / EXTENSION_NAME
linked.parent.mkdir(parents=True, exist_ok=True)
if linked.is_symlink() or linked.exists():
    linked.unlink()
linked.symlink_to(BUILT_EXTENSION, target_is_directory=True)
c.Spawner.environment.update({"JUPYTER_PATH": str(jupyter_path)})

c.Spawner.start_timeout = 60
c.Spawner.interrupt_timeout = 2
c.Spawner.term_timeout = 3
c.Spawner.kill_timeout = 2

# A quarter-GPU profile that the hub reclaims after a minute without GPU use, warning 10
# minutes ahead (so at once), for the reclaim test (hub-tests/reclaim.spec.ts); only
# members of reclaim-testers see it, so the other tests' spawn pages are unchanged.
if "UI_HUB_BASE_CONFIG" not in os.environ:
    c.JupyterHub.load_groups["reclaim-testers"] = {"users": ["student2", "student3"]}
    (RUNTIME / "catalog" / "idle-gpu.yaml").write_text(
        """\
standing:
  - id: idle-gpu
    title: Idle GPU test profile
    description: A quarter GPU, reclaimed after a minute without GPU use.
    groups: [reclaim-testers]
    gpu: {fraction: 1/4, memory: 6GiB}
    reclaim: {idle_after: 1m, warning: 10m, keep_once: true}
"""
    )

# The course page test (hub-tests/course-page.spec.ts): a course that meets on Mondays all
# term, taught by `instructor` and taken by student1, and another course of `instructor2`,
# who must not touch the first.
if "UI_HUB_BASE_CONFIG" not in os.environ:
    from datetime import UTC, datetime, timedelta

    c.Authenticator.allowed_users.add("instructor2")
    today = datetime.now(UTC).date()
    (RUNTIME / "catalog" / "course-page.yaml").write_text(
        f"""\
courses:
  - id: course-page-demo
    title: Course page demo
    instructors: [instructor]
    enrolment: {{users: [student1]}}
    gpu: {{fraction: 1/4, memory: 6GiB}}
    max_gpu_servers: 4
    schedule:
      timezone: UTC
      term: {{first_day: {today - timedelta(days=1)}, last_day: {today + timedelta(days=60)}}}
      windows:
        - {{day: Mon, start: "10:00", end: "11:00"}}
  - id: other-course
    title: Another instructor's course
    instructors: [instructor2]
    enrolment: {{users: [student2]}}
    schedule:
      timezone: UTC
      term: {{first_day: {today - timedelta(days=1)}, last_day: {today + timedelta(days=60)}}}
      windows:
        - {{day: Tue, start: "10:00", end: "11:00"}}
"""
    )

# The environments test (hub-tests/environments.spec.ts) starts and stops a GPU demo course
# server as student4, a student of that course no other test signs in as: after a stop the
# hub no longer sends that person to the spawn page at login, which other tests expect.
if "UI_HUB_BASE_CONFIG" not in os.environ:
    c.Authenticator.allowed_users.add("student4")
    demo_course = RUNTIME / "catalog" / "gpu-demo.yaml"
    enrolled = demo_course.read_text()
    with_student4 = enrolled.replace(
        "users: [student1, student2, student3]", "users: [student1, student2, student3, student4]"
    )
    if with_student4 == enrolled:
        raise SystemExit(
            "hub_config/local/jupyterhub_config.py no longer enrols student1-3 in the GPU "
            "demo course as this file expects; update the environments test's set-up here."
        )
    demo_course.write_text(with_student4)

# The experimental zone test (hub-tests/zones.spec.ts): the demo zone's daily wipe is set
# to an hour from now, so its 2-hour warning has begun and the course-sessions service
# warns whoever holds data there at its next round (every 2 s here); nothing is wiped
# while the tests run.
if "UI_HUB_BASE_CONFIG" not in os.environ:
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    demo_catalog = RUNTIME / "catalog" / "catalog.yaml"
    wipe_at = datetime.now(ZoneInfo("Europe/Zurich")) + timedelta(hours=1)
    written = demo_catalog.read_text()
    soon = written.replace(
        'experimental_zone: {wipe_at: "03:00", warning: 2h}',
        f'experimental_zone: {{wipe_at: "{wipe_at:%H:%M}", warning: 2h}}',
    )
    if soon == written:
        raise SystemExit(
            "hub_config/local/catalog.yaml no longer has the experimental zone this file "
            "moves; update the zone test's set-up here."
        )
    demo_catalog.write_text(soon)

# The hub's jobs page (hub-tests/jobs-page.spec.ts) runs a job as student7, a user in no
# course whom no other test signs in as, then stops their server and reads the job there.
c.Authenticator.allowed_users.add("student7")

# JupyterLab's scheme (hub-tests/lab-scheme.spec.ts) starts a server as student6, a user
# in no course whom no other test signs in as.
c.Authenticator.allowed_users.add("student6")
