"""The job side never imports the spawners (issue 11, item 3).

A user's server image installs ``campus-gpu-hub[singleuser]``, which has no KubeSpawner and
no kubernetes_asyncio; and the job service must not drag the hub's spawner machinery into a
process that only runs jobs. So importing the job service, the server extension or the
in-job runner must not import a spawner, directly or through another module.

Each import runs in a fresh interpreter, so modules this test session already imported
cannot hide (or fake) what an import pulls in.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# What the job side must never import: the spawners, and the libraries only they need.
FORBIDDEN = (
    "kubespawner",
    "kubernetes_asyncio",
    "jupyterhub.spawner",
    "gpuspawner.spawners.kubernetes",
    "gpuspawner.spawners.local",
)

JOB_SIDE_MODULES = (
    "jupyter_to_job",
    "jupyter_to_job.service.app",
    "jupyter_to_job.service",
    "jupyter_to_job.extension",
    "jupyter_to_job.extension.app",
    "jupyter_to_job.runner",
)

PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
forbidden = sys.argv[2:]
print(json.dumps(sorted(
    name for name in sys.modules
    if any(name == bad or name.startswith(bad + ".") for bad in forbidden)
)))
"""


def forbidden_imports_of(module: str) -> list[str]:
    """The forbidden modules found in ``sys.modules`` after importing ``module`` afresh."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, module, *FORBIDDEN],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"Importing {module} failed:\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", JOB_SIDE_MODULES)
def test_the_job_side_imports_no_spawner(module: str) -> None:
    # Given a fresh Python, when it imports a job-side module,
    found = forbidden_imports_of(module)
    # then no spawner, and no library only the spawners need, came with it.
    assert found == [], (
        f"Importing {module} imports {', '.join(found)}. The job service, the server "
        "extension and the runner must not import the spawners: move the import into the "
        "hub-side module that needs it, or move what the job side uses into the shared core "
        "(gpuspawner.policy or a module that imports no spawner)."
    )


def test_the_probe_sees_a_spawner_import() -> None:
    # Given the hub side, which does import a spawner, the same probe reports it,
    # so an empty answer above means the job side is clean, not that the probe is blind.
    found = forbidden_imports_of("gpuspawner.spawners.local")
    assert "gpuspawner.spawners.local" in found
    assert "jupyterhub.spawner" in found
