"""Which ``GROUP BY`` aggregates a source's changes alone update exactly: the rule, without an engine.

A ``GROUP BY`` over one source is a sum over its rows, group by group, for ``COUNT`` and for a
``SUM`` Spark adds exactly (integers, decimals): the member at W is its previous output plus the
query over the rows the run added, less the query over the rows it removed, per group (see
:mod:`.spark_delta`, which computes it in Spark, and :mod:`.duckdb_delta`, in the worker's
process). :func:`delta_reason` says when a query is not of that class, :func:`recomputed_groups`
which of its groups the changes alone do not give. Imports no pyspark.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from airflow_provider_streambed.refresh.derived.shape import AggregateOutput, GroupByShape

#: The functions whose value an update knows only for a group that lost no rows.
EXTREMES = frozenset({"min", "max"})
#: Per integer type Spark averages through a double sum, the rows of a group up to which that sum
#: is exact (the magnitudes of the values then add up to at most 2**53).
AVERAGED_EXACTLY_UP_TO = {"byte": 2**46, "short": 2**38, "integer": 2**22}
#: The prefix of the columns of the parts the updates combine.
PART = "_streambed_"
#: The column of an update's result that is true on the groups it cannot update.
LOST = f"{PART}lost"


def sums_exactly(kind: str) -> bool:
    """Whether Spark sums values of the type named ``kind`` exactly: integers, and decimals whose
    sum's type (precision + 10, at most 38) leaves room to add three sums without Spark rounding
    their scale (a scale of at most 6, or a precision of at most 26)."""
    if kind in ("byte", "short", "integer", "long"):
        return True
    decimal = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", kind)
    return decimal is not None and (int(decimal[2]) <= 6 or int(decimal[1]) <= 26)


def averages_exactly(kind: str) -> bool:
    """Whether Spark's mean of values of the type named ``kind`` is known from their updated sum and
    count: an exactly summed decimal, or an integer of :data:`AVERAGED_EXACTLY_UP_TO` (in a group
    of at most that many rows)."""
    return kind in AVERAGED_EXACTLY_UP_TO or (kind.startswith("decimal") and sums_exactly(kind))


def delta_reason(shape: GroupByShape, changed: Sequence[str]) -> str | None:
    """Why the query's aggregates cannot be updated from the changes alone of its sources that
    ``changed`` this run (its touched groups are then recomputed from the sources), or ``None``
    when they can (see the module)."""
    if len(changed) > 1:
        return f"more than one of its joined sources changed ({', '.join(changed)})"
    if not any(aggregate.function == "count" and aggregate.argument is None for aggregate in shape.aggregates):
        return "no COUNT(*) tells when a group is empty"
    counted = {aggregate.argument for aggregate in shape.aggregates if aggregate.function == "count"}
    summed = {aggregate.argument for aggregate in shape.aggregates if aggregate.function == "sum"}
    for aggregate in shape.aggregates:
        name = f"{aggregate.function.upper()} ({aggregate.output})"
        if aggregate.function == "sum" and not sums_exactly(aggregate.kind):
            return f"{name} of a floating-point or wide decimal argument is rounded by Spark"
        if aggregate.function == "avg" and not averages_exactly(aggregate.kind):
            return f"{name} of a {aggregate.kind} argument is rounded by Spark"
        if aggregate.function in ("sum", "avg") and aggregate.argument not in counted:
            return f"no COUNT of the argument of {name} tells when it is NULL"
        if aggregate.function == "avg" and aggregate.argument not in summed:
            return f"no SUM of the argument of {name} to divide (select it too)"
    return None


def recomputed_groups(shape: GroupByShape) -> str:
    """The groups of a query :func:`delta_reason` accepts that its changes alone cannot update (its
    :data:`LOST` groups), in words; empty when there are none."""
    found = ["that lost rows (MIN, MAX)"] if has_extremes(shape) else []
    found += [f"of more than {AVERAGED_EXACTLY_UP_TO[mean.kind]:,} rows (AVG ({mean.output}))"
              for mean in bounded_means(shape)]
    return f"the groups {' and '.join(found)}" if found else ""


def has_extremes(shape: GroupByShape) -> bool:
    """Whether the query has a ``MIN`` or ``MAX``, which a group that lost rows must recompute."""
    return any(aggregate.function in EXTREMES for aggregate in shape.aggregates)


def bounded_means(shape: GroupByShape) -> list[AggregateOutput]:
    """The query's ``AVG`` of integers, exact up to :data:`AVERAGED_EXACTLY_UP_TO` rows a group."""
    return [aggregate for aggregate in shape.aggregates
            if aggregate.function == "avg" and aggregate.kind in AVERAGED_EXACTLY_UP_TO]
