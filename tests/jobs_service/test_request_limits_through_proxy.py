"""Oversized and deeply nested requests through a real hub's proxy, to the service and a server.

Alice talks to the job service and to her own server's extension as a browser or a script
would: through configurable-http-proxy in front of the hub. A body over the limit is a 413
and JSON nested deeper than any notebook needs is a 400, each with a JSON sentence (not a
bare 400 from tornado, nor a proxy error), and both keep answering afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from jupyter_to_job.rest import CREATE_BODY_SLACK, MAX_NOTEBOOK_DEPTH, SMALL_BODY_LIMIT

from ..support.hubprocess import BrowserlessUser
from ..support.job_hub import MAX_NOTEBOOK_BYTES, JobHub, start_job_hub, stopped_afterwards
from ..support.notebooks import notebook_json

pytestmark = pytest.mark.integration

SERVICE_LIMIT = MAX_NOTEBOOK_BYTES + CREATE_BODY_SLACK


def deep_json_text(depth: int) -> str:
    return "[" * depth + "]" * depth


def notebook_text_with_deep_metadata(depth: int) -> str:
    """A notebook whose cell metadata holds a list ``depth`` levels deep."""
    text = json.dumps(notebook_json("1"))
    cell_metadata = '"metadata": {}'  # the cell's; the notebook's holds the kernelspec
    assert cell_metadata in text
    return text.replace(cell_metadata, '"metadata": {"deep": ' + deep_json_text(depth) + "}", 1)


@dataclass
class Through:
    """Alice's requests to one base URL behind the proxy, with her own token."""

    base: str
    token: str

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        headers = {"Authorization": f"token {self.token}", **kwargs.pop("headers", {})}
        kwargs.setdefault("timeout", 120)
        return requests.request(method, self.base + path, headers=headers, **kwargs)

    def send_json_text(self, method: str, path: str, text: str) -> requests.Response:
        return self.request(
            method, path, data=text.encode(), headers={"Content-Type": "application/json"}
        )


@dataclass
class AliceOnTheHub:
    setup: JobHub
    service: Through  # /services/jupyter-to-job/api/ through the proxy
    server: Through  # /user/alice/jupyter-to-job/api/ through the proxy
    home: Path


@pytest.fixture(scope="module")
def alice(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AliceOnTheHub]:
    workdir = tmp_path_factory.mktemp("limits-hub")
    hub = start_job_hub(workdir, 'c.JupyterHub.spawner_class = "simple"')
    with stopped_afterwards(hub, request) as setup:
        person = BrowserlessUser(setup.hub, "alice")
        assert person.spawn_via_api().status_code in (201, 202)
        person.wait_ready()
        yield AliceOnTheHub(
            setup,
            Through(f"{setup.hub.url}/services/jupyter-to-job/api/", person.token),
            Through(person.server_url() + "jupyter-to-job/api/", person.token),
            workdir / "hub" / "home" / "alice",
        )


def assert_json_refusal(response: requests.Response, status: int, reason: str) -> str:
    assert response.status_code == status, (response.headers, response.text[:500])
    assert response.headers["Content-Type"].startswith("application/json"), response.headers
    error = response.json()
    assert error["reason"] == reason, error
    message: str = error["message"]
    assert message[0].isupper() and message.endswith("."), message
    return message


@pytest.mark.parametrize("size", [SERVICE_LIMIT, 10 * SERVICE_LIMIT], ids=["just over", "10x"])
def test_the_service_refuses_an_oversized_notebook_with_a_413_sentence(alice, size):
    # Given a notebook larger than the service takes, sent through the hub's proxy
    big = notebook_json("x = '" + "a" * size + "'")
    answer = alice.service.request(
        "POST", "jobs", json={"input_path": "big.ipynb", "notebook": big}
    )
    # Then alice is told so, with what to do, as JSON
    message = assert_json_refusal(answer, 413, "too-large")
    assert "Clear its outputs" in message
    # And the service answers on: her jobs, and a notebook that fits runs
    assert alice.service.request("GET", "jobs").status_code == 200
    small = alice.service.request(
        "POST", "jobs", json={"input_path": "small.ipynb", "notebook": notebook_json("1 + 1")}
    )
    assert small.status_code == 201, small.text


