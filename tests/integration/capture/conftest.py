"""Fixtures and helpers of the capture tests: a source connection, a ledger, a warehouse, changelog reading."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import psycopg.rows
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_streambed.capture.run_records import CaptureResult
from airflow_provider_streambed.capture.slot import advance_slot
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.ledger import CutMember, Ledger
from airflow_provider_streambed.member_declarations import Mirror
from airflow_provider_streambed.staging import COMMIT_LSN, OP, SEQ, TOAST_MARKER_PREFIX, XID, CaptureManifest

Row = dict[str, Any]


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


def read_copy(manifest: CaptureManifest, member: str) -> pa.Table:
    """The bootstrap copy of ``member`` (its columns only)."""
    table = next(t for t in manifest.tables if t.member == member)
    return pa.concat_tables([pq.read_table(uri.removeprefix("file://")) for uri in table.copy_files])


def read_changes(manifest: CaptureManifest, member: str) -> pa.Table:
    """The rows of ``member``'s copy (as inserts before every change, if copied), then its changelog rows."""
    table = next(t for t in manifest.tables if t.member == member)
    parts = [pq.read_table(uri.removeprefix("file://")) for uri in table.files]
    if table.copy_files:
        copied = read_copy(manifest, member)
        count = copied.num_rows
        parts.insert(0, copied.append_column(COMMIT_LSN, pa.array([0] * count, pa.int64()))
                     .append_column(XID, pa.array([0] * count, pa.int64()))
                     .append_column(SEQ, pa.array(range(count), pa.int64()))
                     .append_column(OP, pa.array(["I"] * count, pa.string())))
    return pa.concat_tables(parts, promote_options="default")


def xids(manifest: CaptureManifest) -> set[int]:
    """The transaction ids in every segment of a capture (bootstrap rows excluded)."""
    found: set[int] = set()
    for table in manifest.tables:
        rows = read_changes(manifest, table.member)
        found |= {x for x, lsn in zip(rows[XID].to_pylist(), rows[COMMIT_LSN].to_pylist(), strict=True) if lsn}
    return found


def apply_changes(state: dict[tuple[Any, ...], Row], rows: pa.Table, key: tuple[str, ...]) -> None:
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


def publish(conn: psycopg.Connection[Any], ledger: Ledger, group: RefreshGroup, result: CaptureResult) -> None:
    """Stand in for the publish step: record the cut (every member) and advance the slot."""
    members = {m.name: CutMember(m.name, f"ns.{m.name}", 1, "memory://") for m in group.members}
    with ledger.begin() as connection:
        ledger.record_cut(connection, group.name, result.manifest.run_key, result.watermark, members)
    advance_slot(conn, group, result.watermark)


def table_state(conn: psycopg.Connection[Any], table: str, key: tuple[str, ...]) -> dict[tuple[Any, ...], Row]:
    """The table's rows by key as the source holds them now (typed like the changelog)."""
    cursor = conn.cursor(row_factory=psycopg.rows.dict_row)
    return {tuple(row[k] for k in key): row for row in cursor.execute(f"SELECT * FROM {table}")}
