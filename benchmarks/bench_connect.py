"""Benchmark of the refresh on a warm Spark Connect server against spark-submit (issue 13).

On a throwaway PostgreSQL cluster and an SQLite catalog, two copies of the bank group of
``dags/example_bank.py`` (own slots and namespaces) see the same source changes: one refreshes
through spark-submit (``local[2]``, a JVM per run), the other on a local Spark Connect server
(``local[2]``, started once before the runs). Printed per run (bootstrap, ``--changed`` row
changes, no change): the refresh step and the whole run of each path, and the ratio
Connect / spark-submit of the refresh step (goal <= 25 % for a run with changes).

Then a 10-member group (a mirror of ``--rows`` rows and 9 SQL members over it, the shape of
``bench_refresh``): one Connect session per member in turn, as ``task_per_member=True`` runs them
(one task after the other), against one spark-submit application computing all members (goal
<= 1.2x).

Run: ``.venv/bin/python -m benchmarks.bench_connect [--changed 1000] [--spark-remote URL] [--quick]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import tempfile
import time
from pathlib import Path

import numpy as np

from airflow_provider_streambed.local import StepTimes, refresh_once
from airflow_provider_streambed.refresh import run_local_spark_submit, write_job_spec
from airflow_provider_streambed.refresh.spark.connect import run_on_connect
from airflow_provider_streambed.run_key import make_run_key
from airflow_provider_streambed.testing.postgres import ThrowawayCluster
from benchmarks.bench_end_to_end import change_rows, load_bank_group, load_source
from benchmarks.bench_refresh import changelog, group_of, make_spec
from benchmarks.connect_server import REMOTE_HELP, connect_server
from benchmarks.quick import parse_arguments


def bench_members(work: Path, remote: str, rows: int) -> None:
    """10 members: a Connect session per member in turn vs one spark-submit application for all."""
    group = group_of(10)
    data = changelog(np.arange(rows), 0, "I", 1)
    spec = make_spec(work, group, "submit", data, 100)
    start = time.perf_counter()
    run_local_spark_submit(write_job_spec(spec))
    submit = time.perf_counter() - start
    spec = make_spec(work, group, "connect", data, 100)
    start = time.perf_counter()
    for member in group.topological_members():
        run_on_connect(spec, remote, [member.name])
    connect = time.perf_counter() - start
    print(f"\n## 10 members ({rows} mirror rows): a Connect session per member vs one spark-submit application")
    print(f"task per member on Connect {connect:6.2f} s, one spark-submit application {submit:6.2f} s: "
          f"{connect / submit:.2f}x   goal <= 1.2x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accounts", type=int, default=10_000)
    parser.add_argument("--transfers", type=int, default=100_000, help="initial transfers (bootstrap)")
    parser.add_argument("--changed", type=int, default=1_000, help="row changes of the changed run")
    parser.add_argument("--rows", type=int, default=10_000, help="mirror rows of the 10-member group")
    parser.add_argument("--spark-remote", default=None, help=REMOTE_HELP)
    arguments = parse_arguments(parser, quick={"accounts": 100, "transfers": 1_000, "changed": 100, "rows": 1_000})
    logging.basicConfig(level=logging.WARNING)
    bank = load_bank_group()
    groups = {"submit": bank, "connect": dataclasses.replace(bank, name="bank_connect", namespace="bank_connect")}
    with (ThrowawayCluster() as cluster, tempfile.TemporaryDirectory(prefix="bench-connect-") as directory,
          connect_server(arguments.spark_remote, Path(directory, "connect")) as remote):
        dsn = cluster.dsn(cluster.create_database("bank"))
        properties = {"uri": f"sqlite:///{directory}/catalog.db", "warehouse": Path(directory, "wh").as_uri()}
        load_source(dsn, arguments.accounts, arguments.transfers)
        print(f"bank: {arguments.accounts} accounts, {arguments.transfers} transfers; local[2] both ways")
        print(f"{'run':<12} {'path':<8} {'refresh s':>9} {'total s':>8}")
        ratios = {}
        for label in ("bootstrap", "changed", "no-change"):
            if label == "changed":
                change_rows(dsn, arguments.accounts, arguments.changed, 1)
            refresh = {}
            for path, group in groups.items():
                times = StepTimes()
                refresh_once(group, source_dsn=dsn, catalog_properties=properties, times=times,
                             run_key=make_run_key("bench", f"{label}-{path}"),
                             spark_remote=remote if path == "connect" else None)
                refresh[path] = times.refresh
                print(f"{label:<12} {path:<8} {times.refresh:>9.2f} "
                      f"{times.capture + times.refresh + times.publish:>8.2f}", flush=True)
            ratios[label] = refresh["connect"] / refresh["submit"] if refresh["submit"] else float("nan")
        bench_members(Path(directory, "members"), remote, arguments.rows)
    print("\n## Refresh step: warm Spark Connect / spark-submit")
    for label, ratio in ratios.items():
        print(f"{label:<12} {ratio:6.1%}" + ("   goal <= 25 %" if label == "changed" else ""))
    print("(no-change: no member changed, neither path starts Spark work)")


if __name__ == "__main__":
    main()
