"""A user's server image installs only what a single-user server needs (issue 11, item 6).

Scenario: an image builder runs ``pip install -c constraints.txt 'campus-gpu-hub[singleuser]'``
from this source tree into a fresh virtualenv (no system site-packages). The result must
run the Run as Job server and lab extensions, and must carry none of the hub's machinery:
no KubeSpawner, no kubernetes_asyncio, no database driver.

The install takes about a minute with a warm pip cache (longer on a cold one), so the
virtualenv is made once for the module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT_S = 900

# Local state of a checkout that is no part of its source (the built lab extension is).
NOT_SOURCE = (
    ".git",
    ".venv",
    "node_modules",
    ".yarn",
    ".run",
    "build",
    "dist",
    "*.egg-info",
    "test-artifacts",
    "__pycache__",
    ".*_cache",
)

# What only the hub needs; a user's server must not have it.
HUB_ONLY_MODULES = ("kubespawner", "kubernetes_asyncio", "psycopg")


def run_in(venv: Path, *command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``command`` with ``venv``'s programs first on the PATH, as an activated shell."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH",)}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    # Jupyter's paths follow the virtualenv, not the settings of whoever runs the tests.
    for key in ("JUPYTER_PATH", "JUPYTER_CONFIG_DIR", "JUPYTER_CONFIG_PATH", "JUPYTER_DATA_DIR"):
        env.pop(key, None)
    return subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def singleuser_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with ``campus-gpu-hub[singleuser]`` installed from this tree."""
    if not (REPO / "jupyter_to_job" / "labextension" / "package.json").is_file():
        pytest.fail(
            "The JupyterLab extension is not built, so this test would build it inside pip; "
            "run `make labextension` (or `make setup`) first."
        )
    workdir = tmp_path_factory.mktemp("singleuser")
    # pip builds a local project in place (build/, *.egg-info); a copy keeps that out of
    # the checkout, which other builds and test runs share.
    source = workdir / "campus-gpu-hub"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    venv = workdir / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
    assert made.returncode == 0, f"Could not make a virtualenv:\n{made.stderr}"
    installed = run_in(
        venv,
        str(venv / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--quiet",
        "-c",
        str(REPO / "constraints.txt"),
        f"{source}[singleuser]",
        timeout=INSTALL_TIMEOUT_S,
    )
    assert installed.returncode == 0, (
        f"pip install '{source}[singleuser]' failed:\n{installed.stdout}\n{installed.stderr}"
    )
    return venv


def test_the_singleuser_install_has_no_hub_machinery(singleuser_venv: Path) -> None:
    # Given the single-user install, when its Python looks for the hub's libraries,
    found = run_in(
        singleuser_venv,
        "python",
        "-c",
        "import importlib.util, sys;"
        "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m)))",
        *HUB_ONLY_MODULES,
    )
    assert found.returncode == 0, found.stderr
    # then none of them is there.
    assert found.stdout.split() == [], (
        f"The singleuser extra installs {found.stdout.strip()}; move it to the hub extra "
        "in setup.py."
    )


def test_the_singleuser_install_imports_the_job_side(singleuser_venv: Path) -> None:
    # Given the single-user install, when it imports the server extension and the runner,
    imported = run_in(
        singleuser_venv,
        "python",
        "-c",
        "import jupyter_to_job.extension, jupyter_to_job.runner, gpuspawner.policy",
    )
    # then they import without the hub side's libraries.
    assert imported.returncode == 0, (
        f"The server extension does not import in a single-user install:\n{imported.stderr}"
    )


def test_the_singleuser_install_enables_run_as_job(singleuser_venv: Path) -> None:
    # Given the single-user install, when Jupyter lists its extensions,
    server = run_in(singleuser_venv, "jupyter", "server", "extension", "list")
    lab = run_in(singleuser_venv, "jupyter", "labextension", "list")
    # then the Run as Job server extension is enabled and loads,
    server_lines = (server.stdout + server.stderr).splitlines()
    assert any("jupyter_to_job" in line and "enabled" in line for line in server_lines), (
        "jupyter server extension list does not show jupyter_to_job enabled:\n"
        + "\n".join(server_lines)
    )
    assert any("jupyter_to_job" in line and "OK" in line for line in server_lines), (
        "The jupyter_to_job server extension does not load:\n" + "\n".join(server_lines)
    )
    # and the lab extension (the Run as Job button and the status bar) is enabled.
    lab_lines = (lab.stdout + lab.stderr).splitlines()
    assert any(
        "@campus-gpu-hub/jupyter-to-job" in line and "enabled" in line and "OK" in line
        for line in lab_lines
    ), "jupyter labextension list does not show the Run as Job extension:\n" + "\n".join(lab_lines)


BROWSER_CHECK = """
const { chromium } = require('playwright');
(async () => {
  const [url, executablePath, shot] = process.argv.slice(2);
  const browser = await chromium.launch({ executablePath });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(url);
    const button = page.locator(
      '.jp-NotebookPanel-toolbar [data-command="jupyter-to-job:run-as-job"]'
    );
    await page.locator('.jp-Notebook .jp-Cell').first().waitFor({ timeout: 90000 });
    // The notebook is revealed (its loading spinner gone), so the toolbar is really shown.
    await page.locator('.jp-NotebookPanel .jp-Spinner').waitFor({ state: 'detached', timeout: 90000 });
    await button.waitFor({ state: 'visible', timeout: 90000 });
    const status = page.locator('.jp-JupyterToJob-sessionStatus');
    await status.waitFor({ state: 'visible', timeout: 30000 });
    await page.screenshot({ path: shot });
    console.log(JSON.stringify({ button: await button.count(), status: await status.innerText() }));
  } finally {
    await browser.close();
  }
})().catch((error) => { console.error(String(error)); process.exit(1); });
"""


def test_jupyterlab_there_shows_run_as_job_and_the_status_bar(
    singleuser_venv: Path, tmp_path: Path
) -> None:
    """In a real browser: the single-user install's JupyterLab, on a notebook, shows the
    Run as Job button and the GPU share / session status bar item."""
    import json
    import socket
    import time
    import urllib.request
    from datetime import UTC, datetime, timedelta

    ui_modules = REPO / "tests" / "ui" / "node_modules"
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    assert (ui_modules / "playwright").is_dir(), "run `make pytest` (it installs tests/ui)"
    assert Path(chromium).exists(), "Debian's chromium is needed (make system-deps)"
    home = tmp_path / "home"
    home.mkdir()
    (home / "notebook.ipynb").write_text(
        json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = "lean-install-check"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(
        PATH=f"{singleuser_venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        VIRTUAL_ENV=str(singleuser_venv),
        # What the hub gives a GPU server: its profile, share and session end.
        GPUSPAWNER_PROFILE="ml101",
        GPUSPAWNER_GPU_SHARE="1/4 of an RTX 4090 (6 GiB)",
        GPUSPAWNER_SESSION_END=(datetime.now(UTC) + timedelta(minutes=95)).isoformat(),
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_DATA_DIR=str(tmp_path / "data"),
    )
    for key in ("JUPYTER_PATH", "JUPYTER_CONFIG_PATH"):
        env.pop(key, None)
    lab = subprocess.Popen(
        [
            str(singleuser_venv / "bin" / "jupyter"),
            "lab",
            "--no-browser",
            f"--port={port}",
            "--ip=127.0.0.1",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={home}",
            "--allow-root",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "lab.log", "w"),  # noqa: SIM115 - closed with the process
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(600):  # a hang guard, not a speed limit
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5)
                break
            except OSError:
                assert lab.poll() is None, (tmp_path / "lab.log").read_text()[-3000:]
                time.sleep(0.2)
        script = tmp_path / "check.js"
        script.write_text(BROWSER_CHECK)
        shot = tmp_path / "lean-lab.png"
        checked = subprocess.run(
            [
                "node",
                str(script),
                f"{base}/lab/tree/notebook.ipynb?token={token}",
                chromium,
                str(shot),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "NODE_PATH": str(ui_modules)},
            check=False,
        )
        assert checked.returncode == 0, checked.stderr + (tmp_path / "lab.log").read_text()[-3000:]
        seen = json.loads(checked.stdout.strip().splitlines()[-1])
        assert seen["button"] == 1
        assert "1/4 of an RTX 4090" in seen["status"]
        artifacts = REPO / "test-artifacts" / "lean-install"
        artifacts.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, artifacts / shot.name)
    finally:
        lab.terminate()
        try:
            lab.wait(timeout=30)
        except subprocess.TimeoutExpired:  # its kernel's shutdown can take longer
            lab.kill()
            lab.wait(timeout=30)
