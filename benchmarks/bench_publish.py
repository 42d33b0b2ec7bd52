"""Publish latency of one cut with N member tables vs N independent single-table pyiceberg commits.

Run: ``.venv/bin/python -m benchmarks.bench_publish [--sizes 1 5 20 50] [--repeats 3] [--quick]``. Prints a
table (no timed assertions) and the load average: on a busy machine compare rows of one run only.
Each cut replaces every member's contents with one staged Parquet file (the steady state: tables
exist, the first publish is not timed); the baseline does the same per table with
``table.transaction()``, a scan for the files to delete and pyiceberg's overwrite snapshot plus tag,
committed through ``SqlCatalog.commit_table``. The lone single-table commit is measured next to
each cut. Both sides run warm (the first round is not timed); the publish's per-process Avro
schema caches cost a few milliseconds once in a fresh process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import parquet_file_to_data_file
from pyiceberg.table import Table, TableProperties
from pyiceberg.table.update.snapshot import ManageSnapshots

from airflow_provider_streambed.catalog import open_catalog
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish import publish_cut
from benchmarks.quick import parse_arguments
from tests.integration.publish.helpers import make_group, stage


def _frame(version: int) -> pa.Table:
    return pa.table({"id": pa.array(range(100), pa.int64()), "v": pa.array([version] * 100, pa.int64())})


def bench_cut(workdir: Path, size: int, repeats: int) -> list[float]:
    """Seconds per publish of a cut of ``size`` members (after a first cut created the tables)."""
    props = {"uri": f"sqlite:///{workdir}/cut-{size}.db", "warehouse": (workdir / f"wh-cut-{size}").as_uri()}
    catalog = open_catalog(props)
    ledger = Ledger(props["uri"])
    ledger.create()
    group = make_group("bench", members=size)
    times = []
    for version in range(1, repeats + 2):
        tables = {m.name: _frame(version) for m in group.members}
        ledger.pin_run("bench", f"r{version}", Lsn(version * 100))
        manifests = stage(props["warehouse"], "bench", f"r{version}", Lsn(version * 100), tables)
        started = time.perf_counter()
        publish_cut(catalog, ledger, group, f"r{version}", manifests)
        if version > 1:
            times.append(time.perf_counter() - started)
    return times


def _pyiceberg_replace(table: Table, file: str, tag: str) -> None:
    """One table's contents replaced by ``file`` in one commit, with pyiceberg's own overwrite producer."""
    transaction = table.transaction()
    metadata = transaction.table_metadata
    if metadata.name_mapping() is None:
        mapping = metadata.schema().name_mapping.model_dump_json()
        transaction.set_properties({TableProperties.DEFAULT_NAME_MAPPING: mapping})
    with transaction.update_snapshot().overwrite() as overwrite:
        for task in transaction._scan().plan_files():
            overwrite.delete_data_file(task.file)
        overwrite.append_data_file(parquet_file_to_data_file(table.io, transaction.table_metadata, file))
        snapshot_id = overwrite.snapshot_id
    with ManageSnapshots(transaction) as refs:
        refs.create_tag(snapshot_id, tag)
    transaction.commit_transaction()


def bench_single(workdir: Path, size: int, repeats: int, name: str = "") -> list[float]:
    """Seconds for ``size`` independent single-table commits (load, overwrite snapshot, commit each)."""
    name = name or f"single-{size}"
    props = {"uri": f"sqlite:///{workdir}/{name}.db", "warehouse": (workdir / f"wh-{name}").as_uri()}
    catalog = open_catalog(props)
    catalog.create_namespace("ns")
    data = workdir / f"data-{name}"
    data.mkdir()
    for index in range(size):
        catalog.create_table(f"ns.t{index}", schema=_frame(0).schema)
    times = []
    for version in range(1, repeats + 2):
        files = []
        for index in range(size):
            path = data / f"t{index}-v{version}.parquet"
            pq.write_table(_frame(version), path)
            files.append(path.as_uri())
        started = time.perf_counter()
        for index in range(size):
            _pyiceberg_replace(catalog.load_table(f"ns.t{index}"), files[index], f"tag-{version}")
        if version > 1:
            times.append(time.perf_counter() - started)
    return times


def main() -> None:
    """Print the latency table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 5, 20, 50])
    parser.add_argument("--repeats", type=int, default=3)
    args = parse_arguments(parser, quick={"sizes": [1, 2], "repeats": 1})
    print(f"load average before: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
    print(f"{'tables':>6}  {'cut (s)':>9}  {'N single commits (s)':>21}  {'one single commit (s)':>22}  {'cut/one':>8}")
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        for size in args.sizes:
            # the lone single-table commit is measured again next to each cut, so both see the same load
            one = statistics.median(bench_single(workdir, 1, args.repeats, name=f"one-{size}"))
            cut = statistics.median(bench_cut(workdir, size, args.repeats))
            single = statistics.median(bench_single(workdir, size, args.repeats)) if size > 1 else one
            print(f"{size:>6}  {cut:>9.3f}  {single:>21.3f}  {one:>22.3f}  {cut / one:>8.1f}")
    print("goal (issue 6): 20 tables < 0.25 s and cut/one < 2")


if __name__ == "__main__":
    main()
