"""Benchmark of capture extraction: decoded row changes/s next to the raw peek of the same range.

Two workloads on a throwaway PostgreSQL cluster: one transaction inserting ``--rows`` rows, and
``--transactions`` one-row transactions. For each, the same WAL range is read twice through the
same kind of cursor (named, binary, ``fetchmany``): once raw (rows fetched, nothing decoded) and
once by :func:`~airflow_provider_streambed.capture.extract.extract_changes` (decoded, typed, written
to Parquet). Server-side decoding is part of both, so the ratio shows the client's overhead.
Prints figures and ratios; no assertion on time.

    .venv/bin/python -m benchmarks.bench_capture [--rows 1000000] [--transactions 100000] [--quick]
"""

from __future__ import annotations

import argparse
import logging
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa

from airflow_provider_streambed.capture.extract import DEFAULT_FETCH_ROWS, PEEK_QUERY, extract_changes
from airflow_provider_streambed.capture.names import publication_name, slot_name
from airflow_provider_streambed.capture.setup import ensure_source
from airflow_provider_streambed.capture.slot import advance_slot, check_slot
from airflow_provider_streambed.capture.watermark import current_flush_lsn
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.member_declarations import Mirror
from airflow_provider_streambed.testing.postgres import ThrowawayCluster
from benchmarks.quick import parse_arguments

GROUP = RefreshGroup("bench", "src", "cat", "ns", members=(Mirror("bench"),))


def raw_fetch(conn: psycopg.Connection[Any], watermark: Any) -> tuple[int, float]:
    """Fetch the peek rows without decoding; returns (messages, seconds)."""
    began = time.perf_counter()
    messages = 0
    with conn.transaction():
        cursor = conn.cursor(name="raw_peek", binary=True)
        cursor.execute(PEEK_QUERY, (slot_name(GROUP), str(watermark), publication_name(GROUP)))
        while batch := cursor.fetchmany(DEFAULT_FETCH_ROWS):
            messages += len(batch)
        cursor.close()
    return messages, time.perf_counter() - began


def measure(conn: psycopg.Connection[Any], label: str, out: Path) -> None:
    """Time raw and decoded reads of everything up to the current flush LSN, then advance."""
    watermark = current_flush_lsn(conn)
    start = check_slot(conn, GROUP).confirmed_flush
    tables = ensure_source(conn, GROUP)
    messages, raw_seconds = raw_fetch(conn, watermark)
    began = time.perf_counter()
    result = extract_changes(conn, GROUP, tables, (out / label).as_uri(), start, watermark)
    seconds = time.perf_counter() - began
    changes = result.changes["bench"]
    raw_rate, rate = changes / raw_seconds, changes / seconds
    print(f"{label}: {changes} row changes in {result.transactions} transactions ({messages} messages)")
    print(f"  raw peek fetch : {raw_seconds:7.2f} s  {raw_rate:10,.0f} changes/s")
    print(f"  extraction     : {seconds:7.2f} s  {rate:10,.0f} changes/s  = {rate / raw_rate:.0%} of raw"
          f"  (goal >= 300,000/s and >= 50%)")
    print(f"  peak client RSS so far: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    advance_slot(conn, GROUP, watermark)


def main() -> None:
    """Run both workloads and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--transactions", type=int, default=100_000)
    args = parse_arguments(parser, quick={"rows": 1_000, "transactions": 100})
    logging.basicConfig(level=logging.WARNING)
    began = time.perf_counter()
    pa.array([b""], pa.binary())  # pyarrow imports pandas on first use: a one-time cost per process
    print(f"one-time pyarrow/pandas import: {time.perf_counter() - began:.2f} s (not in the figures below)")
    with ThrowawayCluster(settings={"logical_decoding_work_mem": "'64MB'"}) as cluster, \
            psycopg.connect(cluster.dsn(), autocommit=True) as conn, tempfile.TemporaryDirectory() as out:
        conn.execute("CREATE TABLE bench (id bigint PRIMARY KEY, name text, amount numeric(12,2), at timestamptz)")
        ensure_source(conn, GROUP)
        conn.execute(
            "INSERT INTO bench SELECT g, 'name ' || g, g / 100.0, now() FROM generate_series(1, %s) g", (args.rows,)
        )
        measure(conn, f"one transaction of {args.rows:,} rows", Path(out))
        count = int(args.transactions)
        conn.execute(
            f"DO $$ BEGIN FOR i IN 1..{count} LOOP "
            "INSERT INTO bench VALUES (-i, 'n', i, now()); COMMIT; END LOOP; END $$"
        )
        measure(conn, f"{args.transactions:,} one-row transactions", Path(out))


if __name__ == "__main__":
    main()
