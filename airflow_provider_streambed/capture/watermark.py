"""Pinning the watermark W of a run: taken once, flushed, stored in the ledger before anything else.

``W = pg_current_wal_insert_lsn()``; a peek reads only WAL flushed when it starts, so the pin waits
(bounded) until ``pg_current_wal_flush_lsn() >= W``: an asynchronous commit before W is then
decodable, and advancing the slot to W later cannot skip it. The ledger keeps the first W pinned
for ``(group, run key)``; a retried or cleared task gets that W back.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import InvalidWatermarkError, WatermarkError
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.ledger.runs import DagRunRef
from airflow_provider_streambed.lsn import Lsn

logger = logging.getLogger(__name__)


def current_insert_lsn(conn: psycopg.Connection[Any]) -> Lsn:
    """``pg_current_wal_insert_lsn()``: where the server writes its next WAL record."""
    row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    return Lsn.parse(row[0])


def current_flush_lsn(conn: psycopg.Connection[Any]) -> Lsn:
    """``pg_current_wal_flush_lsn()``."""
    row = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
    assert row is not None
    return Lsn.parse(row[0])


def wait_for_flush(conn: psycopg.Connection[Any], group: str, watermark: Lsn, timeout_seconds: float) -> None:
    """Wait until the server has flushed WAL up to ``watermark``.

    Raises:
        WatermarkError: not flushed within ``timeout_seconds``.
    """
    deadline = time.monotonic() + timeout_seconds
    delay = 0.005
    while (flushed := current_flush_lsn(conn)) < watermark:
        if time.monotonic() > deadline:
            raise WatermarkError(
                f"group {group!r}: WAL is flushed only up to {flushed}, not W={watermark}, "
                f"after {timeout_seconds} s; is the server's disk stalled?"
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def check_explicit_watermark(
    conn: psycopg.Connection[Any], ledger: Ledger, group: RefreshGroup, watermark: Lsn, floor: Lsn | None = None
) -> None:
    """Refuse an explicit W below the last published cut (or ``floor``) or beyond the flushed WAL.

    Raises:
        WatermarkError: the message names the group, W and the bound it violates.
    """
    last = ledger.last_cut(group.name)
    if last is not None and watermark < last.watermark:
        raise InvalidWatermarkError(
            f"group {group.name!r}: explicit W={watermark} is below cut {last.cut_id}'s W={last.watermark}; "
            "a cut never goes back in time"
        )
    if floor is not None and watermark < floor:
        raise InvalidWatermarkError(
            f"group {group.name!r}: explicit W={watermark} is below the slot's confirmed position {floor}"
        )
    flushed = current_flush_lsn(conn)
    if watermark > flushed:
        raise InvalidWatermarkError(
            f"group {group.name!r}: explicit W={watermark} is beyond the source's flushed WAL {flushed}"
        )


def pin_watermark(
    conn: psycopg.Connection[Any],
    ledger: Ledger,
    group: RefreshGroup,
    run_key: str,
    *,
    explicit_watermark: Lsn | None = None,
    flush_timeout_seconds: float = 30.0,
    floor: Lsn | None = None,
    dag_run: DagRunRef | None = None,
) -> Lsn:
    """The run's W: the one stored in the ledger, else a new one pinned and stored first.

    Args:
        conn: an autocommit connection to the source database.
        ledger: the run ledger.
        group: the refresh group.
        run_key: the run key; a second call with it returns the stored W.
        explicit_watermark: pin this W instead of the current insert position (checked).
        flush_timeout_seconds: how long to wait for the WAL flush up to W.
        floor: a lower bound for an explicit W besides the last cut (the slot's position).
        dag_run: the Airflow DAG run behind the run, stored with the pin.

    Raises:
        WatermarkError: a bad explicit W, or the flush wait timed out.
    """
    stored = ledger.get_run(group.name, run_key)
    if stored is not None:
        if explicit_watermark is not None and explicit_watermark != stored.watermark:
            raise InvalidWatermarkError(
                f"group {group.name!r}, run {run_key!r}: explicit W={explicit_watermark} differs from the W="
                f"{stored.watermark} this run pinned before; a run keeps its first W"
            )
        logger.info("group=%s run=%s W=%s: reusing the pinned watermark", group.name, run_key, stored.watermark)
        return stored.watermark
    if explicit_watermark is not None:
        check_explicit_watermark(conn, ledger, group, explicit_watermark, floor)
        watermark = explicit_watermark
    else:
        watermark = current_insert_lsn(conn)
        wait_for_flush(conn, group.name, watermark, flush_timeout_seconds)
    record = ledger.pin_run(group.name, run_key, watermark, dag_run)
    logger.info("group=%s run=%s W=%s: pinned", group.name, run_key, record.watermark)
    return record.watermark
