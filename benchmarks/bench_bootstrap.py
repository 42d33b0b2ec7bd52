"""Benchmark of a group's first run (issue 21): bootstrap copies against PostgreSQL's raw binary COPY.

On a throwaway PostgreSQL cluster, a table of ``--rows`` rows (bigint key, text, numeric(12,2),
float8, timestamptz, date) is read in one run by:

- one client reading ``COPY ... TO STDOUT (FORMAT binary)`` raw (bytes only, no parsing): the bar;
- the capture step of a new group (slot, bootstrap copy, W, manifest) with ``copy_parallelism``
  1 and 2 (goal >= 80 % of the raw rows/s);
- a whole bootstrap run (capture, refresh, publish) through a warm Spark Connect server (it
  bootstrapped a small table first) and through spark-submit (goal >= 50 %), on a quiet source
  (the copy is published as it is, no Spark application) and under a writer updating random
  rows during the run (the changes are merged over the adopted copy: in-process, unless
  ``spark.streambed.mirror.inProcessMerge`` is off).

Each capture and run happens in a child process, which also reports its peak RSS (``ru_maxrss``)
and its RSS before the copy. Run: ``.venv/bin/python -m benchmarks.bench_bootstrap [--rows N] [--quick]``
(``--spark-remote URL``: a running Spark Connect server instead of one started here).
To measure another checkout with the same script: ``PYTHONPATH=<checkout> ... --only-children``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

from airflow_provider_streambed.testing.postgres import ThrowawayCluster
from benchmarks.connect_server import REMOTE_HELP, connect_server
from benchmarks.quick import parse_arguments

LOAD = """
CREATE TABLE wide (id bigint PRIMARY KEY, name text NOT NULL, amount numeric(12,2), score float8,
                   created timestamptz, day date);
INSERT INTO wide SELECT g, 'customer-' || g, (g % 1000000) / 100.0, g * 0.5,
       timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second', date '2024-01-01' + (g % 1000)
FROM generate_series(1, %s) g;
"""


def raw_copy(dsn: str) -> tuple[float, int]:
    """Seconds and bytes for one client reading the table as raw binary COPY."""
    with psycopg.connect(dsn) as conn, conn.cursor() as cursor:
        started = time.perf_counter()
        size = 0
        with cursor.copy("COPY wide TO STDOUT (FORMAT binary)") as copy:
            for block in copy:
                size += len(block)
        return time.perf_counter() - started, size


def rss_mib() -> float:
    """This process's resident set now, in MiB."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def group(name: str) -> Any:
    from airflow_provider_streambed.declarations import RefreshGroup
    from airflow_provider_streambed.member_declarations import Mirror

    return RefreshGroup(name=name, source_conn_id="pg", catalog_conn_id="lake", namespace=name,
                        members=(Mirror("public.wide"),))


def child(kind: str, dsn: str, directory: str, name: str, parallelism: int, remote: str) -> dict[str, Any]:
    """One measured step in this (child) process: ``capture`` or a ``whole`` run."""
    from airflow_provider_streambed.catalog import ledger_of, open_catalog, warehouse_of

    Path(directory).mkdir(parents=True, exist_ok=True)
    properties = {"uri": f"sqlite:///{directory}/catalog.db", "warehouse": Path(directory, "wh").as_uri()}
    extra: dict[str, Any] = {}
    options: Any = None
    with contextlib.suppress(ImportError):  # a checkout from before copy_parallelism has no options
        from airflow_provider_streambed.capture.bootstrap import CopyOptions as options
    before = rss_mib()
    started = time.perf_counter()
    if kind == "capture":
        from airflow_provider_streambed.capture.run import capture_run

        catalog = open_catalog(properties)
        settings: Any = None
        if options is not None:
            from airflow_provider_streambed.capture.run_records import CaptureSettings

            settings = CaptureSettings(copy=options(parallelism))
        with psycopg.connect(dsn) as conn:
            capture_run(conn, group(name), ledger_of(catalog), "bench", warehouse_of(catalog), settings)
    else:
        from airflow_provider_streambed.local import StepTimes, refresh_once

        times = StepTimes()
        if options is not None:
            extra["copy_parallelism"] = parallelism
        result = refresh_once(group(name), source_dsn=dsn, catalog_properties=properties, times=times,
                              spark_remote=remote or None, **extra)
        assert result.cut.cut_id == 1
        extra = {"capture": times.capture, "refresh": times.refresh, "publish": times.publish}
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "rss_before_mib": before, "peak_rss_mib": peak,
            **{k: v for k, v in extra.items() if isinstance(v, float)}}


def run_child(kind: str, dsn: str, directory: Path, name: str, parallelism: int, remote: str = "") -> dict[str, Any]:
    """Run :func:`child` in a fresh interpreter (its own peak RSS) and drop the group's slot after."""
    command = [sys.executable, "-m", "benchmarks.bench_bootstrap", "--child", kind, "--dsn", dsn,
               "--directory", str(directory), "--name", name, "--parallelism", str(parallelism), "--remote", remote]
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{kind} (parallelism {parallelism}) failed:\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots")
    return figures


