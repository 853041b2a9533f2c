"""A real Prometheus (Debian's ``prometheus`` package) scraping test services.

``make system-deps`` installs it (``prometheus`` and ``promtool``); tests that need it skip
with :data:`MISSING_REASON` when it is not installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import requests
import yaml

from .hubprocess import REPO_ROOT, free_loopback_ports

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
MISSING_REASON = (
    "Prometheus is not installed: run `make system-deps` (Debian's prometheus package, "
    "which brings prometheus and promtool)."
)
MONITORING = REPO_ROOT / "hub_config" / "monitoring"
RULES = MONITORING / "rules" / "gpuspawner.rules.yml"
RULE_TESTS = MONITORING / "rules" / "gpuspawner.rules.test.yml"
DASHBOARD = MONITORING / "grafana" / "gpu-hub.json"
READY_TIMEOUT = 60.0
WAIT_TIMEOUT = 90.0  # a bound for a broken test, never a timing assertion


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    """Run promtool with ``args``; its output is in the result."""
    assert PROMTOOL, MISSING_REASON
    return subprocess.run(
        [PROMTOOL, *args], capture_output=True, text=True, check=False, cwd=RULES.parent
    )


def dashboard_queries() -> dict[str, list[str]]:
    """The shipped Grafana dashboard's PromQL by panel title, with its variables filled
    as Grafana fills them (``$__rate_interval``: 1m, ``$course``: all courses)."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries: dict[str, list[str]] = {}
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"].replace("$__rate_interval", "1m").replace("$course", ".*")
            queries.setdefault(panel["title"], []).append(expr)
    return queries


def scrape_job(name: str, url: str, token: str) -> dict[str, Any]:
    """A scrape config for ``url`` (scheme, host, path) with a bearer token, every second."""
    scheme, rest = url.split("://", 1)
    host, _, path = rest.partition("/")
    return {
        "job_name": name,
        "scheme": scheme,
        "metrics_path": "/" + path,
        "scrape_interval": "1s",
        "authorization": {"type": "Bearer", "credentials": token},
        "static_configs": [{"targets": [host]}],
    }


class RunningPrometheus:
    """``prometheus`` on a free loopback port with its own storage, until :meth:`stop`."""

    def __init__(self, workdir: Path, scrape_configs: list[Mapping[str, Any]]):
        assert PROMETHEUS, MISSING_REASON
        workdir.mkdir(parents=True, exist_ok=True)
        (self.port,) = free_loopback_ports(1)
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "prometheus.log"
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "scrape_configs": list(scrape_configs),
        }
        self.config_path = workdir / "prometheus.yml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={self.config_path}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise AssertionError(f"Prometheus exited early:\n{self.log_tail()}")
            try:
                if requests.get(self.url + "/-/ready", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise AssertionError(f"Prometheus was not ready:\n{self.log_tail()}")

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` gives now, through the HTTP API (``/api/v1/query``)."""
        response = requests.get(self.url + "/api/v1/query", params={"query": expr}, timeout=10)
        assert response.status_code == 200, f"{expr}: {response.status_code} {response.text}"
        body = response.json()
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def targets(self) -> dict[str, dict[str, Any]]:
        """The active scrape targets by job name (health, last error)."""
        response = requests.get(self.url + "/api/v1/targets", timeout=10)
        response.raise_for_status()
        return {t["labels"]["job"]: t for t in response.json()["data"]["activeTargets"]}

    def wait_for(
        self, expr: str, condition: Callable[[list[dict[str, Any]]], bool] = bool
    ) -> list[dict[str, Any]]:
        """Query ``expr`` until ``condition`` holds for its result; return that result."""
        deadline = time.monotonic() + WAIT_TIMEOUT
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            result = self.query(expr)
            if condition(result):
                return result
            time.sleep(0.5)
        raise AssertionError(
            f"{expr} never met the condition; last result {result}; targets "
            f"{self.targets()}\n{self.log_tail()}"
        )

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
