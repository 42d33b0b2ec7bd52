"""Publish cost and storage after many cuts, with cut retention and without.

Run: ``.venv/bin/python -m benchmarks.bench_retention [--cuts 1000] [--tables 20] [--keep-last 10] [--quick]``.
One group of ``--tables`` members is published ``--cuts`` times on a SQLite catalog and a local
warehouse; each cut replaces half of the members with a staged 100-row Parquet file and carries
the other half over (they alternate). With retention (``keep_last``, ``keep_newer_than=0``,
``delete_files_after=0``: the benchmark compresses months into minutes) every publish also
expires a cut and collects the files nothing needs; without, every cut stays.

Printed per series: the median publish time (``publish_cut`` as a task waits for it, retention
included) of the last 50 cuts against the first 50, the current metadata file's bytes per table
and the files under the member tables after cut ``keep_last`` and at the end. This machine's
speed wanders by a quarter within minutes, so the first 50 cuts are published twice: once at the
start, and once more as a fresh group whose cuts alternate with the last 50 of the long one (the
side-by-side ratio, under the same load). No timed assertions; the goals are printed beside.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

from airflow_provider_streambed.catalog import open_catalog
from airflow_provider_streambed.declarations import CutRetention, RefreshGroup
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish import publish_cut
from airflow_provider_streambed.retention.maintenance import apply_retention_after_publish
from airflow_provider_streambed.retention.plan import publish_expiry
from benchmarks.quick import parse_arguments
from tests.integration.publish.helpers import make_group, stage

WINDOW = 50


def _frame(version: int) -> pa.Table:
    return pa.table({"id": pa.array(range(100), pa.int64()), "v": pa.array([version] * 100, pa.int64())})


@dataclass
class Series:
    """One group published cut after cut in its own catalog and warehouse."""

    workdir: Path
    group: RefreshGroup
    times: list[float] = field(default_factory=list)
    storage: dict[int, tuple[float, int]] = field(default_factory=dict)  # cut -> (metadata bytes/table, files)

    def __post_init__(self) -> None:
        self.warehouse = self.workdir / f"wh-{self.group.name}"
        props = {"uri": f"sqlite:///{self.workdir}/{self.group.name}.db", "warehouse": self.warehouse.as_uri()}
        catalog = open_catalog(props)
        assert isinstance(catalog, SqlCatalog)
        self.catalog = catalog
        self.ledger = Ledger(catalog.engine)
        self.ledger.create()

    def publish_next(self) -> None:
        """Stage and publish the next cut; its publish time is appended to ``times``."""
        k = len(self.times) + 1
        names = [member.name for member in self.group.members]
        changed = names if k == 1 else [name for i, name in enumerate(names) if (i + k) % 2 == 0]
        run_key = f"r{k}"
        self.ledger.pin_run(self.group.name, run_key, Lsn(k * 100))
        warehouse = self.warehouse.as_uri()
        manifests = stage(warehouse, self.group.name, run_key, Lsn(k * 100), {n: _frame(k) for n in changed})
        started = time.perf_counter()
        publish_cut(self.catalog, self.ledger, self.group, run_key, manifests,
                    carried=[n for n in names if n not in changed], expire=publish_expiry(self.ledger, self.group))
        apply_retention_after_publish(self.catalog, self.ledger, self.group)
        self.times.append(time.perf_counter() - started)

    def measure_storage(self) -> None:
        """Record the mean current metadata bytes per member table and the files under the tables."""
        sizes = [os.path.getsize(self.catalog.load_table((self.group.namespace, m.name)).metadata_location
                                 .removeprefix("file://")) for m in self.group.members]
        files = sum(1 for path in (self.warehouse / self.group.namespace).rglob("*") if path.is_file())
        self.storage[len(self.times)] = (statistics.mean(sizes), files)


def run(workdir: Path, group: RefreshGroup, cuts: int, checkpoint: int) -> tuple[Series, Series]:
    """Publish ``cuts`` cuts of ``group``; the last ``WINDOW`` alternate with the first of a fresh copy."""
    long = Series(workdir / "long", group)
    fresh = Series(workdir / "fresh", group)
    for k in range(1, cuts + 1):
        long.publish_next()
        if k > cuts - WINDOW:
            fresh.publish_next()
        if k in (checkpoint, cuts):
            long.measure_storage()
    return long, fresh


def main() -> None:
    """Print both series side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuts", type=int, default=1000)
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--keep-last", type=int, default=10)
    args = parse_arguments(parser, quick={"cuts": 4, "tables": 2, "keep_last": 2})
    retention = CutRetention(args.keep_last, keep_newer_than=dt.timedelta(0), delete_files_after=dt.timedelta(0))
    base = make_group("bench", members=args.tables)
    print(f"load average before: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
    print(f"{args.cuts} publishes of a {args.tables}-table group, keep_last={args.keep_last}; median publish "
          f"seconds of the first and the last {WINDOW} cuts; storage after cut {args.keep_last} and at the end")
    print(f"{'':>13}  {'first':>6}  {'last':>6}  {'last/first':>10}  {'first, fresh':>12}  {'last/fresh':>10}  "
          f"{'metadata B/table':>22}  {'files':>17}")
    for name, group in (("retention", dataclasses.replace(base, retention=retention)), ("no retention", base)):
        with tempfile.TemporaryDirectory() as directory:
            workdir = Path(directory)
            (workdir / "long").mkdir()
            (workdir / "fresh").mkdir()
            long, fresh = run(workdir, group, args.cuts, args.keep_last)
        first, last = statistics.median(long.times[:WINDOW]), statistics.median(long.times[-WINDOW:])
        again = statistics.median(fresh.times)
        (meta_early, files_early), (meta_end, files_end) = long.storage[args.keep_last], long.storage[args.cuts]
        print(f"{name:>13}  {first:>6.3f}  {last:>6.3f}  {last / first:>10.2f}  {again:>12.3f}  {last / again:>10.2f}  "
              f"{meta_early:>7,.0f} -> {meta_end:>7,.0f} {meta_end / meta_early:>4.2f}x  "
              f"{files_early:>5} -> {files_end:>5} {files_end / files_early:>4.2f}x")
    print(f"goal (issue 14), with retention: last/first <= 1.2 (last/fresh is the same ratio measured side by side); "
          f"metadata and files at the end <= 1.5x those after cut {args.keep_last}")


if __name__ == "__main__":
    main()
