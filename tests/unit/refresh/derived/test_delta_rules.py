"""Which GROUP BY queries' aggregates are updated from their changes alone (:func:`delta_reason`)."""

from __future__ import annotations

import pytest

from airflow_provider_streambed.refresh.derived.delta_rules import (
    averages_exactly,
    delta_reason,
    recomputed_groups,
    sums_exactly,
)
from airflow_provider_streambed.refresh.derived.shape import AggregateOutput, GroupByShape, GroupKey

KEYS = (GroupKey("k", "src", "k"),)
DECIMAL = "decimal(12,2)"
ROWS = AggregateOutput("n", "count", None, "")
COUNTED = AggregateOutput("nv", "count", 0, DECIMAL)
TOTAL = AggregateOutput("s", "sum", 0, DECIMAL)
MEAN = AggregateOutput("a", "avg", 0, DECIMAL)
LOW = AggregateOutput("lo", "min", 0, DECIMAL)


def _shape(*aggregates: AggregateOutput, sources: tuple[str, ...] = ("src",)) -> GroupByShape:
    return GroupByShape(sources, KEYS, aggregates)


def _integers(kind: str) -> tuple[AggregateOutput, ...]:
    return (ROWS, AggregateOutput("ni", "count", 1, kind), AggregateOutput("si", "sum", 1, kind),
            AggregateOutput("ai", "avg", 1, kind))


@pytest.mark.parametrize("aggregates", [(ROWS,), (ROWS, COUNTED, TOTAL), (TOTAL, ROWS, COUNTED, LOW),
                                        (COUNTED, ROWS, AggregateOutput("hi", "max", 1, "double")),
                                        (ROWS, MEAN, COUNTED, TOTAL), _integers("integer"), _integers("short")])
def test_counts_exact_sums_means_and_extremes_beside_their_counts_are_updated(
    aggregates: tuple[AggregateOutput]
) -> None:
    assert delta_reason(_shape(*aggregates), ("src",)) is None


def test_a_join_is_updated_from_its_changes_when_one_source_changed() -> None:
    join = _shape(ROWS, COUNTED, TOTAL, sources=("src", "dim"))
    assert delta_reason(join, ("dim",)) is None
    assert delta_reason(join, ()) is None
    assert delta_reason(join, ("src", "dim")) == "more than one of its joined sources changed (src, dim)"


@pytest.mark.parametrize(("shape", "reason"), [
    (_shape(COUNTED, TOTAL), "no COUNT(*) tells when a group is empty"),
    (_shape(ROWS, AggregateOutput("nd", "count", 0, "double"), AggregateOutput("d", "sum", 0, "double")),
     "SUM (d) of a floating-point or wide decimal argument is rounded by Spark"),
    (_shape(ROWS, COUNTED, AggregateOutput("s2", "sum", 1, DECIMAL)),
     "no COUNT of the argument of SUM (s2) tells when it is NULL"),
    (_shape(*_integers("long")), "AVG (ai) of a long argument is rounded by Spark"),
    (_shape(ROWS, AggregateOutput("nd", "count", 0, "double"), AggregateOutput("ad", "avg", 0, "double")),
     "AVG (ad) of a double argument is rounded by Spark"),
    (_shape(ROWS, MEAN, TOTAL), "no COUNT of the argument of AVG (a) tells when it is NULL"),
    (_shape(ROWS, MEAN, COUNTED), "no SUM of the argument of AVG (a) to divide (select it too)"),
])
def test_other_queries_say_why_their_touched_groups_are_recomputed(shape: GroupByShape, reason: str) -> None:
    assert delta_reason(shape, ("src",)) == reason


@pytest.mark.parametrize(("kind", "summed", "averaged"), [
    ("integer", True, True), ("long", True, False), ("byte", True, True), ("double", False, False),
    ("decimal(12,2)", True, True), ("decimal(30,6)", True, True), ("decimal(30,8)", False, False),
    ("decimal(26,8)", True, True), ("date", False, False),
])
def test_exact_sums_and_means_by_the_arguments_type(kind: str, summed: bool, averaged: bool) -> None:
    assert (sums_exactly(kind), averages_exactly(kind)) == (summed, averaged)


def test_the_groups_not_updated_are_those_that_lost_an_extreme_or_count_too_many_integers() -> None:
    assert recomputed_groups(_shape(ROWS, COUNTED, TOTAL, MEAN)) == ""
    assert recomputed_groups(_shape(ROWS, LOW)) == "the groups that lost rows (MIN, MAX)"
    assert recomputed_groups(_shape(*_integers("integer"), LOW)) == (
        "the groups that lost rows (MIN, MAX) and of more than 4,194,304 rows (AVG (ai))")