class Writer(threading.Thread):
    """Updates a random row per transaction, about a thousand a second, until stopped (changes during the run)."""

    def __init__(self, dsn: str, rows: int) -> None:
        super().__init__(daemon=True)
        self.dsn, self.rows, self.updates = dsn, rows, 0
        self.stopping = threading.Event()

    def run(self) -> None:
        rng = random.Random(5)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self.stopping.is_set():
                conn.execute("UPDATE wide SET score = score + 1 WHERE id = %s", (rng.randint(1, self.rows),))
                self.updates += 1
                self.stopping.wait(0.001)

    def stop(self) -> int:
        self.stopping.set()
        self.join()
        return self.updates


def warm_up(cluster: ThrowawayCluster, directory: Path, remote: str, rows: int) -> None:
    """Bootstrap a small table (``rows`` rows) under the writer on the Connect server first (its
    changes make a Spark job): a warm server has run jobs before."""
    dsn = cluster.dsn(cluster.create_database("warm"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(LOAD.replace("%s", str(rows)))
    writer = Writer(dsn, rows)
    writer.start()
    try:
        run_child("whole", dsn, directory, "warm", 1, remote)
    finally:
        writer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--only-children", action="store_true", help="skip the Spark runs (another checkout)")
    parser.add_argument("--spark-remote", default=None, help=REMOTE_HELP)
    parser.add_argument("--child", choices=("capture", "whole"), help=argparse.SUPPRESS)
    for option in ("--dsn", "--directory", "--name", "--remote"):
        parser.add_argument(option, default="", help=argparse.SUPPRESS)
    parser.add_argument("--parallelism", type=int, default=2, help=argparse.SUPPRESS)
    arguments = parse_arguments(parser, quick={"rows": 2_000})
    if arguments.child:
        logging.basicConfig(level=logging.WARNING)
        print(json.dumps(child(arguments.child, arguments.dsn, arguments.directory, arguments.name,
                               arguments.parallelism, arguments.remote)))
        return
    with ThrowawayCluster(settings={"max_wal_senders": "20", "max_replication_slots": "20"}) as cluster, \
            tempfile.TemporaryDirectory(prefix="bench-bootstrap-") as work:
        dsn = cluster.dsn(cluster.create_database("bench"))
        started = time.perf_counter()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(LOAD.replace("%s", str(arguments.rows)))
            conn.execute("VACUUM ANALYZE wide")
            size = conn.execute("SELECT pg_size_pretty(pg_table_size('wide'))").fetchone()
        print(f"table: {arguments.rows:,} rows ({size[0] if size else '?'}), loaded in "
              f"{time.perf_counter() - started:.0f} s; 2 cores, one run, every figure side by side")
        raw_seconds, raw_bytes = raw_copy(dsn)
        raw = arguments.rows / raw_seconds
        print(f"\nraw binary COPY, one client:   {raw_seconds:6.2f} s  {raw:>12,.0f} rows/s  "
              f"({raw_bytes / 2**20:,.0f} MiB)")
        print(f"{'step':<34} {'s':>6} {'rows/s':>12} {'of raw':>7} {'goal':>6} {'peak RSS':>9}")
        for parallelism in (1, 2):
            figures = run_child("capture", dsn, Path(work, f"capture{parallelism}"), f"copy{parallelism}",
                                parallelism)
            rate = arguments.rows / figures["seconds"]
            print(f"{f'capture, copy_parallelism={parallelism}':<34} {figures['seconds']:6.2f} {rate:>12,.0f} "
                  f"{rate / raw:>6.0%} {'>= 80%':>6} {figures['peak_rss_mib']:>6.0f} MiB "
                  f"(+{figures['peak_rss_mib'] - figures['rss_before_mib']:.0f} over the start)")
        if arguments.only_children:
            return
        with connect_server(arguments.spark_remote, Path(work, "connect")) as remote:
            warm_up(cluster, Path(work, "warm"), remote, min(arguments.rows, 100_000))
            runs = [(label, url, writing) for writing in (False, True)
                    for label, url in (("Connect", remote), ("spark-submit", ""))]
            for number, (label, url, writing) in enumerate(runs):
                writer = Writer(dsn, arguments.rows)
                if writing:
                    writer.start()
                figures = run_child("whole", dsn, Path(work, f"whole{number}"), f"whole{number}", 2, url)
                changes = f"{writer.stop()} updates" if writing else "quiet"
                rate = arguments.rows / figures["seconds"]
                print(f"{f'whole run, {label}, {changes}':<34} {figures['seconds']:6.2f} {rate:>12,.0f} "
                      f"{rate / raw:>6.0%} {'>= 50%':>6} {figures['peak_rss_mib']:>6.0f} MiB   "
                      f"capture {figures['capture']:.1f} s, refresh {figures['refresh']:.1f} s, "
                      f"publish {figures['publish']:.1f} s")


if __name__ == "__main__":
    main()
