"""The REST group commit's capability check against a tiny fake server (only for the refusal; the
commits themselves run on a real SeaweedFS in tests/integration/rest), and the pyiceberg private
APIs :mod:`airflow_provider_streambed.publish.rest` relies on."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import pytest
import requests
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError, ServerError, ServiceUnavailableError, TooManyRequestsError
from pyiceberg.table import Transaction

from airflow_provider_streambed.declarations import CutRetention
from airflow_provider_streambed.exceptions import CatalogCapabilityError, CatalogUnavailableError
from airflow_provider_streambed.publish import check_capability
from airflow_provider_streambed.publish.reconcile import reaching
from airflow_provider_streambed.publish.rest import TRANSACTIONS_ENDPOINT, supports_transactions
from tests.integration.publish.helpers import make_group

# pyiceberg cannot tell a listed set from its defaults for servers without a list: this one has a
# non-default endpoint, so the list is the server's.
LISTED = ["GET /v1/{prefix}/namespaces", "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan"]


class FakeServer(ThreadingHTTPServer):
    """Answers ``GET /v1/config`` with ``endpoints`` (omitted when ``None``) and a commit with ``status``."""

    endpoints: list[str] | None = None
    status = 404
    posts: list[str]


class Handler(BaseHTTPRequestHandler):
    server: FakeServer

    def do_GET(self) -> None:
        config: dict[str, Any] = {"defaults": {}, "overrides": {"prefix": "wh"}}
        if self.server.endpoints is not None:
            config["endpoints"] = self.server.endpoints
        self._answer(200, json.dumps(config).encode())

    def do_POST(self) -> None:
        self.server.posts.append(self.path)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._answer(self.server.status, b"")

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer(("127.0.0.1", 0), Handler)
    fake.posts = []
    thread = threading.Thread(target=fake.serve_forever, daemon=True)
    thread.start()
    yield fake
    fake.shutdown()
    fake.server_close()


def catalog_of(server: FakeServer) -> RestCatalog:
    return RestCatalog("fake", uri=f"http://127.0.0.1:{server.server_address[1]}")


def test_a_server_listing_its_endpoints_is_taken_at_its_word(server: FakeServer) -> None:
    server.endpoints = [*LISTED, str(TRANSACTIONS_ENDPOINT)]
    assert supports_transactions(catalog_of(server)) and server.posts == []
    server.endpoints = LISTED
    catalog = catalog_of(server)
    assert not supports_transactions(catalog) and server.posts == []
    with pytest.raises(CatalogCapabilityError, match=r"catalog 'fake' \(RestCatalog\) cannot commit several tables "
                                                     r"atomically; .*POST /v1/\{prefix\}/transactions/commit"):
        check_capability(catalog, make_group())
    assert not check_capability(catalog, make_group(atomicity="per_table"))
    server.endpoints = [*LISTED, str(TRANSACTIONS_ENDPOINT)]
    kept = replace(make_group(), retention=CutRetention(keep_last=3))
    with pytest.raises(CatalogCapabilityError, match=r"cut retention runs on SQL catalogs only so far"):
        check_capability(catalog_of(server), kept)


@pytest.mark.parametrize(("status", "supported"), [(204, True), (404, False), (405, False), (501, False)])
def test_a_server_without_a_list_is_probed_with_an_empty_commit(server: FakeServer, status: int,
                                                                supported: bool) -> None:
    server.status = status
    assert supports_transactions(catalog_of(server)) is supported
    assert server.posts == ["/v1/wh/transactions/commit"]


def test_the_private_apis_the_rest_commit_uses(server: FakeServer) -> None:
    catalog = catalog_of(server)
    assert isinstance(catalog._session, requests.Session)  # carries the catalog's auth (SigV4, OAuth2) adapters
    assert isinstance(catalog._supported_endpoints, set)
    assert catalog.url("transactions/commit", prefixed=True).endswith("/v1/wh/transactions/commit")
    assert {"_updates", "_requirements", "_table"} <= set(Transaction.__init__.__code__.co_names)


@pytest.mark.parametrize("error", [ServerError("boom"), ServiceUnavailableError("busy"), TooManyRequestsError("slow"),
                                   requests.ConnectionError("refused")], ids=lambda error: type(error).__name__)
def test_a_catalog_down_or_overloaded_is_unavailable_and_retryable(error: Exception) -> None:
    catalog = SimpleNamespace(name="lake", properties={"uri": "https://user:secret@rest.example:8181/api?token=t"})
    message = (rf"catalog 'lake': the REST catalog at https://rest.example:8181/api cannot be reached or cannot "
               rf"answer now \({type(error).__name__}\); retry it")
    with pytest.raises(CatalogUnavailableError, match=message) as raised, reaching(catalog, "retry it"):  # type: ignore[arg-type]
        raise error
    assert "secret" not in str(raised.value) and "token" not in str(raised.value)


def test_a_catalog_that_refuses_is_not_unavailable() -> None:
    catalog = SimpleNamespace(name="lake", properties={"uri": "http://rest:8181"})
    with pytest.raises(ForbiddenError), reaching(catalog):  # type: ignore[arg-type]
        raise ForbiddenError("no")
