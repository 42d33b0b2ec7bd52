"""Benchmark of a Spark scan through Iceberg's runtime (issue 47 item 4): a merge-on-read mirror
after three random-update refreshes, beside the same rows compacted; prints the ratio with the goal.

A mirror of ``--rows`` rows (id, group, amount, text, timestamp; 8 Parquet files in key order) is
published as cut 1 into a catalog on a throwaway PostgreSQL (the database Iceberg's JDBC catalog
reads); cuts 2-4 are merge-on-read refreshes of 0.01 %, 0.1 % and 1 % of the keys drawn at random
(each a data file of new images and a position-delete file over the base files, as the mirror
refresh publishes them; the cuts of ``bench_read_amplification``); cut 5 holds the same rows
compacted. A Spark with Iceberg's runtime (pyspark 4.1 in its own env,
:mod:`~airflow_provider_streambed.testing.spark_envs`; Iceberg has none for 4.2) scans cut 4 and
cut 5 by tag (``VERSION AS OF '<group>-cut-<k>'``, deletes applied by Iceberg), median of
``--repeats`` after one warm-up each, in a warm ``local[2]`` session:

- "every column": every row and column into Spark's ``noop`` sink;
- "count, sum": ``count(*)`` and ``sum(amount)`` (a sum: Iceberg cannot answer it from metadata);

and, beside them, the same with streambed's own snapshot scan (``Cut.to_spark`` without the
session's catalog). Goal: the scan after the refreshes <= 1.5x the compacted scan (printed, never
asserted).

Run: ``.venv/bin/python -m benchmarks.bench_runtime_scan [--rows 10000000] [--repeats 3] [--quick]``
(default 1,000,000 rows; ``STREAMBED_BENCH_ROWS`` sets the default too). The first run makes the
pyspark-4.1 env (minutes; kept under ``.venvs/``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.testing.postgres import ThrowawayCluster
from airflow_provider_streambed.testing.spark_envs import ICEBERG_RUNTIME_PYSPARK, spark_env_python
from benchmarks.bench_changes_since import median_seconds
from benchmarks.bench_read_amplification import FRACTIONS, GOAL, publish_cuts
from benchmarks.quick import parse_arguments

ROOT = Path(__file__).resolve().parents[1]


def scan_cuts(spec_path: str) -> None:
    """In the env with Iceberg's runtime: time each reader's scans of the two cuts the spec names,
    and write the seconds into the spec's ``output`` (JSON)."""
    import pyspark
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import functions as F

    from airflow_provider_streambed.read import CutReader
    from airflow_provider_streambed.read.iceberg_runtime import jdbc_catalog_conf
    from airflow_provider_streambed.testing.spark_envs import iceberg_runtime_jars

    spec = json.loads(Path(spec_path).read_text())
    builder = (SparkSession.builder.master("local[2]").appName("bench-runtime-scan")
               .config("spark.jars", iceberg_runtime_jars(pyspark.__version__))
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "2g").config("spark.sql.shuffle.partitions", "4"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    reader = CutReader(spec["catalog"], spec["group"])
    refreshed, compacted = reader.get(spec["refreshed"]), reader.get(spec["compacted"])
    queries: dict[str, Callable[[DataFrame], object]] = {
        "every column": lambda frame: frame.write.format("noop").mode("overwrite").save(),
        "count, sum": lambda frame: frame.agg(F.count("*"), F.sum("amount")).collect(),
    }
    results = []
    for reader_name, runtime in (("snapshot scan", False), ("Iceberg runtime", True)):
        if runtime:  # the session's Iceberg catalog: Cut.to_spark now reads by tag through it
            for key, value in jdbc_catalog_conf(spec["catalog"]).items():
                spark.conf.set(key, value)
        frames = {cut.cut_id: cut.to_spark(spark)["facts"] for cut in (refreshed, compacted)}
        for query_name, query in queries.items():
            seconds = []
            for cut in (refreshed, compacted):
                query(frames[cut.cut_id])  # warm: the first run of a plan compiles it
                seconds.append(median_seconds(partial(query, frames[cut.cut_id]), spec["repeats"]))
            results.append({"reader": reader_name, "query": query_name, "refreshed": seconds[0],
                            "compacted": seconds[1]})
    Path(spec["output"]).write_text(json.dumps({"spark": spark.version, "results": results}))
    spark.stop()


def run_scans(python: Path, spec: dict[str, Any], work: str) -> tuple[str, list[dict[str, Any]]]:
    """Run :func:`scan_cuts` in the env of ``python``; returns its Spark version and timings."""
    path = Path(work, "scan.json")
    path.write_text(json.dumps(spec))
    environment = {key: value for key, value in os.environ.items() if key != "SPARK_HOME"}
    done = subprocess.run([str(python), "-m", "benchmarks.bench_runtime_scan", "--scan", str(path)], cwd=ROOT,
                          env={**environment, "PYSPARK_PYTHON": str(python)}, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the scan in {python} failed:\n{done.stderr[-3000:]}")
    scanned = json.loads(Path(spec["output"]).read_text())
    return scanned["spark"], scanned["results"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=int(os.environ.get("STREAMBED_BENCH_ROWS", 1_000_000)))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scan", metavar="SPEC", help=argparse.SUPPRESS)  # the part in the runtime's env
    args = parse_arguments(parser, quick={"rows": 10_000, "repeats": 1})
    if args.scan:
        scan_cuts(args.scan)
        return
    python = spark_env_python(ICEBERG_RUNTIME_PYSPARK)
    with ThrowawayCluster() as cluster, tempfile.TemporaryDirectory(prefix="bench-runtime-") as work:
        props = {"uri": f"postgresql+psycopg://streambed@127.0.0.1:{cluster.port}/{cluster.create_database()}",
                 "warehouse": Path(work, "warehouse").as_uri()}
        ledger = Ledger(props["uri"])
        ledger.create()
        refreshed, compacted = publish_cuts(props, ledger, args.rows, hot=False, run=0)
        spec: dict[str, Any] = {"catalog": props, "group": refreshed.group, "refreshed": refreshed.cut_id,
                "compacted": compacted.cut_id, "repeats": args.repeats, "output": str(Path(work, "seconds.json"))}
        version, results = run_scans(python, spec, work)
        print(f"# Spark {version} full scan after three refreshes "
              f"({', '.join(f'{f:.2%}' for f in FRACTIONS)} random updates) / compacted, {args.rows:,} rows "
              f"(median of {args.repeats}; load {os.getloadavg()[0]:.1f})")
        print(f"{'reader':>16} {'scan':>13} {'refreshed s':>12} {'compacted s':>12} {'ratio':>7} {'goal':>6}")
        for line in results:
            ratio = line["refreshed"] / line["compacted"]
            print(f"{line['reader']:>16} {line['query']:>13} {line['refreshed']:>12.2f} {line['compacted']:>12.2f} "
                  f"{ratio:>6.1f}x {GOAL:>5.1f}x", flush=True)


if __name__ == "__main__":
    main()
