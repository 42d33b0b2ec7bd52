"""Benchmark of a merge-on-read mirror refresh (issue 12); prints figures and ratios with the goals.

A mirror of ``--rows`` rows (id, group, amount, text, timestamp) is written as a previous snapshot
shaped like a bootstrap's output (8 Parquet files, hash-partitioned by key, sorted by key within
each), then refreshed after 0.01 %, 0.1 % and 1 % updates, each on that same snapshot: of keys
drawn at random from the whole table, and of keys drawn from its newest 1 % (hot rows, the common
OLTP shape). Everything runs in one in-process ``local[2]`` Spark session, warmed up first, so no
JVM start is in any figure:

- merge + write: the merge a refresh runs (:func:`~airflow_provider_streambed.refresh.spark.job.merge`:
  in-process with DuckDB) and ``stage_member_output`` (new images + position deletes), the
  median of ``--repeats`` refreshes, as a fraction of a plain read + write of the whole table in
  the same session (goals: <= 3 %, <= 5 %, <= 10 %); beside it, the same refresh of the changes
  as captured under ``REPLICA IDENTITY FULL`` (each update after a delete of its old row: the
  position deletes then carry the deleted rows, for the change feed), and Spark's merge
  (``merge_mirror``: what a refresh runs when the in-process merge does not apply) of both;
- bytes written per run as a fraction of the table's bytes;
- the same refresh of a keyless copy of the table (merged as a multiset, whole-row identity) after
  0.1 % updates, beside the keyed figure (goal: <= 10 % of plain, the keyed goal 5 %);
- the floors of Spark's merge: a refresh of one key, and the key scan of random changes alone;
- read amplification of the latest cut (files a query reads, time of a full scan through
  :class:`~airflow_provider_streambed.read.spark_snapshot.SnapshotScan`) after the three refreshes
  chained, before and after a compaction (the mirror rewritten whole).

Run: ``.venv/bin/python -m benchmarks.bench_merge_on_read [--rows N] [--quick] [--only SECTION]
[--fractions 0.001]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Collection
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from airflow_provider_streambed.compat.spark import SparkLine
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.member_declarations import Mirror
from airflow_provider_streambed.read.spark_snapshot import ROW_POS, SnapshotScan
from airflow_provider_streambed.refresh.mirrors.merge_input import MirrorInput
from airflow_provider_streambed.refresh.mirrors.spark_merge import merge_mirror
from airflow_provider_streambed.refresh.spark.job import merge
from airflow_provider_streambed.staging import (
    DELETE_ROW,
    MemberManifest,
    SnapshotFiles,
    TableCapture,
    stage_member_output,
)
from airflow_provider_streambed.testing.spark import local_spark_session
from benchmarks.quick import parse_arguments

COLUMNS = ("id", "grp", "amount", "note", "at")
MIRROR = Mirror("public.facts")
GOALS = {0.0001: 0.03, 0.001: 0.05, 0.01: 0.10}


def write_table(spark: SparkSession, rows: int, directory: Path) -> SnapshotFiles:
    """The previous snapshot: ``rows`` rows in 8 Parquet files (the shape of a bootstrap's output)."""
    frame = spark.range(rows).select(
        F.col("id"),
        (F.col("id") % 100).cast("int").alias("grp"),
        (F.rand(1) * 1e6).cast("decimal(14,2)").alias("amount"),
        F.concat(F.lit("note-"), F.col("id").cast("string")).alias("note"),
        F.timestamp_micros(F.col("id") * 1000).alias("at"),
    )
    frame.repartition(8, "id").sortWithinPartitions("id").write.parquet(directory.as_uri())
    return SnapshotFiles(tuple(path.as_uri() for path in sorted(directory.glob("*.parquet"))))


def write_changelog(rows: int, fraction: float, lsn: int, path: Path, seed: int, hot: bool = False,
                    base: SnapshotFiles | None = None) -> TableCapture:
    """A changelog updating ``fraction`` of the keys (one transaction at ``lsn``), drawn from the whole
    table or (``hot``) from its newest 1 %. With ``base`` (the table's files), each update follows a
    delete of its whole old row, as the capture writes them under ``REPLICA IDENTITY FULL``."""
    count = max(1, int(rows * fraction))
    low = rows - max(count, rows // 100) if hot else 0
    changed = np.sort(low + np.random.default_rng(seed).choice(rows - low, size=count, replace=False))
    new = pa.table({
        "id": pa.array(changed, pa.int64()),
        "grp": pa.array(np.full(len(changed), 7), pa.int32()),
        "amount": pa.array([None] * len(changed), pa.decimal128(14, 2)),
        "note": pa.array(["updated"] * len(changed), pa.string()),
        "at": pa.array(np.zeros(len(changed), np.int64), pa.timestamp("us", tz="UTC")),
    })
    old = None if base is None else _rows_of(base, changed).sort_by("id").cast(new.schema)
    # each key's old row (a delete) right before its new one (an update)
    changes = new if old is None else pa.concat_tables([old, new]).take(
        np.arange(2 * count).reshape(2, count).T.ravel())
    size = len(changes)
    table = changes.append_column("_commit_lsn", pa.array(np.full(size, lsn), pa.int64())) \
        .append_column("_xid", pa.array(np.full(size, lsn), pa.int64())) \
        .append_column("_seq", pa.array(np.arange(size), pa.int32())) \
        .append_column("_op", pa.array(["U"] * size if old is None else ["D", "U"] * count, pa.string()))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return TableCapture("facts", "public.facts", COLUMNS, ("id",), (path.as_uri(),), size, old_images=old is not None,
                        field_ids={name: number for number, name in enumerate(COLUMNS, 1)})  # as a cut numbers them


def _rows_of(base: SnapshotFiles, ids: np.ndarray) -> pa.Table:
    """The rows of ``base``'s files with keys ``ids`` (without Spark's schema metadata)."""
    return ds.dataset([uri.removeprefix("file://") for uri in base.data]).to_table(
        filter=pc.field("id").isin(pa.array(ids, pa.int64()))).replace_schema_metadata(None)


def write_keyless_changelog(
    base: SnapshotFiles, rows: int, fraction: float, lsn: int, path: Path, seed: int
) -> TableCapture:
    """A keyless changelog updating ``fraction`` of the rows (one transaction at ``lsn``): each
    update is a delete of the row's whole old image and an insert of its new one."""
    chosen = np.random.default_rng(seed).choice(rows, size=max(1, int(rows * fraction)), replace=False)
    old = _rows_of(base, chosen)
    note = old.schema.get_field_index("note")
    new = old.set_column(note, old.schema.field(note), pa.array(["updated"] * len(old), pa.string()))
    changes = pa.concat_tables([old, new])
    count = len(changes)
    table = changes.append_column("_commit_lsn", pa.array(np.full(count, lsn), pa.int64())) \
        .append_column("_xid", pa.array(np.full(count, lsn), pa.int64())) \
        .append_column("_seq", pa.array(np.arange(count), pa.int32())) \
        .append_column("_op", pa.array(["D"] * len(old) + ["U"] * len(new), pa.string()))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return TableCapture("facts", "public.facts", COLUMNS, (), (path.as_uri(),), count, keyless=True)


def refresh(
    spark: SparkSession, previous: SnapshotFiles, capture: TableCapture, root: Path, lsn: int, rewrite: str = "",
    in_process: bool = True,
) -> tuple[MemberManifest, float]:
    """One mirror refresh (merge + staged write) and its wall time: the merge a refresh runs
    (in-process when it can be), or (not ``in_process``) Spark's."""
    start = time.perf_counter()
    source = MirrorInput("bench", MIRROR, capture, previous, capture.key_columns, Lsn(lsn - 1), rewrite)
    output = merge(spark, SparkLine.of(spark), source) if in_process else merge_mirror(spark, source)
    manifest = stage_member_output(
        output.rows, root.as_uri(), "facts", Lsn(lsn), capture.key_columns, incremental=output.incremental,
        deletes=output.deletes, reason=output.reason,
    )
    return manifest, time.perf_counter() - start


def size_of(uris: tuple[str, ...]) -> int:
    return sum(Path(uri.removeprefix("file://")).stat().st_size for uri in uris)


def scan_seconds(spark: SparkSession, files: SnapshotFiles) -> float:
    start = time.perf_counter()
    SnapshotScan(spark, files).rows().agg(F.count("*"), F.sum("amount")).collect()
    return time.perf_counter() - start


def bench_updates(
    spark: SparkSession, work: Path, rows: int, base: SnapshotFiles, plain: float, hot: bool, repeats: int,
    fractions: Collection[float],
) -> None:
    """Refreshes of ``base`` after each of ``fractions`` of updates (the median of ``repeats``):
    time against ``plain``, bytes written."""
    table_bytes = size_of(base.data)
    print(f"\n### {'hot (newest 1 % of keys)' if hot else 'random'} updates")
    print(f"{'updated':>8} {'keys':>9} {'merge+write s':>14} {'/ plain':>8} {'goal':>6} {'bytes written':>14}  "
          f"{'FULL identity s':>15} {'/ plain':>8}  {'Spark merge s':>13} {'/ plain':>8}  {'Spark, FULL s':>13}")
    for index, (fraction, goal) in enumerate(GOALS.items()):
        if fraction not in fractions:
            continue
        lsn = 1000 * (index + 1)
        name = f"{'hot' if hot else 'random'}{index}"
        capture = write_changelog(rows, fraction, lsn, work / f"changes-{name}" / "c.parquet", index, hot)
        timed = [refresh(spark, base, capture, work / f"run-{name}-{repeat}", lsn) for repeat in range(repeats)]
        manifest, seconds = timed[0][0], statistics.median(seconds for _, seconds in timed)
        assert manifest.incremental, manifest.reason
        full = write_changelog(rows, fraction, lsn, work / f"changes-{name}-full" / "c.parquet", index, hot, base)
        timed = [refresh(spark, base, full, work / f"full-{name}-{repeat}", lsn) for repeat in range(repeats)]
        with_rows = statistics.median(seconds for _, seconds in timed)
        assert DELETE_ROW in pq.read_schema(timed[0][0].delete_files[0].removeprefix("file://")).names
        by_spark = statistics.median(refresh(spark, base, capture, work / f"spark-{name}-{repeat}", lsn,
                                             in_process=False)[1] for repeat in range(repeats))
        timed = [refresh(spark, base, full, work / f"spark-full-{name}-{repeat}", lsn, in_process=False)
                 for repeat in range(repeats)]
        by_spark_full = statistics.median(seconds for _, seconds in timed)
        assert DELETE_ROW in pq.read_schema(timed[0][0].delete_files[0].removeprefix("file://")).names
        written = size_of(manifest.files + manifest.delete_files) / table_bytes
        print(f"{fraction:>8.2%} {capture.changes:>9,} {seconds:>14.2f} {seconds / plain:>8.1%} {goal:>6.0%} "
              f"{written:>14.2%}  {with_rows:>15.2f} {with_rows / plain:>8.1%}  {by_spark:>13.2f} "
              f"{by_spark / plain:>8.1%}  {by_spark_full:>13.2f}")


def bench_keyless(
    spark: SparkSession, work: Path, rows: int, base: SnapshotFiles, plain: float, repeats: int
) -> None:
    """The same table without a key (``REPLICA IDENTITY FULL``, merged as a multiset): a refresh
    after 0.1 % random updates, beside the keyed figure of the same changes."""
    fraction, goal = 0.001, 0.10
    keyed_capture = write_changelog(rows, fraction, 7000, work / "changes-keyed" / "c.parquet", 70)
    capture = write_keyless_changelog(base, rows, fraction, 7000, work / "changes-keyless" / "c.parquet", 70)
    keyed = statistics.median(refresh(spark, base, keyed_capture, work / f"run-keyed-{repeat}", 7000)[1]
                              for repeat in range(repeats))
    timed = [refresh(spark, base, capture, work / f"run-keyless-{repeat}", 7000) for repeat in range(repeats)]
    manifest, seconds = timed[0][0], statistics.median(seconds for _, seconds in timed)
    assert manifest.incremental and manifest.deleted_rows == capture.changes // 2, manifest.reason
    by_spark = statistics.median(refresh(spark, base, capture, work / f"spark-keyless-{repeat}", 7000,
                                         in_process=False)[1] for repeat in range(repeats))
    print(f"\n### Keyless table (whole-row identity, multiset merge): {fraction:.1%} random updates")
    print(f"{'mirror':>8} {'merge+write s':>14} {'/ plain':>8} {'goal':>6}  {'Spark merge s':>13} {'/ plain':>8}")
    print(f"{'keyless':>8} {seconds:>14.2f} {seconds / plain:>8.1%} {goal:>6.0%}  {by_spark:>13.2f} "
          f"{by_spark / plain:>8.1%}")
    print(f"{'keyed':>8} {keyed:>14.2f} {keyed / plain:>8.1%} {GOALS[fraction]:>6.0%}")


def bench_floors(spark: SparkSession, work: Path, rows: int, base: SnapshotFiles, plain: float, repeats: int) -> None:
    """What Spark's merge pays whatever it changes, as fractions of ``plain``: a refresh of one key
    (its Spark jobs, with a key scan that the key's range confines to the Parquet pages that can
    hold it), and the key scan of random changes alone (their rows found among all previous rows)."""
    capture = write_changelog(rows, 1 / rows, 9500, work / "changes-one" / "c.parquet", 0, hot=True)
    one = statistics.median(refresh(spark, base, capture, work / f"run-one-{repeat}", 9500, in_process=False)[1]
                            for repeat in range(repeats))
    changed = write_changelog(rows, 0.0001, 9600, work / "changes-scan" / "c.parquet", 1)
    keys = F.broadcast(spark.read.parquet(*changed.files).select("id"))
    scan = SnapshotScan(spark, base).rows(["id"], positions=True).join(keys, "id", "left_semi")

    def scan_seconds() -> float:
        start = time.perf_counter()
        scan.agg(F.sum(ROW_POS)).collect()
        return time.perf_counter() - start

    scanned = statistics.median(scan_seconds() for _ in range(repeats))
    print("\n### Floors of Spark's merge (what the in-process merge avoids)")
    print(f"Spark merge of one key (its least cost): {one:.2f} s = {one / plain:.1%} of plain")
    print(f"key scan alone, {changed.changes:,} random keys among {rows:,} rows: {scanned:.2f} s = "
          f"{scanned / plain:.1%} of plain")


def bench_compaction(spark: SparkSession, work: Path, rows: int, base: SnapshotFiles, plain: float) -> None:
    """Read amplification after three chained refreshes (0.01, 0.1, 1 % random), then compacted."""
    chained = base
    for index, fraction in enumerate(GOALS):
        capture = write_changelog(rows, fraction, 1000 * (index + 1), work / f"chain{index}" / "c.parquet", 10 + index)
        manifest, _ = refresh(spark, chained, capture, work / f"chained{index}", 1000 * (index + 1))
        chained = chained.then(manifest)
    before = scan_seconds(spark, chained)
    capture = write_changelog(rows, 0.0001, 9000, work / "changes-c" / "c.parquet", 9)
    compacted, seconds = refresh(spark, chained, capture, work / "compact", 9000, rewrite="compaction")
    after_files = SnapshotFiles().then(compacted)
    after = scan_seconds(spark, after_files)
    print("\n## Read amplification of the latest cut (the three random refreshes chained): full scan")
    print(f"before compaction: {len(chained.data)} data + {len(chained.deletes)} delete files, scan {before:.2f} s")
    print(f"after compaction:  {len(after_files.data)} data + 0 delete files, scan {after:.2f} s "
          f"(compaction run {seconds:.2f} s = {seconds / plain:.0%} of the plain rewrite)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3, help="refreshes per figure (the median is printed)")
    parser.add_argument("--fractions", type=float, nargs="+", choices=list(GOALS), default=list(GOALS),
                        help="the shares of keys updated in the updates section (default: each that has a goal)")
    parser.add_argument("--only", choices=["updates", "keyless", "floors", "compaction"], default=None,
                        help="run one section (each prints its figures beside the same plain read and write)")
    arguments = parse_arguments(parser, quick={"rows": 10_000, "repeats": 1, "fractions": [0.001]})
    rows = arguments.rows
    spark = local_spark_session("bench-merge-on-read")
    with tempfile.TemporaryDirectory(prefix="bench-mor-") as directory:
        work = Path(directory)
        base = write_table(spark, rows, work / "base")
        warm_up = write_changelog(rows, 0.001, 500, work / "warm-up" / "c.parquet", 99)
        refresh(spark, base, warm_up, work / "warm-up-run", 500)
        spark.read.parquet(*base.data).write.parquet((work / "plain0").as_uri())
        start = time.perf_counter()
        spark.read.parquet(*base.data).write.parquet((work / "plain").as_uri())
        plain = time.perf_counter() - start
        print(f"\n## Merge-on-read mirror of {rows:,} rows ({size_of(base.data) / 1e6:.0f} MB in {len(base.data)} "
              "files), in-process local[2]")
        print(f"plain read + write of the whole table: {plain:.2f} s")
        if arguments.only in (None, "updates"):
            for hot in (False, True):
                bench_updates(spark, work, rows, base, plain, hot, arguments.repeats, arguments.fractions)
        if arguments.only in (None, "keyless"):
            bench_keyless(spark, work, rows, base, plain, arguments.repeats)
        if arguments.only in (None, "floors"):
            bench_floors(spark, work, rows, base, plain, arguments.repeats)
        if arguments.only in (None, "compaction"):
            bench_compaction(spark, work, rows, base, plain)
    spark.stop()


if __name__ == "__main__":
    main()
