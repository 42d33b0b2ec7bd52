"""A catalog that lacks a property streambed needs fails for good, naming the catalog and the property."""

from __future__ import annotations

import pytest
from pyiceberg.catalog.noop import NoopCatalog

from airflow_provider_streambed.catalog import ledger_of, open_catalog, staging_of
from airflow_provider_streambed.exceptions import ConfigurationError, is_final


@pytest.mark.parametrize(("properties", "missing"), [({"warehouse": "file:///w"}, "uri"),
                                                     ({"name": "lake", "uri": "sqlite://"}, "warehouse")])
def test_open_catalog_needs_a_uri_and_a_warehouse(properties: dict[str, str], missing: str) -> None:
    name = properties.get("name", "streambed")
    with pytest.raises(ConfigurationError, match=f"catalog '{name}': property '{missing}' is required") as error:
        open_catalog(properties)
    assert is_final(error.value) and isinstance(error.value, ValueError)


def test_a_catalog_other_than_sql_names_its_ledger_and_staging() -> None:
    catalog = NoopCatalog("rest_lake", warehouse="lake")
    with pytest.raises(ConfigurationError, match=r"catalog 'rest_lake' \(NoopCatalog\): property "
                                                 r"'streambed.ledger-uri' is required: the SQLAlchemy URI") as ledger:
        ledger_of(catalog)
    with pytest.raises(ConfigurationError, match=r"catalog 'rest_lake' \(NoopCatalog\): property "
                                                 r"'streambed.staging-uri' is required: where runs stage") as staging:
        staging_of(catalog)
    assert is_final(ledger.value) and is_final(staging.value)
    assert staging_of(NoopCatalog("rest_lake", **{"streambed.staging-uri": "file:///stage/"})) == "file:///stage"
