"""An incremental SQL member's recorded shape: its digest and its record (:mod:`.member_shape`)."""

from __future__ import annotations

import json

import pytest
from pyspark.sql.types import DecimalType, IntegerType, LongType, StructField, StructType

from airflow_provider_streambed.refresh.derived.member_shape import shape_digest
from airflow_provider_streambed.refresh.derived.shape import (
    RECORD_FORM,
    AggregateOutput,
    GroupByShape,
    GroupKey,
    from_record,
    recorded_shape,
    to_record,
)

QUERY = "SELECT grp, COUNT(*) AS n, SUM(amount) AS total FROM facts GROUP BY grp"
SCHEMAS = {"facts": StructType([StructField("grp", IntegerType()), StructField("amount", DecimalType(12, 2))])}
KEYS = {"facts": ("id",)}
SHAPE = GroupByShape(("facts",), (GroupKey("grp", "facts", "grp"),),
                     (AggregateOutput("n", "count", None, ""),
                      AggregateOutput("total", "sum", 0, "decimal(12,2)", "amount")),
                     {"facts": ["grp", "amount"]}, filtered=True)


def test_a_record_gives_back_its_shape_or_reason_under_its_digest() -> None:
    digest = shape_digest(QUERY, SCHEMAS, KEYS, "4.2.0")
    assert from_record(to_record(SHAPE, digest), digest) == SHAPE
    assert from_record(to_record("window function", digest), digest) == "window function"


@pytest.mark.parametrize("changed", [
    {"query": QUERY.replace("COUNT(*)", "COUNT(amount)")},
    {"schemas": {"facts": StructType([StructField("grp", LongType()), StructField("amount", DecimalType(12, 2))])}},
    {"keys": {"facts": ("grp",)}},
    {"spark_version": "4.3.0"},
])
def test_a_record_of_another_query_schema_key_or_spark_is_not_used(changed: dict[str, object]) -> None:
    record = to_record(SHAPE, shape_digest(QUERY, SCHEMAS, KEYS, "4.2.0"))
    inputs: dict[str, object] = {"query": QUERY, "schemas": SCHEMAS, "keys": KEYS, "spark_version": "4.2.0", **changed}
    assert from_record(record, shape_digest(**inputs)) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("record", [None, "", "not json", json.dumps(["a list"])])
def test_no_record_or_an_unreadable_one_is_not_used(record: str | None) -> None:
    assert from_record(record, shape_digest(QUERY, SCHEMAS, KEYS, "4.2.0")) is None


def test_a_record_is_taken_as_it_is_when_its_form_is_this_one() -> None:
    record = to_record(SHAPE, shape_digest(QUERY, SCHEMAS, KEYS, "4.2.0"))
    assert recorded_shape(record) == SHAPE
    older = json.dumps({**json.loads(record), "form": RECORD_FORM - 1})
    assert recorded_shape(older) is None
    assert from_record(older, shape_digest(QUERY, SCHEMAS, KEYS, "4.2.0")) is None