def test_an_upload_with_a_wrong_token_is_a_401_sentence_not_a_proxy_error(alice):
    # Given a stale token, and a notebook far too large for sockets to swallow unread but
    # within what the service reads from anyone (twice its limit, as JobServiceApp listens)
    stale = Through(alice.service.base, "0" * 32)
    notebook = notebook_json("x = '" + "a" * (2 * SERVICE_LIMIT - 10_000) + "'")
    # When it is sent through the proxy
    answer = stale.request("POST", "jobs", json={"input_path": "big.ipynb", "notebook": notebook})
    # Then the service's own answer arrives: sign in first
    assert "Sign in first" in assert_json_refusal(answer, 401, "unauthenticated")


@pytest.mark.parametrize("depth", [MAX_NOTEBOOK_DEPTH + 5, 100_000])
def test_the_service_refuses_deeply_nested_json_with_a_400_sentence(alice, depth):
    notebook = notebook_text_with_deep_metadata(depth)
    create = '{"input_path": "deep.ipynb", "notebook": ' + notebook + "}"
    message = assert_json_refusal(
        alice.service.send_json_text("POST", "jobs", create), 400, "too-deep"
    )
    assert "Flatten" in message
    # A stop request with deep JSON, on a job of her own, is refused the same way
    job = alice.service.request(
        "POST", "jobs", json={"input_path": "quick.ipynb", "notebook": notebook_json("1")}
    )
    assert job.status_code == 201, job.text
    stop = '{"status": "STOPPED", "why": ' + deep_json_text(min(depth, 20_000)) + "}"
    patched = alice.service.send_json_text("PATCH", f"jobs/{job.json()['job_id']}", stop)
    assert_json_refusal(patched, 400, "too-deep")
    assert alice.service.request("GET", "config").status_code == 200


def test_her_server_refuses_an_oversized_request_with_a_413_sentence(alice):
    # Given a create request to her own server far larger than a job's fields ever are
    padding = "a" * (2 * SERVICE_LIMIT)
    answer = alice.server.request(
        "POST", "jobs", json={"input_path": "x.ipynb", "parameters": {"p": padding}}
    )
    # Then her server says so in JSON, and answers on
    message = assert_json_refusal(answer, 413, "too-large")
    assert "read from your files" in message
    assert alice.server.request("GET", "config").status_code == 200


def test_her_servers_small_requests_refuse_a_large_body_with_a_413_sentence(alice):
    padding = "x" * SMALL_BODY_LIMIT
    stop = alice.server.request("PATCH", "jobs/some-job", json={"status": "STOPPED", "p": padding})
    assert '{"status": "STOPPED"}' in assert_json_refusal(stop, 413, "too-large")
    save = alice.server.request(
        "POST", "jobs/some-job/outputs/ipynb/save", json={"path": "a.ipynb", "p": padding}
    )
    assert_json_refusal(save, 413, "too-large")
    # While a stop request of the right size gets on to the job service's own answer
    fine = alice.server.request("PATCH", "jobs/some-job", json={"status": "STOPPED"})
    assert_json_refusal(fine, 404, "not-found")


@pytest.mark.parametrize("depth", [MAX_NOTEBOOK_DEPTH + 1, 100_000])
def test_her_server_refuses_a_deeply_nested_request_with_a_400_sentence(alice, depth):
    body = '{"input_path": "x.ipynb", "parameters": {"p": ' + deep_json_text(depth) + "}}"
    assert_json_refusal(alice.server.send_json_text("POST", "jobs", body), 400, "too-deep")
    assert alice.server.request("GET", "flavors").status_code == 200


@pytest.mark.parametrize("depth", [MAX_NOTEBOOK_DEPTH + 1, 450, 100_000])
def test_a_saved_notebook_nested_too_deep_is_refused_by_name(alice, depth):
    # Given a notebook in her files whose cell metadata nests deeper than a job takes
    (alice.home / f"deep-{depth}.ipynb").write_text(notebook_text_with_deep_metadata(depth))
    # When she runs it as a job
    answer = alice.server.request("POST", "jobs", json={"input_path": f"deep-{depth}.ipynb"})
    # Then she is told which notebook, and what to do
    message = assert_json_refusal(answer, 400, "too-deep")
    assert f"'deep-{depth}.ipynb'" in message and "Clear its outputs" in message
    # While a notebook of hers that is fine still runs
    (alice.home / "fine.ipynb").write_text(json.dumps(notebook_json("1 + 1")))
    fine = alice.server.request("POST", "jobs", json={"input_path": "fine.ipynb"})
    assert fine.status_code == 201, fine.text
