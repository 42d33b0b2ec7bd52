"""pyiceberg's ``RestCatalog`` internals, as publish/iceberg/rest.py relies on them (against a fake server)."""

from __future__ import annotations

from pyiceberg.catalog.rest import DEFAULT_ENDPOINTS, VIEW_ENDPOINTS, Endpoint

from airflow_provider_streambed.publish.iceberg.rest import post_json, supported_endpoints
from tests.unit.publish.fake_rest import LISTED, FakeServer, catalog_of


def test_the_supported_endpoints_are_the_server_s_list_else_pyiceberg_s_defaults(server: FakeServer) -> None:
    # RestCatalog._supported_endpoints
    server.endpoints = LISTED
    assert supported_endpoints(catalog_of(server)) == {Endpoint.from_string(endpoint) for endpoint in LISTED}
    server.endpoints = None
    assert supported_endpoints(catalog_of(server)) == set(DEFAULT_ENDPOINTS)
    views = catalog_of(server, **{"view-endpoints-supported": "true"})
    assert supported_endpoints(views) == set(DEFAULT_ENDPOINTS) | set(VIEW_ENDPOINTS)


def test_a_post_goes_under_the_prefix_on_the_catalog_s_signed_session(server: FakeServer) -> None:
    # RestCatalog._session: it carries the catalog's auth and configured headers
    server.status = 204
    catalog = catalog_of(server, token="secret-token", **{"header.X-Streambed-Test": "yes"})
    response = post_json(catalog, "transactions/commit", b'{"table-changes": []}')
    assert response.status_code == 204
    assert server.posts == ["/v1/wh/transactions/commit"] and server.bodies == [b'{"table-changes": []}']
    headers = {name.lower(): value for name, value in server.headers[0].items()}
    assert headers["authorization"] == "Bearer secret-token"
    assert headers["x-streambed-test"] == "yes" and headers["content-type"] == "application/json"
