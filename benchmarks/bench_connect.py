"""Benchmark of the refresh on a warm Spark Connect server against spark-submit (issue 13).

On a throwaway PostgreSQL cluster and an SQLite catalog, two copies of the bank group of
``dags/example_bank.py`` (own slots and namespaces) see the same source changes: one refreshes
through spark-submit (``local[2]``, a JVM per run), the other on a local Spark Connect server
(``local[2]``, started once before the runs). Printed per run (bootstrap, ``--changed`` row
changes, no change): the refresh step and the whole run of each path, and the ratio
Connect / spark-submit of the refresh step (goal <= 25 % for a run with changes).

Run: ``.venv/bin/python -m benchmarks.bench_connect [--changed 1000]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import tempfile
from pathlib import Path

from airflow_provider_streambed.connect_server import ConnectServer
from airflow_provider_streambed.local import StepTimes, refresh_once
from airflow_provider_streambed.run_key import make_run_key
from airflow_provider_streambed.testing.postgres import ThrowawayCluster, free_port
from benchmarks.bench_end_to_end import change_rows, load_bank_group, load_source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accounts", type=int, default=10_000)
    parser.add_argument("--transfers", type=int, default=100_000, help="initial transfers (bootstrap)")
    parser.add_argument("--changed", type=int, default=1_000, help="row changes of the changed run")
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    bank = load_bank_group()
    groups = {"submit": bank, "connect": dataclasses.replace(bank, name="bank_connect", namespace="bank_connect")}
    with (ThrowawayCluster() as cluster, tempfile.TemporaryDirectory(prefix="bench-connect-") as directory):
        server = ConnectServer(port=free_port(), state_dir=Path(directory, "connect"))
        remote = server.start()
        try:
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
        finally:
            server.stop()
    print("\n## Refresh step: warm Spark Connect / spark-submit")
    for label, ratio in ratios.items():
        print(f"{label:<12} {ratio:6.1%}" + ("   goal <= 25 %" if label == "changed" else ""))
    print("(no-change: no member changed, neither path starts Spark work)")


if __name__ == "__main__":
    main()
