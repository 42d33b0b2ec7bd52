"""pyiceberg's ``MetastoreCatalog`` internals, as publish/iceberg/metastore.py relies on them."""

from __future__ import annotations

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from airflow_provider_streambed.publish.iceberg.metastore import (
    default_table_location,
    next_metadata_location,
    stage_table,
)
from tests.unit.publish.iceberg.conftest import ROWS


def version_and_directory(location: str) -> tuple[str, str]:
    """``00001`` and the metadata directory of ``.../metadata/00001-<uuid>.metadata.json``."""
    directory, name = location.rsplit("/", 1)
    assert name.endswith(".metadata.json")
    return name.split("-", 1)[0], directory


def test_the_next_metadata_location_is_where_pyiceberg_commits_next(table: Table) -> None:
    # MetastoreCatalog._parse_metadata_version, and the location provider's naming
    ours = next_metadata_location(table.metadata, table.metadata_location)
    table.append(ROWS)
    assert version_and_directory(ours) == version_and_directory(table.metadata_location)
    assert ours != table.metadata_location  # a fresh name, never another attempt's file


def test_a_staged_table_is_the_table_pyiceberg_creates_without_the_commit(catalog: SqlCatalog) -> None:
    # MetastoreCatalog._create_staged_table, _resolve_table_location and Catalog._convert_schema_if_needed
    staged = stage_table(catalog, ("ns", "staged"), ROWS.schema)
    created = catalog.create_table("ns.created", schema=ROWS.schema)
    assert not catalog.table_exists("ns.staged")
    assert staged.metadata.schema() == created.metadata.schema()
    assert staged.metadata.format_version == created.metadata.format_version
    assert staged.metadata.location == default_table_location(catalog, ("ns", "staged"))
    assert created.metadata.location == default_table_location(catalog, ("ns", "created"))
    assert version_and_directory(staged.metadata_location) == ("00000", f"{staged.metadata.location}/metadata")
