"""The record of an incremental SQL member's shape, kept with its output (:mod:`.member_shape`).

A record is JSON: the shape of the query (:class:`~.query_shape.GroupByShape`), or why it is not
incremental, under the digest of what decided it. Reading one needs no Spark. Imports no pyspark.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_provider_streambed.refresh.derived.query_shape import AggregateOutput, GroupByShape, GroupKey

#: The form of a record: a record of another form is not used (its shape is read again).
RECORD_FORM = 3


def to_record(shape: GroupByShape | str, digest: str) -> str:
    """The JSON record of ``shape`` (or why the query is not incremental) under ``digest``."""
    if isinstance(shape, str):
        return json.dumps({"form": RECORD_FORM, "digest": digest, "reason": shape})
    return json.dumps({"form": RECORD_FORM, "digest": digest, "sources": list(shape.sources),
                       "keys": [list(key) for key in shape.keys],
                       "aggregates": [list(aggregate) for aggregate in shape.aggregates],
                       "read": {name: list(columns) for name, columns in shape.read.items()},
                       "filtered": shape.filtered})


def from_record(record: str | None, digest: str) -> GroupByShape | str | None:
    """The shape (or reason) ``record`` holds when it was recorded under ``digest``, else ``None``."""
    data = _record_data(record)
    return None if data is None or data.get("digest") != digest else _shape_of(data)


def recorded_shape(record: str | None) -> GroupByShape | str | None:
    """The shape (or reason) ``record`` holds whatever its digest, for a run in which the query
    and its sources' columns are known to be the ones it was recorded for; ``None`` when there is
    no record of this form."""
    data = _record_data(record)
    return None if data is None else _shape_of(data)


def _record_data(record: str | None) -> dict[str, Any] | None:
    """The record's fields, when it is a record of :data:`RECORD_FORM`."""
    try:
        data = json.loads(record or "null")
    except ValueError:
        return None
    return data if isinstance(data, dict) and data.get("form") == RECORD_FORM else None


def _shape_of(data: Mapping[str, Any]) -> GroupByShape | str:
    if "reason" in data:
        return str(data["reason"])
    return GroupByShape(tuple(data["sources"]), tuple(GroupKey(*key) for key in data["keys"]),
                        tuple(AggregateOutput(*aggregate) for aggregate in data["aggregates"]),
                        {name: list(columns) for name, columns in data["read"].items()}, bool(data["filtered"]))
