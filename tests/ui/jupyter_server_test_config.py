"""JupyterLab for the browser tests: galata's test settings plus Run as Job as last built.

Playwright starts this server (``webServer`` in playwright.config.js). The settings turn
authentication off, so never use them outside the tests.

The ``jupyter_to_job`` server extension runs in standalone mode: an embedded job manager
runs jobs as local processes, with its data (queue, logs, outputs) in
``.run/ui-tests/jobs/``, emptied at every start.
"""

import os
import shutil
from pathlib import Path

import jupyterlab.galata
from jupyterlab.galata import configure_jupyter_server

c = get_config()  # noqa: F821

REPO = Path(__file__).resolve().parents[2]
EXTENSION_NAME = "@campus-gpu-hub/jupyter-to-job"
# What `jlpm build` in labextension/ writes; the tests load it, not a copy in the virtualenv.
BUILT_EXTENSION = REPO / "jupyter_to_job" / "labextension"
EXTENSIONS_DIR = REPO / ".run" / "ui-tests" / "labextensions"

configure_jupyter_server(c)

c.ServerApp.ip = "127.0.0.1"
c.ServerApp.port = int(os.environ.get("UI_TEST_PORT", "8888"))
if os.geteuid() == 0:
    c.ServerApp.allow_root = True

if not (BUILT_EXTENSION / "package.json").is_file():
    raise SystemExit(
        f"The Run as Job extension is not built ({BUILT_EXTENSION} is missing). "
        "Build it first: cd labextension && jlpm install && jlpm build"
    )
linked = EXTENSIONS_DIR / EXTENSION_NAME
linked.parent.mkdir(parents=True, exist_ok=True)
if linked.is_symlink() or linked.exists():
    linked.unlink()
linked.symlink_to(BUILT_EXTENSION, target_is_directory=True)

# galata's helper extension, then ours.
c.LabServerApp.extra_labextensions_path = [
    str(Path(jupyterlab.galata.__file__).parent),
    str(EXTENSIONS_DIR),
]

# Run as Job's server half, without a hub: jobs run in this server's machine.
c.ServerApp.jpserver_extensions.update({"jupyter_to_job": True})
c.JobsExtensionApp.mode = "standalone"
# A fresh job store for every run; the last run's stays for a look after a failure.
JOBS_DIR = REPO / ".run" / "ui-tests" / "jobs"
shutil.rmtree(JOBS_DIR, ignore_errors=True)
JOBS_DIR.mkdir(parents=True)
c.JobsExtensionApp.root_dir = str(JOBS_DIR)
# Test files run in parallel workers against this one server: room for their jobs.
c.JobManager.max_running_jobs = 4
