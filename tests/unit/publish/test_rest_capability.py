"""The REST group commit's capability check against a tiny fake server (only for the refusal; the
commits themselves run on a real SeaweedFS in tests/integration/rest), and a REST catalog that
does not answer."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
import requests
from pyiceberg.exceptions import ForbiddenError, ServerError, ServiceUnavailableError, TooManyRequestsError

from airflow_provider_streambed.declarations import CutRetention
from airflow_provider_streambed.exceptions import CatalogCapabilityError, CatalogUnavailableError
from airflow_provider_streambed.publish import check_capability
from airflow_provider_streambed.publish.reconcile import reaching
from airflow_provider_streambed.publish.rest import TRANSACTIONS_ENDPOINT, supports_transactions
from tests.integration.publish.helpers import make_group
from tests.unit.publish.fake_rest import LISTED, FakeServer, catalog_of


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
