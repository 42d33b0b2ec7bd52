"""Which GROUP BY queries' aggregates are updated from their changes alone (:func:`delta_reason`)."""

from __future__ import annotations

import pytest

from airflow_provider_streambed.refresh.sql_delta import delta_reason, has_extremes
from airflow_provider_streambed.refresh.sql_shape import AggregateOutput, GroupByShape, GroupKey

KEYS = (GroupKey("k", "src", "k"),)
ROWS = AggregateOutput("n", "count", None, True)
COUNTED = AggregateOutput("nv", "count", 0, True)
TOTAL = AggregateOutput("s", "sum", 0, True)
LOW = AggregateOutput("lo", "min", 0, True)


def _shape(*aggregates: AggregateOutput, sources: tuple[str, ...] = ("src",)) -> GroupByShape:
    return GroupByShape(sources, KEYS, aggregates)


@pytest.mark.parametrize("aggregates", [(ROWS,), (ROWS, COUNTED, TOTAL), (TOTAL, ROWS, COUNTED, LOW),
                                        (COUNTED, ROWS, AggregateOutput("hi", "max", 1, False))])
def test_counts_exact_sums_and_extremes_beside_their_counts_are_updated(aggregates: tuple[AggregateOutput]) -> None:
    assert delta_reason(_shape(*aggregates)) is None


@pytest.mark.parametrize(("shape", "reason"), [
    (_shape(ROWS, COUNTED, TOTAL, sources=("src", "dim")), "a join's aggregates are recomputed"),
    (_shape(COUNTED, TOTAL), "no COUNT(*) tells when a group is empty"),
    (_shape(ROWS, COUNTED, AggregateOutput("a", "avg", 0, True)), "AVG (a) is rounded by Spark"),
    (_shape(ROWS, AggregateOutput("nd", "count", 0, False), AggregateOutput("d", "sum", 0, False)),
     "SUM (d) of a floating-point or wide decimal argument is rounded by Spark"),
    (_shape(ROWS, COUNTED, AggregateOutput("s2", "sum", 1, True)),
     "no COUNT of the argument of SUM (s2) tells when it is NULL"),
])
def test_other_queries_say_why_their_touched_groups_are_recomputed(shape: GroupByShape, reason: str) -> None:
    assert delta_reason(shape) == reason


def test_only_min_and_max_are_extremes() -> None:
    assert not has_extremes(_shape(ROWS, COUNTED, TOTAL))
    assert not has_extremes(_shape(ROWS, COUNTED, AggregateOutput("a", "avg", 0, True)))
    assert has_extremes(_shape(ROWS, LOW))
