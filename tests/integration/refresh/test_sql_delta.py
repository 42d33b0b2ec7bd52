"""Aggregates updated from the changes alone equal Spark's own over the rows at W, exactly
(:func:`.sql_delta.updated_aggregates` on real Spark, local[2]): sums and means of decimals whose
means round, and of integers."""

from __future__ import annotations

import dataclasses
import random
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

from airflow_provider_streambed.refresh.derived.delta_rules import LOST, delta_reason
from airflow_provider_streambed.refresh.derived.duckdb_delta import in_process_reason, updated_table
from airflow_provider_streambed.refresh.derived.query_shape import group_by_shape
from airflow_provider_streambed.refresh.derived.shape import GroupByShape
from airflow_provider_streambed.refresh.derived.spark_delta import updated_aggregates

QUERY = ("SELECT g, COUNT(*) AS n, COUNT(d) AS nd, SUM(d) AS sd, AVG(d) AS ad, COUNT(i) AS ni, SUM(i) AS si, "
         "AVG(i) AS ai FROM src GROUP BY g")
SCHEMA = "g int, d decimal(18, 8), i int"


def _rows(rng: random.Random, count: int) -> list[tuple[int, Decimal | None, int | None]]:
    return [(rng.randrange(6), None if rng.random() < 0.1 else Decimal(rng.randrange(-10**17, 10**17)) / 10**8,
             None if rng.random() < 0.1 else rng.randrange(-2**31, 2**31)) for _ in range(count)]


def _query(spark: SparkSession, rows: list[tuple[int, Decimal | None, int | None]]) -> DataFrame:
    spark.createDataFrame(rows, SCHEMA).createOrReplaceTempView("src")
    return spark.sql(QUERY).localCheckpoint()


def test_updated_sums_and_means_equal_sparks_over_the_rows_at_w(spark: SparkSession) -> None:
    rng = random.Random(3)
    before, added = _rows(rng, 400), _rows(rng, 50)
    gone = set(rng.sample(range(len(before)), 60))
    removed = [row for i, row in enumerate(before) if i in gone]
    after = [row for i, row in enumerate(before) if i not in gone] + added
    spark.createDataFrame([], SCHEMA).createOrReplaceTempView("src")
    shape = group_by_shape(spark.sql(QUERY), {"src": ()})
    assert isinstance(shape, GroupByShape) and delta_reason(shape, ("src",)) is None
    previous, plus, minus, whole = (_query(spark, rows) for rows in (before, added, removed, after))
    updated = updated_aggregates(shape, previous, plus, minus, whole.schema).drop(LOST)
    spark.catalog.dropTempView("src")
    assert sorted(updated.collect()) == sorted(whole.collect())


#: Of the in-process class (:mod:`.sql_delta_local`): plain columns, integer means, string extremes.
LOCAL_QUERY = ("SELECT g, COUNT(*) AS n, COUNT(d) AS nd, SUM(d) AS sd, COUNT(i) AS ni, SUM(i) AS si, AVG(i) AS ai, "
               "MIN(s) AS lo, MAX(s) AS hi FROM src GROUP BY g")
LOCAL_SCHEMA = "g int, d decimal(18, 8), i int, s string"


def _local_rows(rng: random.Random, count: int) -> list[tuple[int | None, Decimal | None, int | None, str | None]]:
    return [(None if rng.random() < 0.1 else rng.randrange(6), *row[1:], rng.choice([None, "a", "B", "é", "z"]))
            for row in _rows(rng, count)]


@pytest.mark.parametrize("deletes", [False, True])
def test_updated_in_process_equals_sparks_over_the_rows_at_w(spark: SparkSession, deletes: bool) -> None:
    rng = random.Random(5)
    before, added = _local_rows(rng, 400), _local_rows(rng, 50)
    gone = set(rng.sample(range(len(before)), 60 if deletes else 0)) | ({0, 1, 2, 3} if deletes else set())
    removed = [row for i, row in enumerate(before) if i in gone]
    after = [row for i, row in enumerate(before) if i not in gone] + added
    spark.createDataFrame([], LOCAL_SCHEMA).createOrReplaceTempView("src")
    shape = group_by_shape(spark.sql(LOCAL_QUERY), {"src": ()})
    assert isinstance(shape, GroupByShape)
    assert in_process_reason(shape) is None and delta_reason(shape, ("src",)) is None

    def query(rows: list[tuple[object, ...]]) -> pa.Table:
        spark.createDataFrame(rows, LOCAL_SCHEMA).createOrReplaceTempView("src")
        return spark.sql(LOCAL_QUERY).toArrow()

    previous, whole = query(before), query(after)
    source = {name: spark.createDataFrame(rows, LOCAL_SCHEMA).toArrow()
              for name, rows in (("a", added), ("r", removed))}
    spark.catalog.dropTempView("src")
    updated = updated_table(shape, previous, source["a"], source["r"])
    if deletes:  # groups that lost rows have a MIN and a MAX: Spark recomputes them
        assert updated == "some groups lost rows and have a MIN or MAX, or count more rows than their AVG is exact for"
        shape = dataclasses.replace(shape, aggregates=shape.aggregates[:-2])
        previous, whole = (table.drop_columns(["lo", "hi"]) for table in (previous, whole))
        updated = updated_table(shape, previous, source["a"], source["r"])
    assert isinstance(updated, pa.Table), updated
    assert updated.schema == whole.schema
    assert sorted(updated.to_pylist(), key=repr) == sorted(whole.to_pylist(), key=repr)
