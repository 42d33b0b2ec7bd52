"""An incremental SQL member's shape, and the record of it kept with the member's output.

A shape is what makes a ``GROUP BY`` member incremental (:class:`GroupByShape`: its sources,
grouping columns and aggregates), read from Spark's plan by :mod:`.query_shape`. Its record is
JSON: the shape, or why the query is not incremental, under the digest of what decided it
(:mod:`.member_shape`), kept in the member's manifest and snapshot. Imports no pyspark: the
worker's in-process update (:mod:`.duckdb_delta`) reads records without Spark.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class AggregateOutput(NamedTuple):
    """An aggregate of the query's ``SELECT`` list.

    Attributes:
        output: its name in the output.
        function: ``count``, ``sum``, ``avg``, ``min`` or ``max``.
        argument: its argument's index among the query's distinct arguments (two aggregates of the
            same expression share it); ``None`` for ``COUNT(*)`` (or of a constant).
        kind: its argument's type, as Spark names it (``integer``, ``decimal(12,2)``, ...); empty
            for ``COUNT(*)``.
        column: its argument's column in its source when the argument is that column as it is
            (no expression over it); empty otherwise and for ``COUNT(*)``.
    """

    output: str
    function: str
    argument: int | None
    kind: str
    column: str = ""


class GroupKey(NamedTuple):
    """A grouping column: its name in the output, the source it comes from and its column there."""

    output: str
    source: str
    column: str


@dataclass(frozen=True, slots=True)
class GroupByShape:
    """An incremental SQL member's query: a ``GROUP BY`` over ``sources`` (one, or their key equi-joins).

    Attributes:
        sources: the source members it reads, each once.
        keys: its grouping columns.
        aggregates: its other outputs, in the order of its ``SELECT`` list.
        read: per source, the columns the query reads (a ``*`` reads them all).
        filtered: a ``WHERE`` (any filter of the rows) is below its ``GROUP BY``: not every row
            of its sources is a row it aggregates.
    """

    sources: tuple[str, ...]
    keys: tuple[GroupKey, ...]
    aggregates: tuple[AggregateOutput, ...] = ()
    read: Mapping[str, list[str]] = field(default_factory=dict)
    filtered: bool = False


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
