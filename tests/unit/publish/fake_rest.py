"""A tiny fake Iceberg REST server: its ``GET /v1/config`` (endpoints listed or not) and what it is posted."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pyiceberg.catalog.rest import RestCatalog

# pyiceberg cannot tell a listed set from its defaults for servers without a list: this one has a
# non-default endpoint, so the list is the server's.
LISTED = ["GET /v1/{prefix}/namespaces", "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan"]


class FakeServer(ThreadingHTTPServer):
    """Answers ``GET /v1/config`` with ``endpoints`` (omitted when ``None``) and a POST with ``status``;
    keeps each POST's path, headers and body."""

    endpoints: list[str] | None = None
    status = 404
    posts: list[str]
    headers: list[dict[str, str]]
    bodies: list[bytes]


class Handler(BaseHTTPRequestHandler):
    server: FakeServer

    def do_GET(self) -> None:
        config: dict[str, Any] = {"defaults": {}, "overrides": {"prefix": "wh"}}
        if self.server.endpoints is not None:
            config["endpoints"] = self.server.endpoints
        self._answer(200, json.dumps(config).encode())

    def do_POST(self) -> None:
        self.server.posts.append(self.path)
        self.server.headers.append(dict(self.headers))
        self.server.bodies.append(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self._answer(self.server.status, b"")

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serving() -> Iterator[FakeServer]:
    """A fake server on a free local port, for the block's duration."""
    fake = FakeServer(("127.0.0.1", 0), Handler)
    fake.posts, fake.headers, fake.bodies = [], [], []
    thread = threading.Thread(target=fake.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.shutdown()
        fake.server_close()


def catalog_of(server: FakeServer, **properties: str) -> RestCatalog:
    """A REST catalog of ``server`` (it reads the config on creation)."""
    return RestCatalog("fake", uri=f"http://127.0.0.1:{server.server_address[1]}", **properties)
