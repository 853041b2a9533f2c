"""Request bodies the job service refuses before they reach anything that could choke on them.

The service's handlers run in this process, on a real tornado HTTP server with the body
ceiling the service listens with; a table stands in for the hub's token check and a
recording stand-in for the job manager. Bodies over their limit are answered 413 with a
JSON sentence, after the upload, by any route (declared length, chunks); JSON nested deeper
than any notebook needs is a 400; and the service answers normally afterwards. The same
refusals through a real hub's proxy, and from the server extension, are in
test_request_limits_through_proxy.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import nbformat
import pytest
from jupyterhub.services.auth import HubAuth
from nbformat.v4 import new_code_cell, new_notebook
from tornado import web
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port

from jupyter_to_job.errors import JobNotFound
from jupyter_to_job.jobs_api import JobsAPI, local_catalog
from jupyter_to_job.models import CreateJob, CreateJobResponse, DescribeJob, JobStatus
from jupyter_to_job.rest import (
    CREATE_BODY_SLACK,
    DISCARD_CEILING,
    MAX_JSON_DEPTH,
    MAX_NOTEBOOK_DEPTH,
    SMALL_BODY_LIMIT,
    ApiError,
    check_notebook,
    json_depth,
    json_object,
)
from jupyter_to_job.scopes import READ_JOBS_SCOPE, WRITE_JOBS_SCOPE, access_scope
from jupyter_to_job.service.handlers import NotFoundHandler, service_handlers

MAX_NOTEBOOK_BYTES = 100_000
CREATE_LIMIT = MAX_NOTEBOOK_BYTES + CREATE_BODY_SLACK
# What JobServiceApp.serve gives the HTTP server: the most it buffers before authenticating.
SERVER_CEILING = 2 * CREATE_LIMIT
PREFIX = "/services/jupyter-to-job/"
ALICES_JOB = "0b5c1f0e-0000-4000-8000-000000000001"
ALICE_TOKEN = "alice-token"
NO_ACCESS_TOKEN = "token-without-the-access-scope"


def notebook_json(*sources: str, metadata: dict | None = None) -> dict:
    nb = new_notebook(cells=[new_code_cell(s) for s in sources], metadata=metadata or {})
    return json.loads(nbformat.writes(nb))


def nested(depth: int) -> list:
    """A list ``depth`` levels deep: ``[[[...]]]``."""
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def deep_json_text(depth: int) -> str:
    """``[[[...]]]`` as text, deeper than Python could build or parse recursively."""
    return "[" * depth + "]" * depth


# -- depth and notebooks, as functions -----------------------------------------------------


def test_depth_counts_containers_and_stops_counting_past_the_limit():
    assert json_depth("text", 10) == 0
    assert json_depth({}, 10) == 1
    assert json_depth({"a": [1, {"b": []}], "c": 2}, 10) == 4
    assert json_depth(nested(50_000), 10) == 11  # no recursion, and no walk to the bottom


def test_a_body_at_the_depth_bound_is_read_and_one_level_more_is_a_400_that_says_what_to_do():
    # Given bodies whose parameter nests to exactly the bound, and one level more
    at_bound = json.dumps({"parameters": {"x": nested(MAX_JSON_DEPTH - 2)}}).encode()
    beyond = json.dumps({"parameters": {"x": nested(MAX_JSON_DEPTH - 1)}}).encode()
    # Then the first is read, and the second is refused with what to do
    assert json_depth(json_object(at_bound), MAX_JSON_DEPTH) == MAX_JSON_DEPTH
    with pytest.raises(ApiError) as refused:
        json_object(beyond)
    assert (refused.value.status, refused.value.reason) == (400, "too-deep")
    assert f"more than {MAX_JSON_DEPTH} levels" in refused.value.message
    assert "Flatten" in refused.value.message


def test_json_deeper_than_python_can_parse_is_a_400_not_a_recursion_error():
    body = ('{"parameters": {"x": ' + deep_json_text(100_000) + "}}").encode()
    with pytest.raises(ApiError) as refused:
        json_object(body)
    assert (refused.value.status, refused.value.reason) == (400, "too-deep")


def test_a_notebook_nested_too_deep_is_named_in_the_refusal():
    # Given a notebook whose metadata nests beyond the bound (its own, one level less)
    notebook = notebook_json("1 + 1", metadata={"deep": nested(MAX_NOTEBOOK_DEPTH)})
    # Then it is refused by name, with how to fix it
    with pytest.raises(ApiError) as refused:
        check_notebook(notebook, "work/train.ipynb")
    assert (refused.value.status, refused.value.reason) == (400, "too-deep")
    assert "'work/train.ipynb'" in refused.value.message
    assert "Clear its outputs" in refused.value.message
    # While one level less passes
    fine = notebook_json("1 + 1", metadata={"deep": nested(MAX_NOTEBOOK_DEPTH - 2)})
    assert check_notebook(fine, "work/train.ipynb") is fine


# -- the service's handlers over HTTP -----------------------------------------------------


class TokenTable(HubAuth):
    """The hub's token check, answered from a table instead of asking a hub."""

    people: dict[str, dict[str, Any]] = {}

    async def _get_user(self, handler: web.RequestHandler) -> dict[str, Any] | None:
        header = handler.request.headers.get("Authorization", "")
        model = self.people.get(header.removeprefix("token ").strip())
        return dict(model) if model else None


