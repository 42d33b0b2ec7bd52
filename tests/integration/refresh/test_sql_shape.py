"""Which SQL members are incremental, read from the analyzed plan of the installed Spark.

This is also the test of the one private PySpark API the package uses (``DataFrame._jdf``'s
analyzed plan, :func:`~airflow_provider_streambed.refresh.sql_shape.analyzed_plan`): it fails
when the installed Spark stops exposing the plan nodes and expressions as relied on.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from airflow_provider_streambed.refresh.sql_shape import GroupByShape, group_by_shape

pytestmark = pytest.mark.slow


@pytest.fixture
def views(spark: SparkSession) -> Iterator[SparkSession]:
    spark.range(10).selectExpr("id", "cast(id % 3 as string) AS k", "cast(id AS decimal(12, 2)) AS v") \
        .createOrReplaceTempView("src")
    spark.range(3).createOrReplaceTempView("other")
    yield spark
    spark.catalog.dropTempView("src")
    spark.catalog.dropTempView("other")


@pytest.mark.parametrize(("query", "keys"), [
    ("SELECT k, COUNT(*) AS n, COUNT(v) nv, SUM(v) s, AVG(v) a, MIN(v) lo, MAX(v) hi FROM src WHERE v > 1 GROUP BY k",
     (("k", "k"),)),
    ("SELECT k AS key, id % 2 = 0 AS even, SUM(v) FROM src GROUP BY k, id % 2 = 0", None),
    ("SELECT g, SUM(v) FROM (SELECT k AS g, v FROM src WHERE v > 0) t GROUP BY g", None),
    ("SELECT k, SUM(v) FROM (SELECT * FROM src WHERE v > 0) t GROUP BY k", (("k", "k"),)),
    ("SELECT k AS key, SUM(v * 2) AS s FROM src GROUP BY k", (("key", "k"),)),
    ("SELECT id, k, COUNT(*) FROM src GROUP BY k, id", (("id", "id"), ("k", "k"))),
])
def test_a_group_by_over_one_source_is_incremental(views: SparkSession, query: str,
                                                   keys: tuple[tuple[str, str], ...] | None) -> None:
    shape = group_by_shape(views.sql(query), ("src",))
    if keys is None:
        assert shape == "it groups by an expression that is not a column of its source"
    else:
        assert shape == GroupByShape("src", keys)


@pytest.mark.parametrize(("query", "reason"), [
    ("SELECT k, row_number() OVER (ORDER BY k) FROM src", "window function"),
    ("SELECT k, COUNT(*) FROM src GROUP BY k ORDER BY k", "ORDER BY"),
    ("SELECT k, COUNT(*) FROM src GROUP BY k HAVING COUNT(*) > 1", "HAVING"),
    ("SELECT * FROM (SELECT k, COUNT(*) FROM src GROUP BY k) t", "its result is not a GROUP BY"),
    ("SELECT k, COUNT(DISTINCT v) FROM src GROUP BY k", "an aggregate with DISTINCT or FILTER"),
    ("SELECT k, collect_list(v) FROM src GROUP BY k", "aggregate function CollectList"),
    ("SELECT k, SUM(v) + 1 FROM src GROUP BY k", "an expression over aggregates or groups"),
    ("SELECT COUNT(*) FROM src", "an aggregate without GROUP BY"),
    ("SELECT COUNT(*) FROM src GROUP BY k", "a GROUP BY column is not in its SELECT list"),
    ("SELECT s.k, COUNT(*) FROM src s JOIN other o ON s.id = o.id GROUP BY s.k", "a join"),
    ("SELECT k, COUNT(*) FROM src WHERE rand() < 2 GROUP BY k", "a non-deterministic expression"),
    ("SELECT k, COUNT(*) FROM src WHERE id IN (SELECT id FROM other) GROUP BY k", "a subquery"),
])
def test_anything_else_says_why_it_is_not(views: SparkSession, query: str, reason: str) -> None:
    shape = group_by_shape(views.sql(query), ("src",))
    assert isinstance(shape, str) and shape.startswith(reason), shape


def test_a_query_over_two_sources_is_not(views: SparkSession) -> None:
    assert group_by_shape(views.sql("SELECT k, COUNT(*) FROM src GROUP BY k"), ("src", "other")) == \
        "it reads 2 sources (a GROUP BY over one source is incremental)"
