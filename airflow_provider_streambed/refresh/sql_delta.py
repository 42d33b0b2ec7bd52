"""Aggregates updated from a source's changes alone, without scanning the source.

A ``GROUP BY`` over one source is a sum over its rows, group by group, for ``COUNT`` and for a
``SUM`` Spark adds exactly (integers, decimals): the member at W is its previous output plus the
query over the rows the run added, less the query over the rows it removed, per group (a group
whose ``COUNT(*)`` falls to 0 is gone, a ``SUM`` whose ``COUNT`` of its argument falls to 0 is
NULL). ``MIN`` and ``MAX`` take the added rows' extreme in a group that lost no rows; a group that
lost rows is recomputed from the source at W (:func:`.sql_incremental.maintained_output`), as
every touched group is when the query is not of this class (:func:`delta_reason`). This is the
rule of materialized views' fast refresh (Oracle's needs ``COUNT(*)`` and ``COUNT(x)`` beside
``SUM(x)`` for the same reasons). ``AVG`` is not updated so: Spark rounds it (a double or a
decimal division), so only a recompute gives its value exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DecimalType, LongType, StructType

from airflow_provider_streambed.refresh.sql_shape import AggregateOutput, GroupByShape

#: The functions whose value :func:`updated_aggregates` knows only for a group that lost no rows.
EXTREMES = frozenset({"min", "max"})
#: The prefix of the columns of the parts :func:`updated_aggregates` combines.
_PART = "_streambed_"
#: The column of :func:`updated_aggregates`'s result that is true on the groups that lost rows.
LOST = f"{_PART}lost"


def delta_reason(shape: GroupByShape) -> str | None:
    """Why the query's aggregates cannot be updated from its source's changes alone (its touched
    groups are then recomputed from the source), or ``None`` when they can (see the module)."""
    if len(shape.sources) != 1:
        return "a join's aggregates are recomputed"
    if not any(aggregate.function == "count" and aggregate.argument is None for aggregate in shape.aggregates):
        return "no COUNT(*) tells when a group is empty"
    counted = {aggregate.argument for aggregate in shape.aggregates if aggregate.function == "count"}
    for aggregate in shape.aggregates:
        if aggregate.function == "avg":
            return f"AVG ({aggregate.output}) is rounded by Spark"
        if aggregate.function == "sum" and not aggregate.exact:
            return f"SUM ({aggregate.output}) of a floating-point or wide decimal argument is rounded by Spark"
        if aggregate.function == "sum" and aggregate.argument not in counted:
            return f"no COUNT of the argument of SUM ({aggregate.output}) tells when it is NULL"
    return None


def has_extremes(shape: GroupByShape) -> bool:
    """Whether the query has a ``MIN`` or ``MAX``, which a group that lost rows must recompute."""
    return any(aggregate.function in EXTREMES for aggregate in shape.aggregates)


def updated_aggregates(
    shape: GroupByShape, previous: DataFrame, added: DataFrame, removed: DataFrame, schema: StructType
) -> DataFrame:
    """The output at W of a query :func:`delta_reason` accepts, from its ``previous`` output and the
    query over the rows ``added`` and ``removed`` (both its result's columns), as ``schema`` (the
    query's) plus a boolean column :data:`LOST`: whether the group lost rows (its ``MIN`` and ``MAX``
    are then not known here)."""
    keys = [key.output for key in shape.keys]
    parts = [frame.select(*keys, *[F.col(aggregate.output).alias(f"{_PART}{tag}{i}")
                                   for i, aggregate in enumerate(shape.aggregates)])
             for tag, frame in (("p", previous), ("a", added), ("r", removed))]
    parts[2] = parts[2].withColumn(LOST, F.lit(True))
    combined = parts[0].unionByName(parts[1], allowMissingColumns=True).unionByName(parts[2], allowMissingColumns=True)
    # each part has one row per group: its maximum per group is its value there (NULL: not in it)
    merged = combined.groupBy(*keys).agg(*[F.max(name).alias(name) for name in combined.columns if name not in keys])
    counts = {aggregate.argument: i for i, aggregate in enumerate(shape.aggregates) if aggregate.function == "count"}
    values = [_value(i, aggregate, counts, schema) for i, aggregate in enumerate(shape.aggregates)]
    rows = shape.aggregates[counts[None]].output
    return merged.select(*keys, *values, F.coalesce(F.col(LOST), F.lit(False)).alias(LOST)).where(F.col(rows) > 0)


def _value(i: int, aggregate: AggregateOutput, counts: dict[int | None, int], schema: StructType) -> Column:
    """Aggregate ``i``'s value at W (see :func:`updated_aggregates`)."""
    kind = schema[aggregate.output].dataType
    if aggregate.function == "count":
        value = _total(i, kind)
    elif aggregate.function == "sum":
        value = F.when(_total(counts[aggregate.argument], LongType()) == 0, F.lit(None)).otherwise(_total(i, kind))
    else:
        extreme = F.least if aggregate.function == "min" else F.greatest
        value = extreme(*[F.col(f"{_PART}{tag}{i}") for tag in "pa"])
    return value.cast(kind).alias(aggregate.output)


def _total(i: int, kind: DataType) -> Column:
    """Previous plus added less removed values of aggregate ``i`` (absent: 0), of type ``kind``
    (a ``COUNT``'s: ``bigint``), added in a decimal: ``kind`` itself, or ``decimal(38, 0)`` for
    an integer, so that no step overflows where the result would not."""
    exact = kind if isinstance(kind, DecimalType) else DecimalType(38, 0)
    parts: Sequence[Column] = [F.coalesce(F.col(f"{_PART}{tag}{i}").cast(exact), F.lit(0).cast(exact))
                               for tag in "par"]
    return parts[0] + parts[1] - parts[2]
