"""Extraction: read the slot's changes up to W and write them as changelog segments.

``pg_logical_slot_peek_binary_changes(slot, W, NULL, 'proto_version', '1', 'publication_names',
pub)`` is read through a server-side cursor in batches; each row holds one pgoutput message, which
:class:`.change_stream.ChangeStream` turns into changelog rows (it decides which transactions are
kept). The slot is never advanced here (see :func:`.slot.advance_slot`).
"""

from __future__ import annotations

import datetime as dt
import gc
import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg

from airflow_provider_streambed.capture.change_stream import ChangeStream
from airflow_provider_streambed.capture.changelog import DEFAULT_BATCH_ROWS, TableLog
from airflow_provider_streambed.capture.copy_snapshot import CopyFilter, CopySnapshot
from airflow_provider_streambed.capture.names import publication_name, slot_name
from airflow_provider_streambed.capture.pgoutput import commit_timestamp
from airflow_provider_streambed.capture.source import SourceTable
from airflow_provider_streambed.capture.type_resolver import TypeResolver
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.staging import join

logger = logging.getLogger(__name__)

#: Settings of the decoding session: pgoutput's text output depends on them.
DECODING_SETTINGS = {
    "TimeZone": "UTC",
    "DateStyle": "ISO, MDY",
    "IntervalStyle": "postgres",
    "extra_float_digits": "3",
    "bytea_output": "hex",
}
PEEK_QUERY = (
    "SELECT data FROM pg_logical_slot_peek_binary_changes(%s, %s::text::pg_lsn, NULL, "
    "'proto_version', '1', 'publication_names', %s)"
)
DEFAULT_FETCH_ROWS = 20_000


def configure_decoding_session(conn: psycopg.Connection[Any]) -> None:
    """Pin the session settings that pgoutput's text values depend on."""
    for name, value in DECODING_SETTINGS.items():
        conn.execute("SELECT set_config(%s, %s, false)", (name, value))


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector: decoding allocates millions of acyclic objects."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True, slots=True)
class ExtractResult:
    """What an extraction wrote."""

    transactions: int
    skipped: int
    messages: int
    files: dict[str, tuple[str, ...]]
    changes: dict[str, int]
    columns: dict[str, tuple[str, ...]]
    newest_commit_at: dt.datetime | None = None
    old_images: dict[str, bool] = field(default_factory=dict)


def extract_changes(
    conn: psycopg.Connection[Any],
    group: RefreshGroup,
    tables: dict[str, SourceTable],
    capture_dir: str,
    start: Lsn,
    watermark: Lsn,
    *,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    fetch_rows: int = DEFAULT_FETCH_ROWS,
    copied_at: Mapping[str, CopySnapshot] | None = None,
) -> ExtractResult:
    """Write the changes of the transactions with ``start <= commit LSN < W`` under ``capture_dir``.

    Args:
        conn: an autocommit connection to the source database (its session settings are pinned).
        group: the refresh group.
        tables: the mirrored tables by member name (from :func:`.setup.ensure_source`).
        capture_dir: the run's ``_capture`` directory URI; files go to ``<member>/changes-*.parquet``.
        start: the slot's confirmed position.
        watermark: W.
        batch_rows: rows per Parquet row group.
        fetch_rows: peek rows fetched per round trip.
        copied_at: the copy snapshots of members added this run: their changes of transactions a
            snapshot holds are in the copy already, and dropped.

    Returns:
        Counts and the files written, by member.
    """
    logs = {
        member: TableLog(
            f"group {group.name!r}, member {member!r}, table {table.qualified_name!r}",
            join(capture_dir, member), table.layout, table.types, batch_rows,
        )
        for member, table in tables.items()
    }
    copies = {member: CopyFilter(snapshot) for member, snapshot in (copied_at or {}).items()}
    stream = ChangeStream(group.name, tables, logs, start, watermark, TypeResolver(conn).column_types, copies)
    configure_decoding_session(conn)
    began = time.monotonic()
    messages = 0
    with conn.transaction(), _collector_paused():
        cursor = conn.cursor(name="streambed_peek", binary=True)
        cursor.execute(PEEK_QUERY, (slot_name(group), str(watermark), publication_name(group)))
        while batch := cursor.fetchmany(fetch_rows):
            messages += len(batch)
            feed = stream.feed
            for (data,) in batch:
                feed(data)
        cursor.close()
    stream.finish()
    files = {member: log.close() for member, log in logs.items()}
    logger.info(
        "group=%s W=%s: extracted transactions=%d (skipped %d) messages=%d in %.2f s",
        group.name, watermark, stream.transactions, stream.skipped, messages, time.monotonic() - began,
    )
    for member, copy in copies.items():
        logger.info("group=%s W=%s: dropped %d changes of member %s that its copy holds", group.name, watermark,
                    copy.dropped, member)
    return ExtractResult(
        transactions=stream.transactions,
        skipped=stream.skipped,
        messages=messages,
        files=files,
        changes={member: log.changes for member, log in logs.items()},
        columns={member: tuple(c.name for c in log.layout) for member, log in logs.items()},
        newest_commit_at=None if stream.newest_commit_time is None else commit_timestamp(stream.newest_commit_time),
        old_images={member: member not in stream.without_old_images for member in logs},
    )
