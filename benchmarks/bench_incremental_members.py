"""Benchmark of an incremental derived member (issue 34): a GROUP BY aggregate updated vs recomputed.

A mirror ``facts`` of ``--rows`` rows (id, grp, amount, note, at; 8 Parquet files, the shape of a
bootstrap's output) has a derived member: per ``grp``, its rows, amounts counted and their sum
(the incremental PythonMember of the tests, ``tests.integration.refresh.python_members.totals``).
The member's previous output is computed once over the mirror; then the mirror is refreshed after
0.1 % and 1 % updated rows (random keys, each moved to another group with a NULL amount: every
group touched), and after as many inserted rows (an append-mostly table), staged merge-on-read as
a refresh stages it, and the member computed on top of that, timed side by side in one
in-process ``local[2]`` Spark session warmed up by one round first (no JVM start in any figure),
median of ``--repeats``:

- full: the member recomputed whole over the mirror at W, and its output staged;
- incremental: its previous output and the mirror's changes this run
  (:func:`~airflow_provider_streambed.refresh.incremental.incremental_basis`), the function's
  update, and its output staged.

Both outputs are compared (they must be equal); the time to read the removed rows alone is
printed beside (random updates touch every row group). Goals: <= 10 % (0.1 %) and <= 20 % (1 %)
of full.

Run: ``.venv/bin/python -m benchmarks.bench_incremental_members [--rows 10000000] [--repeats 3]``
(default 1,000,000 rows).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from airflow_provider_streambed import Mirror, PythonMember, RefreshGroup
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.refresh.incremental import SourceState, incremental_basis, removed_rows
from airflow_provider_streambed.refresh.members import CutContext, compute_python_member
from airflow_provider_streambed.staging import (
    JobSpec,
    MemberManifest,
    SnapshotFiles,
    TableCapture,
    stage_member_output,
)
from airflow_provider_streambed.staging.members import read_member_manifest
from airflow_provider_streambed.testing.spark import local_spark_session
from benchmarks.bench_changes_since import median_seconds
from benchmarks.bench_merge_on_read import refresh, write_changelog, write_table
from tests.integration.refresh.python_members import totals

MEMBER = PythonMember("grp_totals", "benchmarks.bench_incremental_members:grp_totals", ("facts",), incremental=True)
GROUP = RefreshGroup("bench", "src", "cat", "bench", (Mirror("public.facts"), MEMBER))
GOALS = {0.001: 0.10, 0.01: 0.20}


def grp_totals(spark: SparkSession, inputs: dict[str, DataFrame], cut: CutContext) -> DataFrame:
    """Rows, amounts counted and their sum per ``grp`` of ``facts``; updated when the run allows it."""
    return totals(inputs, cut, "facts", "grp", "amount")


def compute(spark: SparkSession, spec: JobSpec, source: SourceState, root: Path, incremental: bool) -> MemberManifest:
    """The member computed and staged as the refresh job does (whole, or from its previous output)."""
    context = CutContext(GROUP, spec.watermark, spec.prev_watermark, spec.cut_number)
    if incremental:
        basis = incremental_basis(spark, spec, MEMBER.name, {"facts": source})
        assert not isinstance(basis, str), basis
        context = CutContext(GROUP, spec.watermark, spec.prev_watermark, spec.cut_number, *basis)
    frame = compute_python_member(spark, GROUP, MEMBER, {"facts": source.files}, context)
    return stage_member_output(frame, root.as_uri(), MEMBER.name, spec.watermark)


def rows_of(spark: SparkSession, root: Path) -> list[tuple[object, ...]]:
    """The member's output staged under ``root``, sorted."""
    manifest = read_member_manifest(root.as_uri(), MEMBER.name)
    assert manifest is not None
    return sorted((tuple(row) for row in spark.read.parquet(*manifest.files).collect()), key=repr)


def write_inserts(rows: int, fraction: float, lsn: int, path: Path) -> TableCapture:
    """A changelog inserting ``fraction`` x ``rows`` new keys (after the table's), the shape of an
    append-mostly table (the transfers of the bank example)."""
    capture = write_changelog(rows, fraction, lsn, path, seed=lsn)
    table = pq.read_table(path)
    table = table.set_column(0, "id", pa.array(np.arange(rows, rows + table.num_rows), pa.int64()))
    table = table.set_column(table.schema.get_field_index("_op"), "_op", pa.array(["I"] * table.num_rows))
    pq.write_table(table, path)
    return capture


def bench(spark: SparkSession, work: Path, rows: int, base: SnapshotFiles, previous: MemberManifest,
          fraction: float, repeats: int, inserts: bool = False) -> None:
    """One line: the member after ``fraction`` changed rows (updates of random keys, or ``inserts``)."""
    lsn = 1000 + int(fraction * 1e6) + (500 if inserts else 0)
    path = work / f"changes-{lsn}" / "c.parquet"
    capture = write_inserts(rows, fraction, lsn, path) if inserts else write_changelog(rows, fraction, lsn, path, lsn)
    staged, _ = refresh(spark, base, capture, work / f"mirror-{lsn}", lsn)
    spec = JobSpec(GROUP.to_dict(), f"r{lsn}", Lsn(lsn), Lsn(1), 2, (work / "unused").as_uri(), "",
                   previous_files={MEMBER.name: previous.files}, incremental=(MEMBER.name,))
    source = SourceState(base, staged)
    full_root, incremental_root = work / f"full-{lsn}", work / f"incremental-{lsn}"
    full = median_seconds(lambda: compute(spark, spec, source, full_root, False), repeats)
    updated = median_seconds(lambda: compute(spark, spec, source, incremental_root, True), repeats)
    start = time.perf_counter()
    removed_rows(base, staged.delete_files, None)
    read_removed = time.perf_counter() - start
    whole, incremental = (rows_of(spark, root) for root in (full_root, incremental_root))
    ratio = updated / full
    shape = "inserted" if inserts else "updated (random keys)"
    print(f"{fraction:>6.1%} rows {shape}: {staged.row_count:,} new rows, {staged.deleted_rows:,} deleted: "
          f"full {full:.2f} s, incremental {updated:.2f} s (of which reading the removed rows {read_removed:.2f} s)"
          f" = {ratio:.1%} of full (goal <= {GOALS[fraction]:.0%}: {'met' if ratio <= GOALS[fraction] else 'NOT met'});"
          f" outputs {'equal' if whole == incremental else 'DIFFER'} ({len(whole)} groups)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure (the median is printed)")
    arguments = parser.parse_args()
    spark = local_spark_session("bench-incremental-members")
    with tempfile.TemporaryDirectory(prefix="bench-incremental-") as directory:
        work = Path(directory)
        base = write_table(spark, arguments.rows, work / "base")
        first = JobSpec(GROUP.to_dict(), "r0", Lsn(1), None, 1, (work / "unused").as_uri(), "")
        previous = compute(spark, first, SourceState(base, None), work / "previous", False)
        bench(spark, work, arguments.rows, base, previous, 0.001, 1)  # warm-up: JIT, caches
        print(f"\n## GROUP BY aggregate member over a mirror of {arguments.rows:,} rows, in-process local[2]")
        for inserts in (False, True):
            for fraction in GOALS:
                bench(spark, work, arguments.rows, base, previous, fraction, arguments.repeats, inserts)
    spark.stop()


if __name__ == "__main__":
    main()
