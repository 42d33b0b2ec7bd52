"""Benchmark of reading a merge-on-read mirror (issue 33 item 7): a full scan of the latest cut
after three refreshes, beside the same rows compacted; prints the ratios with the goal.

A mirror of ``--rows`` rows (id, group, amount, text, timestamp; 8 Parquet files in key order) is
published as cut 1 on a SQLite catalog; cuts 2-4 are merge-on-read refreshes of 0.01 %, 0.1 % and
1 % updated keys (each a data file of new images and a position-delete file over the base files,
as the mirror refresh publishes them); cut 5 holds the same rows compacted (one whole write). Each
reader scans cut 4 and cut 5 whole (every row, all columns through Arrow; ``count(*)`` and
``sum(amount)`` through DuckDB and Spark), median of ``--repeats``, side by side:

- ``Cut.to_arrow`` (:mod:`~airflow_provider_streambed.read.arrow_snapshot`: pyiceberg's reader per
  file, the deletes applied by a mask), and pyiceberg's own ``scan(...).to_arrow()`` beside it;
- DuckDB: ``Cut.to_duckdb`` (its iceberg extension's ``iceberg_scan``);
- Spark: ``Cut.to_spark`` and the query (:class:`~airflow_provider_streambed.read.spark_snapshot.SnapshotScan`,
  in a warm ``local[2]`` session); the same scan serves the refresh's own reads and derived
  members; and "Spark query": the query alone on views made once, what each further query pays.

for keys drawn at random from the whole table, and from its newest 2 % (hot rows, the common OLTP
shape: their deletes fall in the last base file). Goal: scan after the refreshes <= 1.5x the
compacted scan, per reader.

Run: ``.venv/bin/python -m benchmarks.bench_read_amplification [--rows 10000000] [--repeats 3] [--quick]``
(default 2,000,000 rows; ``STREAMBED_BENCH_ROWS`` sets the default too).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable
from functools import partial

import duckdb
import numpy as np
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from airflow_provider_streambed import Mirror, RefreshGroup
from airflow_provider_streambed.catalog import open_catalog
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish import publish_cut
from airflow_provider_streambed.read import Cut, CutReader
from airflow_provider_streambed.read.snapshot_files import plan_snapshot_files
from airflow_provider_streambed.testing.spark import local_spark_session
from benchmarks.bench_changes_since import FILES, facts, median_seconds, sqlite_catalog
from benchmarks.quick import parse_arguments
from tests.integration.publish.helpers import stage, stage_delta

FRACTIONS, GOAL = (0.0001, 0.001, 0.01), 1.5


def publish_cuts(props: dict[str, str], ledger: Ledger, rows: int, hot: bool, run: int) -> tuple[Cut, Cut]:
    """The cut after three refreshes of random (or ``hot``) updates, and the same rows compacted."""
    catalog = open_catalog(props)
    group = RefreshGroup(f"bench{run}", "src", "cat", f"bench{run}", (Mirror("public.facts"),))
    warehouse = props["warehouse"]

    def publish(number: int, stage_member: Callable[..., object]) -> Cut:
        """Pin run ``r<number>``, stage with ``stage_member(run_key=..., watermark=...)``, publish."""
        run_key, lsn = f"r{number}", Lsn(100 * number)
        ledger.pin_run(group.name, run_key, lsn)
        staged = stage_member(run_key=run_key, watermark=lsn)
        publish_cut(catalog, ledger, group, run_key, staged if isinstance(staged, dict) else {"facts": staged})
        return CutReader(catalog, group, ledger).latest()

    table = facts(np.arange(rows))
    cut = publish(1, partial(stage, warehouse, group.name, tables={"facts": table}, files_per_member=FILES))
    files = sorted(plan_snapshot_files(cut.table("facts"), cut.member("facts").snapshot_id).data)
    step = -(-rows // FILES)
    low = rows - rows // 50 if hot else 0  # the newest 2 %: room for the 1.11 % the refreshes update
    drawn = low + np.random.default_rng(run).choice(rows - low, size=sum(int(rows * f) for f in FRACTIONS),
                                                    replace=False)
    start = 0
    for number, fraction in enumerate(FRACTIONS, start=2):
        changed = np.sort(drawn[start:start + int(rows * fraction)])
        start += len(changed)
        deleted = [(files[int(key) // step], int(key) % step) for key in changed]
        base = cut.member("facts").snapshot_id
        cut = publish(number, partial(stage_delta, warehouse, group.name, member="facts",
                                      added=facts(changed, "updated"), deleted=deleted, base_snapshot_id=base))
    live = cut.to_arrow("facts")
    compacted = publish(5, partial(stage, warehouse, group.name, tables={"facts": live}, files_per_member=FILES))
    assert compacted.to_arrow("facts").num_rows == live.num_rows == rows
    return cut, compacted


def scanners(spark: SparkSession) -> dict[str, Callable[[Cut], object]]:
    """A full scan of a cut's ``facts`` per reader."""
    def with_duckdb(cut: Cut) -> object:
        with duckdb.connect() as con:
            return cut.to_duckdb(con).execute("SELECT count(*), sum(amount) FROM facts").fetchall()

    def with_spark(cut: Cut) -> object:
        return cut.to_spark(spark)["facts"].agg(F.count("*"), F.sum("amount")).collect()

    frames: dict[tuple[str, int], DataFrame] = {}

    def spark_query(cut: Cut) -> object:
        if (cut.group, cut.cut_id) not in frames:  # a reader's views of the cut, made once (the warm-up)
            frames[(cut.group, cut.cut_id)] = cut.to_spark(spark)["facts"]
        return frames[(cut.group, cut.cut_id)].agg(F.count("*"), F.sum("amount")).collect()

    def with_pyiceberg(cut: Cut) -> object:
        return cut.table("facts").scan(snapshot_id=cut.member("facts").snapshot_id).to_arrow()

    return {"Cut.to_arrow": lambda cut: cut.to_arrow("facts"), "pyiceberg": with_pyiceberg, "DuckDB": with_duckdb,
            "Spark": with_spark, "Spark query": spark_query}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=int(os.environ.get("STREAMBED_BENCH_ROWS", 2_000_000)))
    parser.add_argument("--repeats", type=int, default=3)
    args = parse_arguments(parser, quick={"rows": 10_000, "repeats": 1})
    spark = local_spark_session("bench-read-amplification")
    with tempfile.TemporaryDirectory(prefix="bench-read-") as work:
        props, ledger = sqlite_catalog(work)
        print(f"# full scan after three refreshes ({', '.join(f'{f:.2%}' for f in FRACTIONS)} updates) / "
              f"compacted, {args.rows:,} rows (median of {args.repeats}; load {os.getloadavg()[0]:.1f})")
        print(f"{'updates':>24} {'reader':>12} {'refreshed s':>12} {'compacted s':>12} {'ratio':>7} {'goal':>6}")
        for run, hot in enumerate((False, True)):
            refreshed, compacted = publish_cuts(props, ledger, args.rows, hot, run)
            label = "hot (newest 2 % of keys)" if hot else "random keys"
            for reader, scan in scanners(spark).items():
                scan(refreshed), scan(compacted)  # warm: the first read of a plan compiles it
                before = median_seconds(partial(scan, refreshed), args.repeats)
                after = median_seconds(partial(scan, compacted), args.repeats)
                print(f"{label:>24} {reader:>12} {before:>12.2f} {after:>12.2f} {before / after:>6.1f}x "
                      f"{GOAL:>5.1f}x", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
