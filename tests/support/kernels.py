"""Run code in a kernel of a user's real single-user server, as JupyterLab does: start a
kernel through the server's REST API, send ``execute_request`` on its websocket, and
collect what it prints."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid

import requests
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

REPLY_TIMEOUT = 120.0  # a bound for a broken test, never a timing assertion


class KernelError(AssertionError):
    """The code raised, or the kernel died."""


def run_in_kernel(server_url: str, token: str, code: str) -> str:
    """Start a python3 kernel in the server at ``server_url`` (``.../user/<name>/``), run
    ``code``, return its standard output, and shut the kernel down."""
    headers = {"Authorization": f"token {token}"}
    started = requests.post(
        server_url + "api/kernels", json={"name": "python3"}, headers=headers, timeout=60
    )
    assert started.status_code == 201, started.text
    kernel_id = started.json()["id"]
    try:
        channels = server_url.replace("http://", "ws://", 1) + f"api/kernels/{kernel_id}/channels"
        return asyncio.run(asyncio.wait_for(_execute(channels, token, code), REPLY_TIMEOUT))
    finally:
        with contextlib.suppress(requests.RequestException):  # the server may be gone
            requests.delete(server_url + f"api/kernels/{kernel_id}", headers=headers, timeout=60)


async def _execute(url: str, token: str, code: str) -> str:
    connection = await websocket_connect(
        HTTPRequest(url, headers={"Authorization": f"token {token}"})
    )
    msg_id = uuid.uuid4().hex
    connection.write_message(
        json.dumps(
            {
                "header": {
                    "msg_id": msg_id,
                    "msg_type": "execute_request",
                    "username": "test",
                    "session": uuid.uuid4().hex,
                    "date": "",
                    "version": "5.3",
                },
                "parent_header": {},
                "metadata": {},
                "content": {
                    "code": code,
                    "silent": False,
                    "store_history": False,
                    "user_expressions": {},
                    "allow_stdin": False,
                    "stop_on_error": True,
                },
                "channel": "shell",
                "buffers": [],
            }
        )
    )
    printed: list[str] = []
    try:
        while True:
            raw = await connection.read_message()
            if raw is None:
                raise KernelError("the kernel's websocket closed before the code finished")
            message = json.loads(raw)
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "stream":
                printed.append(content["text"])
            elif kind == "error":
                raise KernelError(f"{content['ename']}: {content['evalue']}")
            elif kind == "status" and content["execution_state"] == "idle":
                return "".join(printed)
    finally:
        connection.close()
