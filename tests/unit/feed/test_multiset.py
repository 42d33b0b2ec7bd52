"""Multiset difference and netting of the change feed: duplicates count, NULLs compare equal."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pyarrow as pa

from airflow_provider_streambed.feed.multiset import net

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.large_string()), ("amount", pa.decimal128(12, 2)),
                    ("at", pa.timestamp("us", tz="UTC")), ("tags", pa.list_(pa.string()))])


def _table(*rows: tuple[object, ...]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, row, strict=True)) for row in rows], schema=SCHEMA)


def _bag(table: pa.Table) -> Counter[str]:
    return Counter(repr(row) for row in table.to_pylist())


def test_net_counts_duplicates_and_nulls_and_keeps_the_schema() -> None:
    one = (1, "a", Decimal("1.50"), None, ["x"])
    null = (None, None, None, None, None)
    left = _table(one, one, one, null, null, (2, "b", Decimal(0), None, []))
    right = _table(one, null, (3, "c", Decimal(1), None, None))
    gone, came = net(left, right)
    assert gone.schema == came.schema == SCHEMA
    assert _bag(gone) == _bag(_table(one, one, null, (2, "b", Decimal(0), None, [])))
    assert _bag(came) == _bag(_table((3, "c", Decimal(1), None, None)))


def test_net_drops_the_rows_both_sides_share() -> None:
    row, other = (1, "a", Decimal(1), None, None), (2, "b", Decimal(2), None, None)
    removed, added = net(_table(row, row, other), _table(row, (1, "a", Decimal(3), None, None)))
    assert _bag(removed) == _bag(_table(row, other))
    assert _bag(added) == _bag(_table((1, "a", Decimal(3), None, None)))
    empty = _table()
    assert net(empty, _table(row)) == (empty, _table(row))
