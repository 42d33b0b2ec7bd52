"""Bootstrap copies: a mirrored table's full content, taken so that the changelog completes it to W.

**First run of a group.** The slot is created over a replication connection with
``EXPORT_SNAPSHOT`` (:func:`.slot.create_slot_with_snapshot`); its consistent point is ``L0``.
Every mirrored table is copied (``COPY ... TO STDOUT``) in one ``REPEATABLE READ`` transaction
that imports that snapshot, so the copy holds exactly the transactions with commit LSN < L0, and
the slot decodes exactly those with commit LSN >= L0. W is pinned after the copy; extraction
then writes the changes of ``[L0, W)``. The merge applies them on top of the copy in commit order,
idempotently (upsert by key, delete if present, truncate drops what came before), which gives:
copy state at L0 + every transaction in [L0, W) in commit order = the state containing exactly the
transactions with commit LSN < W. Idempotence makes the result the same even where the copy
already contains a change (see below), so exactness does not hinge on the snapshot alone.

**A mirror added to a group that already has cuts.** Its table is added to the publication
(``ALTER PUBLICATION ... SET TABLE``, committed by :func:`.source.ensure_source`) and then copied
in a ``REPEATABLE READ`` transaction started after that commit. Changes committed after the ALTER
are decoded; those committed before it are in the copy; those committed between the ALTER and
the copy's snapshot are in both, which the idempotent merge absorbs (an append-only mirror added
this way may therefore see such rows twice). Copy rows are ``I`` with ``_commit_lsn`` 0.

A small record, ``_capture/bootstrap.json``, is written after the copies; a retried run whose
slot still sits at the recorded consistent point reuses them instead of copying again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

import psycopg
from psycopg import sql

from airflow_provider_streambed.capture.changelog import DEFAULT_BATCH_ROWS, TableLog
from airflow_provider_streambed.capture.extract import configure_decoding_session
from airflow_provider_streambed.capture.names import quoted_table
from airflow_provider_streambed.capture.source import SourceTable
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.staging import OP_INSERT, join, read_json, write_json

logger = logging.getLogger(__name__)

MARKER_NAME = "bootstrap.json"
#: ``_commit_lsn`` of copied rows: before every decoded change.
COPY_COMMIT_LSN = 0


@dataclass(frozen=True, slots=True)
class BootstrapCopy:
    """The copy of one table: its files, row count and columns."""

    files: tuple[str, ...]
    rows: int
    columns: tuple[str, ...]


class BootstrapMarker(NamedTuple):
    """The copies a run recorded: the slot's consistent point (first run only) and copies by member."""

    consistent_point: Lsn | None
    copies: dict[str, BootstrapCopy]


def read_marker(capture_dir: str) -> BootstrapMarker | None:
    """The recorded copies of a run, or ``None``."""
    data = read_json(join(capture_dir, MARKER_NAME))
    if data is None:
        return None
    point = None if data["consistent_point"] is None else Lsn.parse(data["consistent_point"])
    copies = {
        member: BootstrapCopy(tuple(item["files"]), int(item["rows"]), tuple(item["columns"]))
        for member, item in data["tables"].items()
    }
    return BootstrapMarker(point, copies)


def write_marker(capture_dir: str, consistent_point: Lsn | None, copies: dict[str, BootstrapCopy]) -> None:
    """Record the copies of a run (written after every copy is complete)."""
    write_json(
        join(capture_dir, MARKER_NAME),
        {
            "consistent_point": None if consistent_point is None else str(consistent_point),
            "tables": {
                member: {"files": list(copy.files), "rows": copy.rows, "columns": list(copy.columns)}
                for member, copy in copies.items()
            },
        },
    )


def _copy_table(
    conn: psycopg.Connection[Any], group: RefreshGroup, table: SourceTable, capture_dir: str, batch_rows: int
) -> BootstrapCopy:
    log = TableLog(
        f"group {group.name!r}, member {table.member!r}, table {table.qualified_name!r}",
        join(capture_dir, table.member), "bootstrap", table.layout, batch_rows,
    )
    schema, name = table.qualified_name.split(".", 1)
    columns = sql.SQL(", ").join(sql.Identifier(column) for column in table.columns)
    statement = sql.SQL("COPY (SELECT {} FROM {}) TO STDOUT").format(columns, quoted_table(schema, name))
    with conn.cursor() as cursor, cursor.copy(statement) as copy:
        copy.set_types(["text"] * len(table.columns))
        rows: list[tuple[Any, ...]] = []
        for row in copy.rows():
            rows.append(row)
            if len(rows) >= batch_rows:
                log.add_rows(rows, OP_INSERT, COPY_COMMIT_LSN)
                rows = []
        log.add_rows(rows, OP_INSERT, COPY_COMMIT_LSN)
    files = log.close()
    return BootstrapCopy(files, log.changes, table.columns)


def copy_tables(
    conn: psycopg.Connection[Any],
    group: RefreshGroup,
    tables: list[SourceTable],
    capture_dir: str,
    *,
    snapshot_name: str | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> dict[str, BootstrapCopy]:
    """Copy ``tables`` in one REPEATABLE READ transaction, optionally at an exported snapshot.

    Args:
        conn: an autocommit connection to the source database.
        group: the refresh group.
        tables: the tables to copy.
        capture_dir: the run's ``_capture`` directory URI; files go to ``<member>/bootstrap-*.parquet``.
        snapshot_name: the snapshot exported at the slot's consistent point (first run).
        batch_rows: rows per Parquet row group.

    Returns:
        The copies by member name.
    """
    began = time.monotonic()
    configure_decoding_session(conn)
    copies: dict[str, BootstrapCopy] = {}
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        if snapshot_name is not None:
            conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot_name)))
        for table in tables:
            copies[table.member] = _copy_table(conn, group, table, capture_dir, batch_rows)
    logger.info(
        "group=%s: bootstrap copied %s in %.2f s", group.name,
        ", ".join(f"{member}={copy.rows} rows" for member, copy in copies.items()), time.monotonic() - began,
    )
    return copies
