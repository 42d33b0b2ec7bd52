"""Fixtures for publish tests: a catalog (SQLite and PostgreSQL) with its ledger, warehouse under tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from airflow_provider_streambed.catalog import open_catalog
from airflow_provider_streambed.ledger import Ledger


@pytest.fixture
def catalog_props(catalog_uri: str, tmp_path: Path) -> dict[str, str]:
    """Catalog properties: the parametrized catalog database and a ``file://`` warehouse."""
    return {"uri": catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}


@pytest.fixture
def sqlite_props(sqlite_catalog_uri: str, tmp_path: Path) -> dict[str, str]:
    """Catalog properties on SQLite only (for tests whose logic does not depend on the database)."""
    return {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}


@pytest.fixture
def catalog(catalog_props: dict[str, str]) -> SqlCatalog:
    """An open SQL catalog."""
    opened = open_catalog(catalog_props)
    assert isinstance(opened, SqlCatalog)
    return opened


@pytest.fixture
def ledger(catalog: SqlCatalog) -> Ledger:
    """The ledger in the catalog's database, created."""
    created = Ledger(catalog.engine)
    created.create()
    return created
