"""Which GROUP BY queries are updated in the worker's process (:func:`.sql_delta_local.in_process_reason`)."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_streambed.refresh.sql_delta_local import in_process_reason
from airflow_provider_streambed.refresh.sql_shape import AggregateOutput, GroupByShape, GroupKey

ROWS = AggregateOutput("n", "count", None, "")
COUNTED = AggregateOutput("nv", "count", 0, "integer", "v")
TOTAL = AggregateOutput("s", "sum", 0, "integer", "v")
SHAPE = GroupByShape(("src",), (GroupKey("k", "src", "k"),), (ROWS, COUNTED, TOTAL,
                                                              AggregateOutput("a", "avg", 0, "integer", "v"),
                                                              AggregateOutput("lo", "min", 1, "string", "t"),
                                                              AggregateOutput("hi", "max", 2, "decimal(12,2)", "d")))


def test_plain_columns_of_one_unfiltered_source_are_updated_in_process() -> None:
    assert in_process_reason(SHAPE) is None


@pytest.mark.parametrize(("changed", "reason"), [
    ({"sources": ("src", "dim")}, "it joins sources"),
    ({"filtered": True}, "a WHERE filters its source's rows"),
    ({"aggregates": (ROWS, COUNTED, AggregateOutput("s", "sum", 0, "integer"))}, "SUM (s) is of an expression"),
    ({"aggregates": (ROWS, AggregateOutput("a", "avg", 0, "decimal(12,2)", "v"))},
     "AVG (a) of a decimal(12,2) is divided by Spark's rules"),
    ({"aggregates": (ROWS, AggregateOutput("lo", "min", 0, "double", "v"))},
     "MIN (lo) of a double is ordered by Spark's rules"),
])
def test_anything_else_is_left_to_spark_and_says_why(changed: dict[str, object], reason: str) -> None:
    assert in_process_reason(dataclasses.replace(SHAPE, **changed)) == reason  # type: ignore[arg-type]
