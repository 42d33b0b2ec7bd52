"""Benchmark of a run whose SQL member the refresh task updates: no Spark application vs one.

A source table ``facts`` of ``--rows`` rows (id, grp of 100, a decimal, an integer) on a throwaway
PostgreSQL cluster is mirrored by two groups, each with one incremental SQL member over it, both
``COUNT``/``SUM``/``AVG`` per ``grp``:

- ``in_task``: the query the refresh task updates itself (:mod:`~airflow_provider_streambed.refresh.in_process`,
  :mod:`~airflow_provider_streambed.refresh.derived.duckdb_delta`): the run starts no Spark application;
- ``by_spark``: the same aggregates under a ``WHERE`` that keeps every row, which the task leaves to
  Spark: the run starts a spark-submit application (``local[2]``), which updates the member from
  its changes.

After each group's first cut, each round writes about 60 changed rows (updates moving rows between
groups, deletes, inserts) and runs ``refresh_once`` of each group, timed (capture, refresh,
publish). Prints the median run of each and their ratio, beside the freshness the design asks
for (DESIGN section 17: no JVM on the path of a run that needs none).

Run: ``.venv/bin/python -m benchmarks.bench_task_members [--rows 200000] [--rounds 4] [--quick]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from decimal import Decimal
from pathlib import Path

import psycopg

from airflow_provider_streambed import Mirror, RefreshGroup, SqlMember
from airflow_provider_streambed.local import refresh_once
from airflow_provider_streambed.testing.postgres import ThrowawayCluster
from benchmarks.quick import parse_arguments

AGGREGATES = "grp, COUNT(*) AS n, COUNT(v) AS counted, SUM(v) AS total, COUNT(k) AS nk, SUM(k) AS sk, AVG(k) AS mk"
GROUPS = {
    "in_task": f"SELECT {AGGREGATES} FROM facts GROUP BY grp",
    "by_spark": f"SELECT {AGGREGATES} FROM facts WHERE id > 0 GROUP BY grp",
}


def group_of(name: str, query: str) -> RefreshGroup:
    """A group of the mirror of ``facts`` and one incremental SQL member ``stats``."""
    return RefreshGroup(name, "src", "cat", name, (
        Mirror("public.facts", compact_deleted_ratio=100.0),  # no compaction: it writes the mirror whole
        SqlMember("stats", query, sources=["facts"], incremental=True),
    ))


def write_changes(dsn: str, rng: random.Random, rows: int, first_id: int) -> None:
    """About 60 changed rows: updates (moves between groups, NULLs), deletes and inserts."""
    with psycopg.connect(dsn) as conn:
        for _ in range(30):
            conn.execute("UPDATE facts SET grp = %s, v = %s WHERE id = %s",
                         (rng.randrange(100), rng.choice([Decimal("1.25"), None]), rng.randrange(1, rows)))
        conn.execute("DELETE FROM facts WHERE id IN (SELECT id FROM facts ORDER BY id LIMIT 5)")
        conn.execute("INSERT INTO facts SELECT i, i %% 100, (i %% 9) * 1.5, NULLIF(i %% 5, 0) "
                     "FROM generate_series(%s::int, %s::int) i", (first_id, first_id + 20))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=4)
    arguments = parse_arguments(parser, quick={"rows": 1_000, "rounds": 1})
    groups = {name: group_of(name, query) for name, query in GROUPS.items()}
    with ThrowawayCluster() as cluster, tempfile.TemporaryDirectory(prefix="bench-task-members-") as work:
        dsn = cluster.dsn(cluster.create_database())
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE facts (id int PRIMARY KEY, grp int, v numeric(12,2), k int)")
            conn.execute("INSERT INTO facts SELECT i, i %% 100, (i %% 7) * 0.5, NULLIF(i %% 4, 0) "
                         "FROM generate_series(1, %s::int) i", (arguments.rows,))
        properties = {"uri": f"sqlite:///{work}/catalog.db", "warehouse": Path(work, "warehouse").as_uri()}
        for group in groups.values():
            refresh_once(group, source_dsn=dsn, catalog_properties=properties)  # first cuts: Spark, both
        rng = random.Random(43)
        times: dict[str, list[float]] = {name: [] for name in groups}
        for round_ in range(arguments.rounds):
            write_changes(dsn, rng, arguments.rows, arguments.rows + 1000 + 100 * round_)
            for name, group in groups.items():
                started = time.perf_counter()
                refresh_once(group, source_dsn=dsn, catalog_properties=properties)
                times[name].append(time.perf_counter() - started)
    medians = {name: statistics.median(runs) for name, runs in times.items()}
    print(f"# a run of a {arguments.rows:,}-row mirror and one incremental SQL member, about 60 changed rows, "
          f"spark-submit local[2], median of {arguments.rounds}")
    for name, runs in times.items():
        print(f"  {name:<9} {medians[name]:6.2f} s  (runs: {' '.join(f'{run:.2f}' for run in runs)})")
    print(f"  in_task / by_spark = {medians['in_task'] / medians['by_spark']:.1%} "
          "(goal: no Spark application on the run's path, DESIGN section 17)")


if __name__ == "__main__":
    main()