@dataclass
class RecordingManager:
    """Stands in for the job manager: alice has one running job; records what reaches it."""

    created: list[tuple[str, CreateJob, dict[str, Any]]] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)

    def describe(self, job_id: str, **_: Any) -> DescribeJob:
        if job_id != ALICES_JOB:
            raise JobNotFound(job_id)
        return DescribeJob(
            job_id=job_id,
            owner="alice",
            name="train",
            status=JobStatus.RUNNING,
            create_time="2030-01-01T00:00:00Z",
            update_time="2030-01-01T00:00:00Z",
            input_path="train.ipynb",
        )

    async def stop(self, job_id: str, **_: Any) -> DescribeJob:
        self.stopped.append(job_id)
        return self.describe(job_id)

    async def create(
        self, owner: str, request: CreateJob, *, notebook: dict[str, Any], **_: Any
    ) -> CreateJobResponse:
        self.created.append((owner, request, notebook))
        return CreateJobResponse(job_id=ALICES_JOB, created=True, job=self.describe(ALICES_JOB))


@dataclass
class RunningService:
    url: str
    port: int
    manager: RecordingManager

    def client(self, token: str | None = ALICE_TOKEN) -> httpx.AsyncClient:
        headers = {"Authorization": f"token {token}"} if token else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=60)


@contextlib.asynccontextmanager
async def running_service() -> AsyncIterator[RunningService]:
    manager = RecordingManager()
    api = JobsAPI(
        manager,  # type: ignore[arg-type]
        mode="hub",
        catalog=local_catalog,
        max_notebook_bytes=MAX_NOTEBOOK_BYTES,
    )
    hub_auth = TokenTable(api_token="unused", api_url="http://127.0.0.1:1/hub/api")
    hub_auth.people = {
        ALICE_TOKEN: {
            "kind": "user",
            "name": "alice",
            "groups": [],
            "scopes": [
                access_scope(),
                f"{READ_JOBS_SCOPE}!user=alice",
                f"{WRITE_JOBS_SCOPE}!user=alice",
            ],
        },
        NO_ACCESS_TOKEN: {"kind": "user", "name": "bob", "groups": [], "scopes": []},
    }
    app = web.Application(
        service_handlers(PREFIX, api=api, hub_auth=hub_auth, access_scopes={access_scope()}),
        default_handler_class=NotFoundHandler,
    )
    sock, port = bind_unused_port()
    server = HTTPServer(app, max_body_size=SERVER_CEILING)
    server.add_sockets([sock])
    try:
        yield RunningService(f"http://127.0.0.1:{port}{PREFIX}api/", port, manager)
    finally:
        server.stop()
        await server.close_all_connections()


@pytest.fixture
async def service() -> AsyncIterator[RunningService]:
    async with running_service() as running:
        yield running


