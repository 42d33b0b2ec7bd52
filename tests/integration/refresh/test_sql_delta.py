"""Aggregates updated from the changes alone equal Spark's own over the rows at W, exactly
(:func:`.sql_delta.updated_aggregates` on real Spark, local[2]): sums and means of decimals whose
means round, and of integers."""

from __future__ import annotations

import random
from decimal import Decimal

from pyspark.sql import DataFrame, SparkSession

from airflow_provider_streambed.refresh.sql_delta import LOST, delta_reason, updated_aggregates
from airflow_provider_streambed.refresh.sql_shape import GroupByShape, group_by_shape

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
