"""Benchmark of the change trigger's poll: what one poll costs the source, beside a capture's cost.

On a throwaway PostgreSQL cluster holding the bank tables and ``--other-tables`` unrelated tables,
the trigger's poll (:func:`~airflow_provider_streambed.capture.change_signal.read_source_state`, the
statement the triggerer runs every ``poll_interval``) is timed ``--polls`` times back to back
(round trip at the client, and the server's execution time from ``EXPLAIN ANALYZE``), and the
transactions the source counted per poll are read from ``pg_stat_database``. Beside it, the
capture step of ``refresh_once`` on the same group: on a quiet source, and after
``--transfers`` bank transfers (peeking the slot and decoding the backlog, which a poll never
does). Prints figures and the goal beside them; no assertion on time.

    .venv/bin/python -m benchmarks.bench_trigger_poll [--polls 500] [--transfers 1000] [--other-tables 1000] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import re
import statistics
import tempfile
import time
from pathlib import Path

import psycopg

from airflow_provider_streambed.capture.change_signal import POLL_QUERY, poll_parameters, read_source_state
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.examples.bank import load_bank, move_money
from airflow_provider_streambed.local import StepTimes, refresh_once
from airflow_provider_streambed.member_declarations import Mirror
from airflow_provider_streambed.testing.postgres import ThrowawayCluster
from airflow_provider_streambed.triggers.changes import DEFAULT_POLL_INTERVAL
from benchmarks.quick import parse_arguments

GROUP = RefreshGroup(name="bank_poll", source_conn_id="src", catalog_conn_id="cat", namespace="bank_poll",
                     members=(Mirror("public.accounts"), Mirror("public.transfers")))
TABLES = [mirror.qualified_table for mirror in GROUP.mirrors]


def committed_transactions(dsn: str) -> int:
    """The source database's committed transactions so far (this reading adds one)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").fetchone()
    assert row is not None
    return int(row[0])


async def time_polls(dsn: str, polls: int) -> list[float]:
    """Seconds of each of ``polls`` polls on one autocommit connection, as the trigger holds it."""
    seconds = []
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        for _ in range(polls):
            began = time.perf_counter()
            await read_source_state(conn, TABLES)
            seconds.append(time.perf_counter() - began)
    return seconds


def server_milliseconds(dsn: str) -> float:
    """The server's execution time of one poll statement (``EXPLAIN ANALYZE``), the median of 20."""
    times = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(20):
            plan = conn.execute("EXPLAIN (ANALYZE, FORMAT TEXT) " + POLL_QUERY, poll_parameters(TABLES)).fetchall()
            match = re.search(r"Execution Time: ([\d.]+) ms", " ".join(str(row[0]) for row in plan))
            assert match is not None, plan
            times.append(float(match.group(1)))
    return statistics.median(times)


def capture_seconds(dsn: str, properties: dict[str, str]) -> float:
    """The capture step's seconds in one ``refresh_once`` of the group."""
    times = StepTimes()
    refresh_once(GROUP, source_dsn=dsn, catalog_properties=properties, times=times)
    return times.capture


def main() -> None:
    """Build the source, time the polls and the captures, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=500)
    parser.add_argument("--transfers", type=int, default=1000)
    parser.add_argument("--other-tables", type=int, default=1000)
    args = parse_arguments(parser, quick={"polls": 20, "transfers": 10, "other_tables": 2})
    logging.basicConfig(level=logging.WARNING)
    with ThrowawayCluster() as cluster, tempfile.TemporaryDirectory() as directory:
        dsn = cluster.dsn(cluster.create_database())
        load_bank(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DO $$ BEGIN FOR i IN 1..{args.other_tables} LOOP "
                         "EXECUTE format('CREATE TABLE other_%s (id int PRIMARY KEY, v text)', i); END LOOP; END $$")
        properties = {"uri": f"sqlite:///{Path(directory) / 'catalog.db'}",
                      "warehouse": (Path(directory) / "warehouse").as_uri()}
        refresh_once(GROUP, source_dsn=dsn, catalog_properties=properties)  # the first cut: a copy

        before = committed_transactions(dsn)
        seconds = asyncio.run(time_polls(dsn, args.polls))
        per_poll = (committed_transactions(dsn) - before - 1) / args.polls
        server = server_milliseconds(dsn)
        quiet = capture_seconds(dsn, properties)
        with psycopg.connect(dsn) as conn:
            rng = random.Random(1)
            for _ in range(args.transfers):
                move_money(conn, rng)
        backlog = capture_seconds(dsn, properties)

    p50, p99 = (statistics.quantiles(seconds, n=100)[i] * 1000 for i in (49, 98))
    per_minute = 60 / DEFAULT_POLL_INTERVAL
    print(f"source: 2 group tables among {args.other_tables + 2} tables; {args.polls} polls back to back")
    print(f"  one poll, round trip  : p50 {p50:6.2f} ms  p99 {p99:6.2f} ms")
    print(f"  one poll, server time : {server:6.3f} ms  ({per_poll:.2f} transactions counted per poll: one statement)")
    print(f"  quiet source, default poll every {DEFAULT_POLL_INTERVAL:.0f} s: {per_minute:.0f} polls/min, "
          f"{per_minute * server:.1f} ms of source time per minute")
    print(f"  a capture, quiet source          : {quiet * 1000:8.1f} ms  = {quiet * 1000 / p50:,.0f} polls")
    print(f"  a capture of {args.transfers:,} transfers       : {backlog * 1000:8.1f} ms  "
          f"= {backlog * 1000 / p50:,.0f} polls")
    print("  goal: a poll costs the source little (no slot, no decoding): well under a capture; "
          "a quiet source starts no run (DESIGN 17)")


if __name__ == "__main__":
    main()
