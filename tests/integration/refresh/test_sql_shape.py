"""Which SQL members are incremental, read from the analyzed plan of the installed Spark.

This is also the test of the one private PySpark API the package uses (``DataFrame._jdf``'s
analyzed plan, :func:`~airflow_provider_streambed.refresh.derived.query_shape.analyzed_plan`): it fails
when the installed Spark stops exposing the plan nodes and expressions as relied on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from airflow_provider_streambed.refresh.derived.query_shape import group_by_shape
from airflow_provider_streambed.refresh.derived.shape import AggregateOutput, GroupByShape, GroupKey

pytestmark = pytest.mark.slow


@pytest.fixture
def views(spark: SparkSession) -> Iterator[SparkSession]:
    spark.range(10).selectExpr("id", "cast(id % 3 as string) AS k", "cast(id AS decimal(12, 2)) AS v") \
        .createOrReplaceTempView("src")
    spark.range(3).createOrReplaceTempView("other")
    spark.range(4).selectExpr("id", "cast(id % 3 as string) AS part", "cast(id % 2 as string) AS region") \
        .createOrReplaceTempView("dim")
    yield spark
    for view in ("src", "other", "dim"):
        spark.catalog.dropTempView(view)


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
    shape = group_by_shape(views.sql(query), {"src": ("id",)})
    if keys is None:
        assert shape == "it groups by an expression that is not a column of its sources"
    else:
        assert isinstance(shape, GroupByShape), shape
        assert shape.sources == ("src",)
        assert shape.keys == tuple(GroupKey(output, "src", column) for output, column in keys)


@pytest.mark.parametrize(("query", "aggregates"), [
    ("SELECT k, COUNT(*) AS n, COUNT(v) nv, SUM(v) s, AVG(v) a, MIN(v) lo, MAX(v) hi FROM src WHERE v > 1 GROUP BY k",
     [("n", "count", None, ""), ("nv", "count", 0, "decimal(12,2)", "v"), ("s", "sum", 0, "decimal(12,2)", "v"),
      ("a", "avg", 0, "decimal(12,2)", "v"), ("lo", "min", 0, "decimal(12,2)", "v"),
      ("hi", "max", 0, "decimal(12,2)", "v")]),
    ("SELECT k, COUNT(1) AS n, SUM(v * 2) AS s, COUNT(v) AS nv, SUM(id) AS i, COUNT(id) AS ni FROM src GROUP BY k",
     [("n", "count", None, ""), ("s", "sum", 0, "decimal(14,2)"), ("nv", "count", 1, "decimal(12,2)", "v"),
      ("i", "sum", 2, "long", "id"), ("ni", "count", 2, "long", "id")]),
    ("SELECT k, SUM(CAST(v AS double)) AS d, AVG(CAST(id AS int)) AS m FROM src GROUP BY k",
     [("d", "sum", 0, "double"), ("m", "avg", 1, "integer")]),
    # a column renamed in a derived table is an expression's result, not the source's column
    ("SELECT k, SUM(w) AS s FROM (SELECT k, v AS w FROM src) t GROUP BY k", [("s", "sum", 0, "decimal(12,2)")]),
    # so is a column a derived table that takes the source's name computes under the column's name
    ("SELECT k, SUM(v) AS s FROM (SELECT k, v * 2 AS v FROM src) src GROUP BY k", [("s", "sum", 0, "decimal(14,2)")]),
])
def test_a_group_by_shape_names_its_aggregates_their_arguments_and_types(
    views: SparkSession, query: str, aggregates: list[tuple[str, str, int | None, str]]
) -> None:
    shape = group_by_shape(views.sql(query), {"src": ("id",)})
    assert isinstance(shape, GroupByShape), shape
    assert shape.aggregates == tuple(AggregateOutput(*aggregate) for aggregate in aggregates)


@pytest.mark.parametrize(("query", "read"), [
    ("SELECT k, COUNT(*) AS n, SUM(v) AS s FROM src WHERE v > 1 GROUP BY k", {"src": ["k", "v"]}),
    ("SELECT k, COUNT(*) AS n FROM src WHERE id > 1 GROUP BY k", {"src": ["id", "k"]}),
    ("SELECT k, SUM(v) FROM (SELECT * FROM src WHERE v > 0) t GROUP BY k", {"src": ["id", "k", "v"]}),
    ("SELECT s.k, d.region, COUNT(*) FROM src s JOIN dim d ON s.id = d.id AND s.k = d.part GROUP BY s.k, d.region",
     {"src": ["id", "k"], "dim": ["id", "part", "region"]}),
])
def test_a_group_by_shape_names_the_columns_it_reads(views: SparkSession, query: str,
                                                     read: dict[str, list[str]]) -> None:
    shape = group_by_shape(views.sql(query), _sources(query))
    assert isinstance(shape, GroupByShape), shape
    assert shape.read == read


@pytest.mark.parametrize(("query", "filtered"), [
    ("SELECT k, COUNT(*) AS n FROM src GROUP BY k", False),
    ("SELECT k, COUNT(*) AS n FROM (SELECT k, v * 2 AS w FROM src) t GROUP BY k", False),
    ("SELECT k, COUNT(*) AS n FROM src WHERE v > 1 GROUP BY k", True),
    ("SELECT k, COUNT(*) AS n FROM (SELECT * FROM src WHERE id > 1) t GROUP BY k", True),
    ("SELECT k, COUNT(*) AS n FROM (SELECT * FROM src WHERE id > 1) src GROUP BY k", True),
    ("SELECT s.k, COUNT(*) FROM src s JOIN dim d ON s.id = d.id AND s.k = d.part GROUP BY s.k", False),
    ("SELECT s.k, COUNT(*) FROM src s JOIN (SELECT * FROM dim WHERE region > 'a') d ON s.id = d.id AND s.k = d.part "
     "GROUP BY s.k", True),
])
def test_a_group_by_shape_says_whether_a_filter_drops_source_rows(views: SparkSession, query: str,
                                                                  filtered: bool) -> None:
    shape = group_by_shape(views.sql(query), _sources(query))
    assert isinstance(shape, GroupByShape), shape
    assert shape.filtered is filtered


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
    ("SELECT k, COUNT(*) FROM src WHERE rand() < 2 GROUP BY k", "a non-deterministic expression"),
    ("SELECT k, COUNT(*) FROM src WHERE id IN (SELECT id FROM other) GROUP BY k", "a subquery"),
])
def test_anything_else_says_why_it_is_not(views: SparkSession, query: str, reason: str) -> None:
    shape = group_by_shape(views.sql(query), {"src": ("id",)})
    assert isinstance(shape, str) and shape.startswith(reason), shape


#: The declared keys of the views: ``dim``'s is (id, part), ``other`` has none.
KEYS = {"src": ("id",), "dim": ("id", "part"), "other": ()}


def _sources(query: str) -> dict[str, tuple[str, ...]]:
    """The views ``query`` reads, with their keys."""
    return {name: key for name, key in KEYS.items() if re.search(rf"\b{name}\b", query)}


@pytest.mark.parametrize(("query", "keys"), [
    ("SELECT s.k, d.region, COUNT(*) AS n, SUM(s.v) AS total FROM src s JOIN dim d ON s.id = d.id AND s.k = d.part "
     "GROUP BY s.k, d.region", None),
    ("SELECT s.k, d.region, COUNT(*) FROM (SELECT id + 1 AS i, k FROM src) s JOIN dim d ON s.i = d.id "
     "AND s.k = d.part GROUP BY s.k, d.region", None),
    ("SELECT s.id, d.region, COUNT(*) AS n, SUM(s.v) AS total FROM (SELECT id, v, k AS p FROM src WHERE v > 1) s "
     "JOIN dim d ON d.part = s.p AND s.id = d.id WHERE d.region <> '9' GROUP BY s.id, d.region",
     (GroupKey("id", "src", "id"), GroupKey("region", "dim", "region"))),
    ("SELECT o.id AS o, region, s.k, MIN(v) FROM other o JOIN src s ON o.id = s.id JOIN dim ON dim.id = s.id "
     "AND dim.part = s.k GROUP BY o.id, s.k, region", None),
    ("SELECT s.k, d.region AS r, MAX(v) FROM src s JOIN dim d ON s.id = d.id AND s.k = d.part GROUP BY s.k, d.region",
     (GroupKey("k", "src", "k"), GroupKey("r", "dim", "region"))),
])
def test_a_group_by_over_key_equi_joins_is_incremental(views: SparkSession, query: str,
                                                       keys: tuple[GroupKey, ...] | None) -> None:
    shape = group_by_shape(views.sql(query), _sources(query))
    assert isinstance(shape, GroupByShape), shape
    assert set(shape.sources) == {"src", "dim", "other"} if "other" in query else {"src", "dim"}
    assert keys is None or shape.keys == keys


@pytest.mark.parametrize(("query", "reason"), [
    ("SELECT d.region, COUNT(*) AS n, SUM(s.v) AS total FROM src s JOIN dim d ON s.id = d.id AND s.k = d.part "
     "GROUP BY d.region", "no GROUP BY column comes from src and it is not joined on its key"),
    ("SELECT s.k, MIN(v) FROM other o JOIN src s ON o.id = s.id GROUP BY s.k",
     "no GROUP BY column comes from other and it is not joined on its key"),
    ("SELECT s.k, COUNT(*) FROM (SELECT id * 2 AS i, k FROM src) s JOIN other o ON s.i = o.id GROUP BY s.k",
     "a join not on the key of other or src"),
    ("SELECT d.region, COUNT(*) FROM src s JOIN dim d ON s.k = d.part GROUP BY d.region",
     "a join not on the key of dim or src"),
    ("SELECT d.region, COUNT(*) FROM src s LEFT JOIN dim d ON s.id = d.id AND s.k = d.part GROUP BY d.region",
     "a left outer join"),
    ("SELECT d.region, COUNT(*) FROM src s JOIN dim d ON s.id + 1 = d.id AND s.k = d.part GROUP BY d.region",
     "a join on something else than equal columns"),
    ("SELECT d.region, COUNT(*) FROM src s JOIN dim d ON s.id = d.id AND s.k = d.part AND s.v > 1 "
     "GROUP BY d.region", "a join on something else than equal columns"),
    ("SELECT d.region, COUNT(*) FROM src s CROSS JOIN dim d GROUP BY d.region", "a cross join"),
    ("SELECT a.k, COUNT(*) FROM src a JOIN src b ON a.id = b.id GROUP BY a.k", "a self-join of src"),
    ("SELECT d.region, COUNT(*) FROM (SELECT id AS i, k FROM src) s JOIN (SELECT id + 0 AS id, part, region "
     "FROM dim) d ON s.i = d.id AND s.k = d.part GROUP BY d.region", "a join not on the key of dim or src"),
    ("SELECT d.region, COUNT(*) FROM src s, dim d WHERE s.id = d.id AND s.k = d.part GROUP BY d.region",
     "a join without ON (a cross join)"),
    ("SELECT s.k, COUNT(*) FROM src s JOIN (SELECT part, MAX(id) AS id FROM dim GROUP BY part) d ON s.id = d.id "
     "GROUP BY s.k", "a nested aggregation"),
    ("SELECT upper(d.region), COUNT(*) FROM src s JOIN dim d ON s.id = d.id AND s.k = d.part GROUP BY upper(d.region)",
     "it groups by an expression that is not a column of its sources"),
])
def test_other_joins_say_why_they_are_not(views: SparkSession, query: str, reason: str) -> None:
    shape = group_by_shape(views.sql(query), _sources(query))
    assert isinstance(shape, str) and shape.startswith(reason), shape


def test_a_source_the_query_does_not_read_makes_it_whole(views: SparkSession) -> None:
    assert group_by_shape(views.sql("SELECT k, COUNT(*) FROM src GROUP BY k"), {"src": (), "other": ()}) == \
        "its query does not read its source 'other'"
