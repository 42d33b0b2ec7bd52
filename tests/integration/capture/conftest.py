"""Fixtures and helpers of the capture tests: a source connection, a ledger, a warehouse, changelog reading."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_streambed.declarations import Mirror, RefreshGroup
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.staging import COMMIT_LSN, OP, SEQ, TOAST_MARKER_PREFIX, XID, CaptureManifest


@pytest.fixture
def source(pg_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection to a fresh source database."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    """A fresh SQLite ledger."""
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    ledger.create()
    return ledger


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    """A local warehouse URI."""
    return (tmp_path / "warehouse").as_uri()


def make_group(*tables: str, name: str = "g", append_only: tuple[str, ...] = ()) -> RefreshGroup:
    """A group mirroring ``tables``."""
    members = tuple(Mirror(table, append_only=table in append_only) for table in tables)
    return RefreshGroup(name=name, source_conn_id="src", catalog_conn_id="cat", namespace="ns", members=members)


def read_changes(manifest: CaptureManifest, member: str) -> pa.Table:
    """All changelog rows of ``member``, in file order."""
    table = next(t for t in manifest.tables if t.member == member)
    parts = [pq.read_table(uri.removeprefix("file://")) for uri in table.files]
    return pa.concat_tables(parts, promote_options="default")


def xids(manifest: CaptureManifest) -> set[int]:
    """The transaction ids in every segment of a capture (bootstrap rows excluded)."""
    found: set[int] = set()
    for table in manifest.tables:
        rows = read_changes(manifest, table.member)
        found |= {x for x, lsn in zip(rows[XID].to_pylist(), rows[COMMIT_LSN].to_pylist(), strict=True) if lsn}
    return found


def apply_changes(state: dict[tuple[Any, ...], dict[str, Any]], rows: pa.Table, key: tuple[str, ...]) -> None:
    """Apply changelog rows to ``state`` (rows by key) idempotently, as the merge does."""
    columns = [name for name in rows.column_names if not name.startswith("_")]
    ordered = sorted(rows.to_pylist(), key=lambda row: (row[COMMIT_LSN], row[SEQ]))
    for row in ordered:
        if row[OP] == "T":
            state.clear()
            continue
        row_key = tuple(row[k] for k in key)
        if row[OP] == "D":
            state.pop(row_key, None)
            continue
        image = {c: row[c] for c in columns}
        for c in columns:
            if row.get(TOAST_MARKER_PREFIX + c):
                image[c] = state[row_key][c]
        state[row_key] = image
