"""The server extension's reclaim relay: this server's warning, and "keep", asked of the
course-sessions service with the server's own token."""

from __future__ import annotations

import json

import pytest
from tornado import web
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port

from jupyter_to_job.rest import ApiError
from jupyter_to_job.session_relay import ReclaimRelay

from ..support.hubprocess import free_loopback_ports

WARNINGS = [
    {"server": "", "reason": "idle", "seconds_left": 300, "can_keep": True, "message": "A."},
    {"server": "big", "reason": "grant-expired", "seconds_left": 60, "can_keep": False},
]


class SessionsStandIn(web.RequestHandler):
    """Answers as the service's owner API does; keeps what it was sent."""

    def initialize(self, seen: list) -> None:
        self.seen = seen

    def check_xsrf_cookie(self) -> None:
        pass

    def get(self) -> None:
        self.seen.append(("GET", self.request.headers.get("Authorization"), None))
        self.finish({"warnings": WARNINGS})

    def post(self) -> None:
        body = json.loads(self.request.body)
        self.seen.append(("POST", self.request.headers.get("Authorization"), body))
        if body["server"] == "big":
            self.set_status(403)
            self.finish({"message": "Your server 'big' cannot be kept: ...", "reason": "x"})
            return
        self.finish({"message": "Kept.", "warnings": WARNINGS[1:]})


@pytest.fixture
async def service():
    seen: list = []
    app = web.Application(
        [
            (r"/services/course-sessions/api/reclaim", SessionsStandIn, {"seen": seen}),
            (r"/services/course-sessions/api/reclaim/keep", SessionsStandIn, {"seen": seen}),
        ]
    )
    sock, port = bind_unused_port()
    server = HTTPServer(app)
    server.add_sockets([sock])
    yield f"http://127.0.0.1:{port}/services/course-sessions/", seen
    server.stop()


async def test_the_relay_reads_this_servers_warning_with_the_servers_token(service):
    url, seen = service
    default = ReclaimRelay(url, "server-token-a", "")
    named = ReclaimRelay(url, "server-token-b", "big")
    assert (await default.warning())["warning"]["reason"] == "idle"
    assert (await named.warning())["warning"]["reason"] == "grant-expired"
    assert [s[1] for s in seen] == ["token server-token-a", "token server-token-b"]


async def test_keep_is_asked_for_this_server_and_a_refusal_keeps_its_sentence(service):
    url, seen = service
    kept = await ReclaimRelay(url, "server-token-a", "").keep()
    assert kept == {"message": "Kept.", "warning": None}
    assert seen[-1] == ("POST", "token server-token-a", {"server": ""})
    with pytest.raises(ApiError) as refused:
        await ReclaimRelay(url, "server-token-b", "big").keep()
    assert refused.value.status == 403
    assert refused.value.message.startswith("Your server 'big' cannot be kept")


async def test_without_a_service_there_is_no_warning_and_nothing_to_keep():
    assert await ReclaimRelay("", "token", "").warning() == {"warning": None}
    with pytest.raises(ApiError) as refused:
        await ReclaimRelay("", "token", "").keep()
    assert refused.value.status == 409
    (closed,) = free_loopback_ports(1)
    with pytest.raises(ApiError) as unreachable:
        await ReclaimRelay(f"http://127.0.0.1:{closed}/", "token", "").warning()
    assert unreachable.value.status == 503
