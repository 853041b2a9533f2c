"""A stand-in for Prometheus's instant-query API (``GET /api/v1/query``), for scenarios
that read GPU use per pod without running Prometheus.

It answers a query with the result it was given for exactly that query text, and refuses
any other path or query with a 400, as Prometheus refuses a bad one. It evaluates no
PromQL and checks no authentication: tests/operations/test_prometheus_gpu_use.py reads the
same series from a real Prometheus.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


def vector_sample(value: float, **labels: str) -> dict[str, Any]:
    """One element of an instant vector, as Prometheus writes it."""
    return {"metric": dict(labels), "value": [1760000000.0, str(value)]}


@contextlib.contextmanager
def prometheus_api(answers: dict[str, list[dict[str, Any]]]) -> Iterator[str]:
    """Serve ``answers`` (query text -> instant vector) on a loopback port; yields its URL.
    The dict may be changed while it serves."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            url = urlsplit(self.path)
            query = parse_qs(url.query).get("query", [""])[0]
            if url.path != "/api/v1/query" or query not in answers:
                status = 400
                body: dict[str, Any] = {"status": "error", "errorType": "bad_data"}
            else:
                status = 200
                body = {
                    "status": "success",
                    "data": {"resultType": "vector", "result": answers[query]},
                }
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
