"""Fixtures that start real JupyterHub processes; see hubprocess.py for what they provide.

Usage in a test module under tests/integration/::

    pytestmark = pytest.mark.integration

    def test_something(start_hub, browserless_user):
        hub = start_hub("c.JupyterHub.authenticator_class = 'dummy'\\n")
        alice = browserless_user(hub, "alice")
        alice.login()
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Iterator, Mapping
from pathlib import Path

import pytest

from ..support.hubprocess import REPO_ROOT, BrowserlessUser, RunningHub, copy_log

ARTIFACTS = REPO_ROOT / "test-artifacts" / "integration"

StartHub = Callable[..., RunningHub]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # Keep each phase's report on the item, so fixtures can tell whether the test failed.
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def start_hub(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StartHub]:
    """Factory: ``start_hub(config_text, extra_env=None) -> RunningHub``, stopped afterwards.

    Every hub gets its own work directory under the test's tmp_path. When the test fails,
    the hub logs are copied to test-artifacts/integration/ and their tails are printed.
    """
    hubs: list[RunningHub] = []

    def start(config_text: str, extra_env: Mapping[str, str] | None = None) -> RunningHub:
        hub = RunningHub.start(config_text, tmp_path / f"hub-{len(hubs)}", extra_env)
        hubs.append(hub)
        return hub

    yield start

    report = getattr(request.node, "report_call", None)
    failed = report is None or report.failed
    for hub in reversed(hubs):
        hub.stop()
        if failed:
            name = re.sub(r"[^\w.-]+", "_", request.node.nodeid)
            kept = copy_log(hub, ARTIFACTS / name / f"{hub.workdir.name}.log")
            print(f"--- {kept} (tail) ---\n{hub.log_tail(120)}")


@pytest.fixture
def browserless_user() -> Callable[..., BrowserlessUser]:
    """Factory: ``browserless_user(hub, name, password="any-password") -> BrowserlessUser``."""
    return BrowserlessUser
