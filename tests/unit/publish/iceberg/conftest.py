"""Fixtures for the tests of pyiceberg's internals: a throwaway SQLite catalog and a table with one snapshot."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "kind": pa.array(["a", "b", "a"])})


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    """A SQL catalog on SQLite, its warehouse under ``tmp_path``, with namespace ``ns``."""
    opened = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=(tmp_path / "warehouse").as_uri())
    opened.create_namespace("ns")
    return opened


@pytest.fixture
def table(catalog: SqlCatalog) -> Table:
    """Table ``ns.t`` with one appended snapshot of :data:`ROWS`."""
    created = catalog.create_table("ns.t", schema=ROWS.schema)
    created.append(ROWS)
    return created
