"""Which GROUP BY queries are updated in the worker's process (:func:`.sql_delta_local.in_process_reason`)."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from airflow_provider_streambed.refresh.derived.duckdb_delta import in_process_reason, updated_table
from airflow_provider_streambed.refresh.derived.shape import AggregateOutput, GroupByShape, GroupKey

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
])
def test_anything_else_is_left_to_spark_and_says_why(changed: dict[str, object], reason: str) -> None:
    assert in_process_reason(dataclasses.replace(SHAPE, **changed)) == reason  # type: ignore[arg-type]


@pytest.mark.parametrize(("key", "low", "unlike"), [
    (pa.float64(), pa.string(), "k"),
    (pa.list_(pa.float32()), pa.string(), "k"),
    (pa.int32(), pa.float64(), "lo"),
])
def test_floating_point_groups_and_extremes_are_left_to_spark(key: pa.DataType, low: pa.DataType,
                                                               unlike: str) -> None:
    shape = dataclasses.replace(SHAPE, aggregates=(ROWS, AggregateOutput("lo", "min", 1, "t", "t")))
    previous = pa.schema([("k", key), ("n", pa.int64()), ("lo", low)]).empty_table()
    rows = pa.schema([("k", key), ("t", low)]).empty_table()
    assert updated_table(shape, previous, rows, rows) == (
        f"its column {unlike} is compared by Spark's rules ({previous.schema.field(unlike).type})")