def assert_json_refusal(response: httpx.Response, status: int, reason: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    error = response.json()
    assert error["reason"] == reason
    assert error["message"][0].isupper() and error["message"].endswith(".")
    return error


def raw_request(method: str, path: str, token: str | None, body: bytes = b"") -> bytes:
    headers = [f"{method} {PREFIX}api/{path} HTTP/1.1", "Host: 127.0.0.1"]
    if token:
        headers.append(f"Authorization: token {token}")
    headers += ["Content-Type: application/json", f"Content-Length: {len(body)}", "", ""]
    return "\r\n".join(headers).encode() + body


async def exchange_on_one_connection(port: int, *requests: bytes) -> list[tuple[int, dict]]:
    """Send each request whole and read its answer, all on one kept-alive connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answers = []
    try:
        for request in requests:
            writer.write(request)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            length = re.search(rb"\r\ncontent-length: *(\d+)", head, re.IGNORECASE)
            assert length, head
            body = await reader.readexactly(int(length.group(1)))
            answers.append((int(head.split()[1]), json.loads(body)))
    finally:
        writer.close()
    return answers


OVERSIZE = {
    "just over the limit": CREATE_LIMIT + 1,
    "beyond what the server buffers": 3 * SERVER_CEILING,
}


@pytest.mark.parametrize("size", OVERSIZE.values(), ids=OVERSIZE.keys())
async def test_a_notebook_over_the_limit_is_a_413_sentence_and_the_service_answers_on(
    service, size
):
    # Given a create request whose notebook is larger than the service takes
    big = notebook_json("x = '" + "a" * size + "'")
    async with service.client() as alice:
        # When alice sends it
        answer = await alice.post("jobs", json={"input_path": "big.ipynb", "notebook": big})
        # Then she is told it is too large and what to do, in JSON
        error = assert_json_refusal(answer, 413, "too-large")
        assert "Clear its outputs" in error["message"]
        # And the service answers her next request
        assert (await alice.get("config")).status_code == 200
    assert service.manager.created == []


async def test_a_chunked_body_over_the_limit_is_a_413_too(service):
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"input_path": "big.ipynb", "notebook": "'
        for _ in range(3 * SERVER_CEILING // 65536):  # beyond what the server buffers
            yield b"a" * 65536
        yield b'"}'

    async with service.client() as alice:
        answer = await alice.post("jobs", content=chunks())
        assert_json_refusal(answer, 413, "too-large")
        assert (await alice.get("config")).status_code == 200


DECLARED_TOO_MUCH = {
    "alice, beyond what is read to drop it": (ALICE_TOKEN, DISCARD_CEILING + 1, 413, "too-large"),
    "anyone, beyond what the server reads": (None, SERVER_CEILING + 1, 401, "unauthenticated"),
}


@pytest.mark.parametrize(
    ("token", "declared", "status", "reason"),
    DECLARED_TOO_MUCH.values(),
    ids=DECLARED_TOO_MUCH.keys(),
)
async def test_a_body_declared_beyond_what_is_read_is_refused_at_once_as_json(
    service, token, declared, status, reason
):
    # Given a request that announces more than the server reads, and sends none of it yet
    head = raw_request("POST", "jobs", token).replace(
        b"Content-Length: 0", f"Content-Length: {declared}".encode()
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
    try:
        writer.write(head)
        await writer.drain()
        # Then the answer comes without waiting for the body: JSON, not tornado's bare 400
        answer = await reader.read()  # the server closes the connection after it
    finally:
        writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.startswith(f"HTTP/1.1 {status} ".encode()), answer[:300]
    assert json.loads(rest.partition(b"\r\n\r\n")[2])["reason"] == reason


async def test_a_notebook_within_the_limit_reaches_the_manager_intact(service):
    notebook = notebook_json("x = '" + "a" * (MAX_NOTEBOOK_BYTES - 2_000) + "'")
    async with service.client() as alice:
        answer = await alice.post(
            "jobs", json={"input_path": "fits.ipynb", "notebook": notebook, "flavor": "local"}
        )
    assert answer.status_code == 201, answer.text
    ((owner, request, received),) = service.manager.created
    assert (owner, request.input_path, received) == ("alice", "fits.ipynb", notebook)


async def test_a_stop_request_over_its_small_limit_is_a_413(service):
    async with service.client() as alice:
        padding = "x" * SMALL_BODY_LIMIT
        answer = await alice.patch(
            f"jobs/{ALICES_JOB}", json={"status": "STOPPED", "padding": padding}
        )
        error = assert_json_refusal(answer, 413, "too-large")
        assert '{"status": "STOPPED"}' in error["message"]
        stopped = await alice.patch(f"jobs/{ALICES_JOB}", json={"status": "STOPPED"})
        assert stopped.status_code == 200, stopped.text
    assert service.manager.stopped == [ALICES_JOB]


# Anyone's upload is read up to the server's ceiling; alice's, once she is known, beyond it.
REFUSED_UPLOADS = {
    "no token": (None, SERVER_CEILING - 1000, 401, "unauthenticated"),
    "a token without access to the service": (
        NO_ACCESS_TOKEN,
        SERVER_CEILING - 1000,
        403,
        "forbidden",
    ),
    "a notebook over the limit": (ALICE_TOKEN, 3 * SERVER_CEILING, 413, "too-large"),
}


@pytest.mark.parametrize(
    ("token", "size", "status", "reason"), REFUSED_UPLOADS.values(), ids=REFUSED_UPLOADS.keys()
)
async def test_a_refused_upload_is_answered_after_it_is_in_and_the_connection_serves_on(
    service, token, size, status, reason
):
    # Given an upload the service refuses, far larger than a socket buffers
    body = b'{"input_path": "big.ipynb", "notebook": "' + b"a" * size + b'"}'
    # When it is sent whole, and another request follows on the same connection
    refused, config = await exchange_on_one_connection(
        service.port,
        raw_request("POST", "jobs", token, body),
        raw_request("GET", "config", ALICE_TOKEN),
    )
    # Then the refusal is JSON (not a reset a proxy would turn into its own error page),
    # and the connection goes on to answer the next request
    assert (refused[0], refused[1]["reason"]) == (status, reason), refused
    assert config[0] == 200 and config[1]["max_notebook_bytes"] == MAX_NOTEBOOK_BYTES
    assert service.manager.created == []


DEEP_CREATES = {
    "a parameter one level beyond the bound": json.dumps(
        {"input_path": "a.ipynb", "parameters": {"x": nested(MAX_JSON_DEPTH - 1)}}
    ),
    "notebook metadata a little beyond the bound": json.dumps(
        {
            "input_path": "a.ipynb",
            "notebook": notebook_json("1", metadata={"deep": nested(MAX_JSON_DEPTH + 10)}),
        }
    ),
    "a parameter 100,000 levels deep": (
        '{"input_path": "a.ipynb", "parameters": {"x": ' + deep_json_text(100_000) + "}}"
    ),
    "notebook outputs 5,000 levels deep": json.dumps(
        {"input_path": "a.ipynb", "notebook": notebook_json("1")}
    ).replace('"outputs": []', '"outputs": ' + deep_json_text(5_000), 1),
}


@pytest.mark.parametrize("body", DEEP_CREATES.values(), ids=DEEP_CREATES.keys())
async def test_a_create_request_nested_too_deep_is_a_400_that_says_what_to_do(service, body):
    assert len(body) < CREATE_LIMIT
    async with service.client() as alice:
        answer = await alice.post(
            "jobs", content=body.encode(), headers={"Content-Type": "application/json"}
        )
        error = assert_json_refusal(answer, 400, "too-deep")
        assert "Flatten" in error["message"]
        assert (await alice.get("config")).status_code == 200
    assert service.manager.created == []


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, 20_000])
async def test_a_stop_request_nested_too_deep_is_a_400(service, depth):
    body = '{"status": "STOPPED", "why": ' + deep_json_text(depth) + "}"
    async with service.client() as alice:
        answer = await alice.patch(
            f"jobs/{ALICES_JOB}",
            content=body.encode(),
            headers={"Content-Type": "application/json"},
        )
    assert_json_refusal(answer, 400, "too-deep")
    assert service.manager.stopped == []
