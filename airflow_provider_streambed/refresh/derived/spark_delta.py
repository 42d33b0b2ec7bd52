"""Aggregates updated from a source's changes alone, without scanning the source.

A ``GROUP BY`` over one source is a sum over its rows, group by group, for ``COUNT`` and for a
``SUM`` Spark adds exactly (integers, decimals): the member at W is its previous output plus the
query over the rows the run added, less the query over the rows it removed, per group. So is a
``GROUP BY`` over joined sources of which one changed this run: the joined rows the run added (or
removed) are that source's added (removed) rows joined to the others, which are as they were. A
group whose ``COUNT(*)`` falls to 0 is gone, a ``SUM`` whose ``COUNT`` of its argument falls to 0
is NULL. ``AVG`` is Spark's own division of the updated ``SUM`` and ``COUNT`` of its argument, so the
query must select both: a decimal's mean is the sum divided by the count as a ``decimal(20,0)``,
cast to the mean's type, as Spark's ``Average`` computes it; an integer's is the sum as a double
divided by the count, which equals Spark's double sum while the group's values cannot add up past
2**53 (:data:`AVERAGED_EXACTLY_UP_TO` rows). ``MIN`` and ``MAX`` take the added rows' extreme in a
group that lost no rows. A group whose value is not known so (:func:`recomputed_groups`: it lost
rows and has a ``MIN`` or ``MAX``, or its integer mean counts more rows) is recomputed from the
source at W (:func:`.incremental_sql.maintained_output`), as every touched group is when the query
is not of this class (:func:`delta_reason`). This is the rule of materialized views' fast refresh
(Oracle's needs ``COUNT(*)``, and ``COUNT(x)`` beside ``SUM(x)`` and ``AVG(x)``, for the same
reasons). Floating-point sums and means, and means of ``bigint``, are rounded by Spark: only a
recompute gives them exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DecimalType, DoubleType, LongType, StructType

from airflow_provider_streambed.refresh.derived.delta_rules import (
    AVERAGED_EXACTLY_UP_TO,
    LOST,
    PART,
    bounded_means,
    has_extremes,
)
from airflow_provider_streambed.refresh.derived.shape import AggregateOutput, GroupByShape


def updated_aggregates(
    shape: GroupByShape, previous: DataFrame, added: DataFrame, removed: DataFrame, schema: StructType
) -> DataFrame:
    """The output at W of a query :func:`delta_reason` accepts, from its ``previous`` output and the
    query over the rows ``added`` and ``removed`` (both its result's columns), as ``schema`` (the
    query's) plus a boolean column :data:`LOST`: whether the group is one the changes alone do not
    update (:func:`recomputed_groups`)."""
    keys = [key.output for key in shape.keys]
    tags = {"p": previous, "a": added, "r": removed}
    names = {tag: [f"{PART}{tag}{i}" for i in range(len(shape.aggregates))] for tag in tags}
    parts = [frame.select(*keys, *[F.col(aggregate.output).alias(name)
                                   for aggregate, name in zip(shape.aggregates, names[tag], strict=True)])
             for tag, frame in tags.items()]
    parts[2] = parts[2].withColumn(LOST, F.lit(True))
    combined = parts[0].unionByName(parts[1], allowMissingColumns=True).unionByName(parts[2], allowMissingColumns=True)
    # each part has one row per group: its maximum per group is its value there (NULL: not in it)
    columns = [name for tag in tags for name in names[tag]] + [LOST]  # combined's, without asking Spark
    merged = combined.groupBy(*keys).agg(*[F.max(name).alias(name) for name in columns])
    counts = {aggregate.argument: i for i, aggregate in enumerate(shape.aggregates) if aggregate.function == "count"}
    sums = {aggregate.argument: i for i, aggregate in enumerate(shape.aggregates) if aggregate.function == "sum"}
    values = [_value(i, aggregate, counts, sums, shape, schema) for i, aggregate in enumerate(shape.aggregates)]
    rows = shape.aggregates[counts[None]].output
    return merged.select(*keys, *values, _lost(shape, counts)).where(F.col(rows) > 0)


def _lost(shape: GroupByShape, counts: dict[int | None, int]) -> Column:
    """The :data:`LOST` column: whether the group is one :func:`recomputed_groups` names."""
    lost = F.coalesce(F.col(LOST), F.lit(False)) if has_extremes(shape) else F.lit(False)
    for mean in bounded_means(shape):
        lost = lost | (_total(counts[mean.argument], LongType()) > AVERAGED_EXACTLY_UP_TO[mean.kind])
    return lost.alias(LOST)


def _value(i: int, aggregate: AggregateOutput, counts: dict[int | None, int], sums: dict[int | None, int],
           shape: GroupByShape, schema: StructType) -> Column:
    """Aggregate ``i``'s value at W (see :func:`updated_aggregates`)."""
    kind = schema[aggregate.output].dataType
    if aggregate.function == "count":
        value = _total(i, kind)
    elif aggregate.function in ("sum", "avg"):
        counted = _total(counts[aggregate.argument], LongType())
        value = F.when(counted == 0, F.lit(None)).otherwise(
            _total(i, kind) if aggregate.function == "sum" else _mean(sums[aggregate.argument], counted, shape, schema))
    else:
        extreme = F.least if aggregate.function == "min" else F.greatest
        value = extreme(*[F.col(f"{PART}{tag}{i}") for tag in "pa"])
    return value.cast(kind).alias(aggregate.output)


def _mean(summed: int, counted: Column, shape: GroupByShape, schema: StructType) -> Column:
    """The mean of the values of aggregate ``summed`` (a ``SUM``) over ``counted`` rows, as Spark's
    ``Average`` divides its sum (before its cast to the mean's type)."""
    kind = schema[shape.aggregates[summed].output].dataType
    total = _total(summed, kind).cast(kind)
    if isinstance(kind, DecimalType):
        return total / counted.cast(DecimalType(20, 0))
    return total.cast(DoubleType()) / counted.cast(DoubleType())


def _total(i: int, kind: DataType) -> Column:
    """Previous plus added less removed values of aggregate ``i`` (absent: 0), of type ``kind``
    (a ``COUNT``'s: ``bigint``), added in a decimal: ``kind`` itself, or ``decimal(38, 0)`` for
    an integer, so that no step overflows where the result would not."""
    exact = kind if isinstance(kind, DecimalType) else DecimalType(38, 0)
    parts: Sequence[Column] = [F.coalesce(F.col(f"{PART}{tag}{i}").cast(exact), F.lit(0).cast(exact))
                               for tag in "par"]
    return parts[0] + parts[1] - parts[2]
