"""The probe column of a keyless merge: never a column with a NULL among the removed rows."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from airflow_provider_streambed.refresh.mirrors.keyless_probe import probe_column


def test_the_column_with_the_most_distinct_removed_values_is_the_probe() -> None:
    removed = pa.table({"src": [1, 1, 1], "dst": [1, 2, 3], "label": ["a", "b", "b"]})
    assert probe_column(removed) == "dst"


def test_a_fixed_width_column_is_the_probe_among_equal_counts_else_the_first() -> None:
    removed = pa.table({
        "note": ["a", "b"], "id": [1, 2], "amount": pa.array([Decimal("1.5"), Decimal("2.5")], pa.decimal128(9, 2))})
    assert probe_column(removed) == "id"
    assert probe_column(pa.table({"a": ["x", "y"], "b": ["y", "z"]})) == "a"


def test_a_column_with_a_null_among_the_removed_rows_is_never_the_probe() -> None:
    removed = pa.table({"id": [1, 2, None], "label": ["a", "a", "a"]})
    assert probe_column(removed) == "label"


@pytest.mark.parametrize(
    "removed",
    [
        pa.table({"id": [1, None], "label": [None, "a"]}),  # every column holds a NULL
        pa.table({"id": pa.array([], pa.int64())}),  # nothing removed
        pa.table({"x": [1.5, float("nan")], "tags": [[1], [2]], "flag": [True, False]}),  # float, list, bool
    ],
    ids=["nulls-everywhere", "nothing-removed", "no-plain-type"],
)
def test_no_probe_when_no_column_may_narrow_the_scan(removed: pa.Table) -> None:
    assert probe_column(removed) is None
