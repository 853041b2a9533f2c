"""The shipped workstation hub (hub_config/workstation), started for real, as root.

It creates the demo people's system accounts (student1, student2, ...) and the services'
account, runs each server and job as its owner, and keeps its secrets to root. These tests
need root; without it they are skipped with that reason.

The hub's Python and this checkout must be usable by other accounts, as they would be in a
real installation (a virtualenv under /opt). When a folder above them cannot be crossed by
other accounts (a home folder of 0700, for instance), the fixture lets others cross it (adds
o+x, never read) for the duration of the tests and restores its mode afterwards.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..support.hubprocess import REPO_ROOT, RunningHub, copy_log, free_loopback_ports

WORKSTATION_CONFIG = REPO_ROOT / "hub_config" / "workstation" / "jupyterhub_config.py"
DEMO_ACCOUNTS = ["student1", "student2", "student3", "instructor", "researcher", "admin"]
SERVICES_ACCOUNT = "gpuhub-services"
ARTIFACTS = REPO_ROOT / "test-artifacts" / "isolation"

# Extra job flavors for the limits scenarios, dropped into the hub's catalog folder.
LIMIT_FLAVORS = """\
flavors:
  - id: half-gig
    title: 512 MiB job
    description: One CPU and 512 MiB of memory.
    resources: {cpu: 1, memory: 512MiB}
    default_deadline: 10m
    max_deadline: 1h
    access: {everyone: true}
  - id: one-cpu
    title: One-CPU job
    description: One CPU and 2 GiB of memory.
    resources: {cpu: 1, memory: 2GiB}
    default_deadline: 10m
    max_deadline: 1h
    access: {everyone: true}
"""


def _account_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


@contextlib.contextmanager
def crossable_by_everyone(paths: list[Path]) -> Iterator[list[Path]]:
    """Let other accounts cross (not list) every folder above ``paths``; restore after."""
    changed: dict[Path, int] = {}
    for path in paths:
        for folder in [path, *path.parents]:
            mode = folder.stat().st_mode & 0o7777
            if folder.is_dir() and not mode & 0o001 and folder not in changed:
                changed[folder] = mode
                folder.chmod(mode | 0o001)
    try:
        yield list(changed)
    finally:
        for folder, mode in changed.items():
            folder.chmod(mode)


# The shipped file itself, after the harness defaults, on the harness's ports.
WORKSTATION_HUB_CONFIG = f"""\
import os
os.environ["GPUSPAWNER_DEMO_PORT"] = str(c.JupyterHub.port)
os.environ["GPUSPAWNER_DEMO_HUB_PORT"] = str(c.JupyterHub.hub_port)
os.environ["GPUSPAWNER_DEMO_PROXY_API_PORT"] = c.ConfigurableHTTPProxy.api_url.rsplit(":", 1)[1]
exec(
    compile(open({str(WORKSTATION_CONFIG)!r}).read(), {str(WORKSTATION_CONFIG)!r}, "exec"),
    {{"get_config": get_config, "__file__": {str(WORKSTATION_CONFIG)!r}, "__name__": "__config__"}},
)
# The hub notices a server that ended within seconds, not the default half minute.
c.Spawner.poll_interval = 3
"""


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip(
            "needs root: the workstation hub creates system accounts and runs each server and "
            "job as its owner (run the suite as root, as CI does)"
        )
    if shutil.which("useradd") is None:
        pytest.skip("needs useradd (Debian's passwd package) to create the demo accounts")


@contextlib.contextmanager
def workstation_hub(
    extra_env: dict[str, str] | None = None, accounts: list[str] | None = None
) -> Iterator[RunningHub]:
    """The workstation hub, prepared but not launched (``hub.launch()``), its runtime folder
    in ``hub.runtime``; it is stopped, and the accounts it made removed, afterwards."""
    names = [*DEMO_ACCOUNTS, SERVICES_ACCOUNT, *(accounts or [])]
    existed = {name for name in names if _account_exists(name)}
    runtime = Path(tempfile.mkdtemp(prefix="cgh-workstation-", dir="/tmp"))
    (runtime / "catalog").mkdir()
    (runtime / "catalog" / "limits.yaml").write_text(LIMIT_FLAVORS)
    sessions_port, jobs_port = free_loopback_ports(2)
    environment = {
        "GPUSPAWNER_DEMO_RUNTIME": str(runtime),
        "GPUSPAWNER_DEMO_SESSIONS_PORT": str(sessions_port),
        "GPUSPAWNER_DEMO_JOBS_PORT": str(jobs_port),
        **(extra_env or {}),
    }
    needed = [Path(sys.executable).resolve().parent, Path(sys.prefix), REPO_ROOT]
    workdir = runtime / "harness"
    workdir.mkdir(mode=0o700)  # the harness config holds its admin token
    with crossable_by_everyone(needed):
        hub = RunningHub.prepare(WORKSTATION_HUB_CONFIG, workdir, environment)
        hub.runtime = runtime  # type: ignore[attr-defined]
        try:
            yield hub
        finally:
            hub.stop()
            for name in names:
                if name not in existed and _account_exists(name):
                    subprocess.run(["userdel", "--remove", name], capture_output=True, check=False)
            shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture(scope="module")
def workstation(request: pytest.FixtureRequest) -> Iterator[RunningHub]:
    """The workstation hub with the demo people; accounts it made are removed afterwards."""
    needs_root()
    with workstation_hub() as hub:
        try:
            hub.launch()
            yield hub
        finally:
            if getattr(request.module, "_isolation_failed", False):
                print(f"--- {copy_log(hub, ARTIFACTS / 'workstation.log')} ---")
                print(hub.log_tail(150))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report = yield
    if report.failed:
        item.module._isolation_failed = True  # type: ignore[attr-defined]
    return report
