"""Asset URIs of member tables, and Airflow's check of a ``streambed://`` URI."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest

from airflow_provider_streambed import Mirror, RefreshGroup
from airflow_provider_streambed.assets import member_asset_uri, sanitize_uri
from airflow_provider_streambed.exceptions import DeclarationError

GROUP = RefreshGroup(name="bank", source_conn_id="bank_pg", catalog_conn_id="lake", namespace="bank",
                     members=[Mirror("accounts")])


def test_a_member_uri_passes_the_check() -> None:
    uri = urlsplit(member_asset_uri(GROUP, "ACCOUNTS"))
    assert sanitize_uri(uri) == uri and uri.geturl() == "streambed://lake/bank/accounts"


@pytest.mark.parametrize("uri", ["streambed:///bank/accounts", "streambed://lake/accounts", "streambed://lake/a/b/c"])
def test_a_uri_without_catalog_namespace_and_table_is_a_declaration_error(uri: str) -> None:
    shown = re.escape(urlsplit(uri).geturl())
    with pytest.raises(DeclarationError, match=f"'{shown}': a streambed Asset URI is streambed://<catalog>/"):
        sanitize_uri(urlsplit(uri))
    with pytest.raises(ValueError, match="a streambed Asset URI"):  # what Airflow expects of a URI check
        sanitize_uri(urlsplit(uri))
