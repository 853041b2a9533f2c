"""Real receivers of the job service's finish notifications, for scenarios.

- :class:`MailSink`: a real SMTP server (aiosmtpd) on a free loopback port that keeps
  every message it is given;
- :class:`WebhookReceiver`: a small tornado HTTP server that keeps every POST (body and
  headers) and answers with a status of the test's choosing.

Both run on threads of their own, so synchronous scenarios (a hub's job service called
with ``requests``) and asynchronous ones (a manager on the test's loop) use them alike.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from tornado import web
from tornado.httpserver import HTTPServer

from .hubprocess import free_loopback_ports


class _Keep:
    """The aiosmtpd handler: keep each message, accept it."""

    def __init__(self, messages: list[EmailMessage]):
        self.messages = messages

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        message = message_from_bytes(envelope.content, policy=policy.default)
        assert isinstance(message, EmailMessage)
        self.messages.append(message)
        return "250 Message accepted for delivery"


class MailSink:
    """A real SMTP server on ``127.0.0.1:<port>`` keeping the mails it receives."""

    def __init__(self) -> None:
        (self.port,) = free_loopback_ports(1)
        self.host = "127.0.0.1"
        self.messages: list[EmailMessage] = []
        self._controller = Controller(_Keep(self.messages), hostname=self.host, port=self.port)

    def start(self) -> MailSink:
        self._controller.start()
        return self

    def stop(self) -> None:
        self._controller.stop()

    def to(self, address: str) -> list[EmailMessage]:
        return [message for message in self.messages if message["To"] == address]


def mail_sink_fixture(scope: str = "function"):  # type: ignore[no-untyped-def]
    """A pytest fixture yielding a started :class:`MailSink`, stopped afterwards:
    ``mail_sink = mail_sink_fixture()`` in a test module or conftest."""

    @pytest.fixture(scope=scope)  # type: ignore[call-overload]
    def mail_sink() -> Iterator[MailSink]:
        sink = MailSink().start()
        try:
            yield sink
        finally:
            sink.stop()

    return mail_sink


@dataclass
class ReceivedHook:
    body: bytes
    headers: dict[str, str]


@dataclass
class WebhookReceiver:
    """A tornado server on a free loopback port; ``url`` is where to POST."""

    status: int = 200
    received: list[ReceivedHook] = field(default_factory=list)
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}/hook"

    def start(self) -> WebhookReceiver:
        (self.port,) = free_loopback_ports(1)
        ready = threading.Event()
        receiver = self

        class Hook(web.RequestHandler):
            def post(self) -> None:
                receiver.received.append(
                    ReceivedHook(self.request.body, dict(self.request.headers.get_all()))
                )
                self.set_status(receiver.status)
                self.finish()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            server = HTTPServer(web.Application([("/hook", Hook)]))
            server.listen(self.port, "127.0.0.1")
            loop.call_soon(ready.set)
            loop.run_forever()
            server.stop()
            loop.close()

        self._thread = threading.Thread(target=serve, name="webhook-receiver", daemon=True)
        self._thread.start()
        ready.wait()
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()


def webhook_receiver_fixture(scope: str = "function"):  # type: ignore[no-untyped-def]
    """A pytest fixture yielding a started :class:`WebhookReceiver`, stopped afterwards:
    ``webhook_receiver = webhook_receiver_fixture()``."""

    @pytest.fixture(scope=scope)  # type: ignore[call-overload]
    def webhook_receiver() -> Iterator[WebhookReceiver]:
        receiver = WebhookReceiver().start()
        try:
            yield receiver
        finally:
            receiver.stop()

    return webhook_receiver
