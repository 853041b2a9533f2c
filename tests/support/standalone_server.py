"""A real ``jupyter server`` with the Run as Job extension in standalone mode (no hub).

The server runs jobs itself (embedded manager, local executor), as on Binder or a laptop.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from .hubprocess import free_loopback_ports
from .job_processes import kill_leftovers

VENV_BIN = Path(sys.executable).parent
READY_TIMEOUT = 60.0
JOB_TIMEOUT = 120.0  # a bound for a broken test, never a timing assertion


@dataclass
class StandaloneServer:
    url: str
    token: str
    root: Path
    data: Path

    def request(self, method: str, path: str, *, auth: bool = True, **kwargs: Any):
        headers = dict(kwargs.pop("headers", {}))
        if auth:
            headers["Authorization"] = f"token {self.token}"
        kwargs.setdefault("timeout", 60)
        return requests.request(method, self.url + path, headers=headers, **kwargs)

    def jobs_api(self, method: str, path: str, **kwargs: Any):
        return self.request(method, "jupyter-to-job/api/" + path, **kwargs)

    def put_notebook(self, path: str, content: dict) -> None:
        answer = self.request(
            "PUT", f"api/contents/{path}", json={"type": "notebook", "content": content}
        )
        assert answer.status_code in (200, 201), answer.text

    def wait_final(self, job_id: str) -> dict:
        deadline = time.monotonic() + JOB_TIMEOUT
        while time.monotonic() < deadline:
            job = self.jobs_api("GET", f"jobs/{job_id}").json()
            if job["status"] in ("COMPLETED", "FAILED", "STOPPED"):
                return job
            time.sleep(0.1)
        raise AssertionError(f"job {job_id} did not finish: {job}")


@contextmanager
def standalone_server(
    work: Path, *options: str, account: pwd.struct_passwd | None = None
) -> Iterator[StandaloneServer]:
    """A fresh server in ``work`` (empty home and data folders), with extra ``options``;
    run as ``account`` where given (by root: see os_accounts.py), its folders its own."""
    root, data = work / "home", work / "data"
    root.mkdir()
    (port,) = free_loopback_ports(1)
    token = secrets.token_hex(16)
    # No JUPYTERHUB_* variables: the extension's "auto" mode must pick standalone.
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
    env.update(
        JUPYTER_DATA_DIR=str(data),
        JUPYTER_RUNTIME_DIR=str(work / "runtime"),
        JUPYTER_CONFIG_DIR=str(work / "config"),
        PATH=os.pathsep.join([str(VENV_BIN), env.get("PATH", "")]),
    )
    as_account: dict[str, Any] = {}
    if account is not None:
        home = work / "account-home"
        for folder in (root, data, work / "runtime", work / "config", home):
            folder.mkdir(exist_ok=True)
            os.chown(folder, account.pw_uid, account.pw_gid)
        env.update(HOME=str(home), USER=account.pw_name, LOGNAME=account.pw_name)
        as_account = {
            "user": account.pw_uid,
            "group": account.pw_gid,
            "extra_groups": [],
            "cwd": str(work),
        }
    command = [
        str(VENV_BIN / "jupyter"),
        "server",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--ServerApp.root_dir={root}",
        f"--IdentityProvider.token={token}",
        # An editable install does not place etc/jupyter/jupyter_server_config.d/.
        "--ServerApp.jpserver_extensions=jupyter_to_job=True",
        "--LocalExecutor.poll_interval=0.1",
        "--LogStore.follow_interval=0.05",
        *options,
    ]
    if os.geteuid() == 0 and account is None:
        command.append("--allow-root")
    log_path = work / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **as_account,
        )
    running = StandaloneServer(f"http://127.0.0.1:{port}/", token, root, data)
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            assert process.poll() is None, log_path.read_text()[-3000:]
            try:
                if running.jobs_api("GET", "config", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.1)
        yield running
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have ended: say why above
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        kill_leftovers(data / "jupyter_to_job")
