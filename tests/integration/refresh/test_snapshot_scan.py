"""Spark's read of a snapshot's files with their position deletes applied (:class:`SnapshotScan`).

The scan finds each row's file by its size (a per-file constant Spark keeps in ``_metadata``),
and by its name too where two files have the same size, and probes only the files a delete names:
these tests build files of equal size, one of them without deletes, and deletes over a file the
scan does not read, and compare the live rows with the expected ones.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from airflow_provider_streambed.read.spark_snapshot import (
    DELETED_ROW,
    FIELD_ID_KEY,
    POSITION_BITS,
    ROW_FILE,
    ROW_POS,
    SnapshotScan,
    deleted_row,
    row_key,
)
from airflow_provider_streambed.staging import DELETE_FILE_PATH, DELETE_POS, DELETE_ROW, SnapshotFiles

pytestmark = pytest.mark.slow


def data_file(path: Path, tag: str, rows: int) -> str:
    """A Parquet file of ``rows`` rows ``(tag, 0..rows-1)``: files of one-letter tags and equal
    ``rows`` have the same bytes but for the letter, so the same size."""
    pq.write_table(pa.table({"tag": [tag] * rows, "id": pa.array(range(rows), pa.int64())}), path)
    return path.as_uri()


def delete_file(path: Path, deleted: list[tuple[str, int]]) -> str:
    """A position-delete file naming ``(file URI, position)`` pairs."""
    pq.write_table(pa.table({DELETE_FILE_PATH: [uri for uri, _ in deleted],
                             DELETE_POS: pa.array([pos for _, pos in deleted], pa.int64())}), path)
    return path.as_uri()


def test_rows_of_files_of_equal_size_are_told_apart(spark: SparkSession, tmp_path: Path) -> None:
    first, second, third, untouched = (data_file(tmp_path / f"part-{n}.parquet", "abce"[n], 100) for n in range(4))
    bigger = data_file(tmp_path / "part-big.parquet", "d", 500)
    sizes = {Path(uri.removeprefix("file://")).stat().st_size for uri in (first, second, third, untouched)}
    assert len(sizes) == 1, "the four files must share their size"
    gone = tmp_path.as_uri() + "/gone.parquet"  # named by a delete, not scanned
    deletes = (
        delete_file(tmp_path / "d1.parquet", [(first, 0), (first, 99), (second, 5), (bigger, 499)]),
        delete_file(tmp_path / "d2.parquet", [(third, 50), (bigger, 0), (gone, 1)]),
    )
    scan = SnapshotScan(spark, SnapshotFiles((first, second, third, untouched, bigger), deletes))

    live = sorted((row.tag, row.id) for row in scan.rows().collect())
    deleted = {("a", 0), ("a", 99), ("b", 5), ("c", 50), ("d", 0), ("d", 499)}
    expected = [(tag, i) for tag, rows in (("a", 100), ("b", 100), ("c", 100), ("d", 500), ("e", 100))
                for i in range(rows) if (tag, i) not in deleted]
    assert live == expected

    positioned = {(row[ROW_FILE], row[ROW_POS]): row.id for row in scan.rows(positions=True).collect()}
    assert positioned[("part-1.parquet", 6)] == 6 and ("part-1.parquet", 5) not in positioned
    assert len(positioned) == len(expected)


def test_a_scan_without_deletes_reads_every_row(spark: SparkSession, tmp_path: Path) -> None:
    files = tuple(data_file(tmp_path / f"part-{n}.parquet", "ab"[n], 10) for n in range(2))
    scan = SnapshotScan(spark, SnapshotFiles(files))
    assert sorted((row.tag, row.id) for row in scan.rows().collect()) == [(tag, i) for tag in "ab" for i in range(10)]
    assert {row[ROW_FILE] for row in scan.rows(positions=True).collect()} == {"part-0.parquet", "part-1.parquet"}


def test_row_keys_found_by_name_where_sizes_are_not_known(spark: SparkSession, tmp_path: Path) -> None:
    """Files Spark reads in place on an object store: no sizes, every file found by its name."""
    files = [data_file(tmp_path / f"part-{n}.parquet", "ab"[n], 3) for n in range(2)]
    names = [Path(uri).name for uri in files]
    keys = spark.read.parquet(*files).select("tag", "id", row_key(names, None, set(names)).alias("key")).collect()
    assert sorted((row.tag, row.id, row.key) for row in keys) == [
        (tag, i, (ordinal << POSITION_BITS) + i) for ordinal, tag in enumerate("ab") for i in range(3)]
    only_b = spark.read.parquet(*files).select("tag", row_key(names, None, {names[1]}).alias("key")).collect()
    assert {row.tag for row in only_b if row.key is None} == {"a"}


def test_deletes_carry_a_row_only_when_given_one_whatever_the_tables_columns(spark: SparkSession,
                                                                              tmp_path: Path) -> None:
    """A table's own column named ``row`` is no deleted row: only :data:`DELETED_ROW` becomes the
    deletes' ``row``, with the field ids of its values."""
    path = tmp_path / "part-0.parquet"
    pq.write_table(pa.table({"id": pa.array(range(3), pa.int64()), DELETE_ROW: ["a", "b", "c"]}), path)
    scan = SnapshotScan(spark, SnapshotFiles((path.as_uri(),)))
    located = scan.rows(positions=True).where("id = 1")
    assert scan.deletes_of(located).columns == [DELETE_FILE_PATH, DELETE_POS]
    carried = scan.deletes_of(located.withColumn(DELETED_ROW, deleted_row(["id", DELETE_ROW], {"id": 1, "row": 2})))
    assert carried.columns == [DELETE_FILE_PATH, DELETE_POS, DELETE_ROW]
    values = carried.schema[DELETE_ROW].dataType
    assert [(field.name, field.metadata) for field in values.fields] == [
        ("id", {FIELD_ID_KEY: 1}), (DELETE_ROW, {FIELD_ID_KEY: 2})]
    assert [tuple(row[DELETE_ROW]) for row in carried.collect()] == [(1, "b")]
