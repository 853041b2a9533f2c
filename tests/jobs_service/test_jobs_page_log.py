"""Scenarios: the hub's jobs page follows a running job's log from the browser.

The page's script fetches ``jobs/<id>/log`` with the person's service cookie. JupyterHub's
sign-in takes that cookie from a request that is not a page view (``Sec-Fetch-Mode: cors``)
only with the page's XSRF token; without it the person is not signed in, and the piece is
refused with a sentence, where it would have been sent to the hub's login. The page hands
its token to the script (``data-xsrf``), which sends it as ``X-XSRFToken``.

Stand-ins: the hub's token check (``user_for_token``, no hub API call) and the job API (one
running job, its log); the sign-in, cookie and XSRF rules are JupyterHub's own HubOAuth.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from jupyterhub.services.auth import HubOAuth
from tornado import web
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port

from jupyter_to_job.models import DescribeJob, JobLogChunk, JobStatus, ListJobsResponse
from jupyter_to_job.scopes import access_scope
from jupyter_to_job.service.jobs_page import jobs_page_handlers

PREFIX = "/services/jupyter-to-job/"
JOB = "job-1"
TOKEN = "ana-s-oauth-token"
SECRET = b"cookie secret of the test service"
LOG = "[job] runner process 4242 started\n[cell 1] report on page written\n"


class StandInHub(HubOAuth):
    """HubOAuth asking no hub: ana's token is ana."""

    async def user_for_token(self, token: str, *args: Any, **kwargs: Any) -> dict | None:
        if token != TOKEN:
            return None
        return {"kind": "user", "name": "ana", "groups": [], "scopes": [access_scope()]}


class OneRunningJob:
    """The job API as far as the page reads it: ana's running job and its log."""

    async def describe(self, caller: Any, job_id: str) -> DescribeJob:
        return DescribeJob(
            job_id=job_id,
            owner="ana",
            name="weekly report",
            status=JobStatus.RUNNING,
            create_time="2030-01-01T00:00:00Z",
            update_time="2030-01-01T00:00:00Z",
            input_path="report.ipynb",
        )

    async def read_log(self, caller: Any, job_id: str, params: dict[str, str]) -> JobLogChunk:
        data = LOG.encode()[int(params.get("offset", "0")) :]
        size = len(LOG.encode())
        return JobLogChunk(
            job_id=job_id,
            offset=size - len(data),
            next_offset=size,
            size=size,
            data=data.decode(),
            complete=False,
        )

    async def list_jobs(self, caller: Any, params: dict[str, str]) -> ListJobsResponse:
        return ListJobsResponse(jobs=[], total_count=0)


@pytest.fixture
async def page() -> AsyncIterator[httpx.AsyncClient]:
    hub = StandInHub(
        api_token="unused",
        api_url="http://127.0.0.1:1/hub/api",
        oauth_client_id="service-jupyter-to-job",
        base_url=PREFIX,
    )
    app = web.Application(
        jobs_page_handlers(
            PREFIX, api=OneRunningJob(), page_auth=hub, access_scopes={access_scope()}
        ),
        cookie_secret=SECRET,
    )
    sock, port = bind_unused_port()
    server = HTTPServer(app)
    server.add_sockets([sock])
    signed = web.create_signed_value(SECRET, hub.cookie_name, TOKEN).decode()
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", cookies={hub.cookie_name: signed}, timeout=30
        ) as client:
            yield client
    finally:
        server.stop()
        await server.close_all_connections()


async def test_the_page_script_reads_the_log_of_a_running_job_with_the_pages_token(page):
    # Given ana, signed in through the hub, on her running job's page
    opened = await page.get(f"{PREFIX}jobs/{JOB}", headers={"Sec-Fetch-Mode": "navigate"})
    assert opened.status_code == 200, opened.text
    assert 'data-complete="false"' in opened.text
    token = re.search(r'data-xsrf="([^"]+)"', opened.text)
    assert token, "the page hands its script no XSRF token"

    # When its script fetches the next piece of the log, as the browser's fetch() does
    piece = await page.get(
        f"{PREFIX}jobs/{JOB}/log",
        params={"offset": "0"},
        headers={"Sec-Fetch-Mode": "cors", "X-XSRFToken": token.group(1)},
    )

    # Then it gets the lines written so far, and the job's status
    assert piece.status_code == 200, piece.text
    assert piece.json()["data"] == LOG
    assert piece.json()["status"] == "RUNNING"


async def test_a_fetch_without_the_token_is_refused_with_what_to_do(page):
    # Given ana's cookie, but a fetch without the page's XSRF token (the old script)
    piece = await page.get(
        f"{PREFIX}jobs/{JOB}/log", params={"offset": "0"}, headers={"Sec-Fetch-Mode": "cors"}
    )

    # Then it is a 403 with a sentence the page shows, not a redirect to the hub's login
    assert piece.status_code == 403
    assert piece.json()["message"].endswith("Reload the page to read on.")
