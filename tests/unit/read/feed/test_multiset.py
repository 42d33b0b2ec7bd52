"""Multiset difference and netting of the change feed: duplicates count, NULLs compare equal."""

from __future__ import annotations

import datetime as dt
import math
import random
from collections import Counter
from decimal import Decimal

import duckdb
import pyarrow as pa

from airflow_provider_streambed.read.feed.multiset import _candidates, net

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


def _floats_bag(table: pa.Table) -> Counter[str]:
    """``_bag`` with ``-0.0`` read as ``0.0``: equal rows, of which DuckDB keeps either."""
    return Counter(repr({name: 0.0 if isinstance(value, float) and value == 0 else value
                         for name, value in row.items()}) for row in table.to_pylist())


def _except_all(left: pa.Table, right: pa.Table) -> Counter[str]:
    """The reference: DuckDB's ``EXCEPT ALL`` over the whole tables."""
    with duckdb.connect() as con:
        con.register("l", left)
        con.register("r", right)
        return _floats_bag(con.sql("SELECT * FROM l EXCEPT ALL SELECT * FROM r").to_arrow_table())


def test_net_equals_except_all_over_whole_tables_on_random_rows() -> None:
    """The rows sent to DuckDB are narrowed first; the result must be the whole tables' difference,
    with floats (``-0.0`` equals ``0.0``, NaN equals NaN in DuckDB) and lists compared by DuckDB."""
    schema = pa.schema([("id", pa.int32()), ("name", pa.string()), ("score", pa.float64()),
                        ("tags", pa.list_(pa.int8())), ("at", pa.date32())])
    rng = random.Random(34)
    values: dict[str, list[object]] = {
        "id": [1, 2, None], "name": ["a", "b", None], "score": [0.0, -0.0, math.nan, 1.5, None],
        "tags": [[1], [1, 2], [], None], "at": [dt.date(2026, 1, 1), None]}

    def rows(count: int) -> pa.Table:
        return pa.Table.from_pylist([{name: rng.choice(options) for name, options in values.items()}
                                    for _ in range(count)], schema=schema)

    for _ in range(40):
        removed, added = rows(rng.randint(1, 12)), rows(rng.randint(1, 12))
        gone, came = net(removed, added)
        assert gone.schema == came.schema == schema
        assert (_floats_bag(gone), _floats_bag(came)) == (_except_all(removed, added), _except_all(added, removed))


def test_net_sets_aside_only_rows_without_an_equal_and_keeps_what_duckdb_takes_for_equal() -> None:
    """Rows whose every compared column holds a value the other side lacks skip DuckDB; floats are
    left to DuckDB, which takes ``-0.0`` for ``0.0``; chunked columns and ``string`` against
    ``large_string`` are narrowed too."""
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
    removed = pa.Table.from_batches([
        pa.record_batch([pa.array([1, 2]), pa.array(["a", "b"]), pa.array([0.0, 1.0])], schema=schema),
        pa.record_batch([pa.array([3]), pa.array(["c"]), pa.array([2.0])], schema=schema),
    ])
    added = pa.table({"id": [1, 2, 4], "name": ["a", "b2", "d"], "score": [-0.0, 1.0, 2.0]}, schema=schema)
    left, right = _candidates(removed, added)
    assert left.to_pylist() == [True, False, False] and right.to_pylist() == [True, False, False]
    gone, came = net(removed, added)
    assert _bag(gone) == _bag(removed.slice(1)) and _bag(came) == _bag(added.slice(1))  # -0.0 met 0.0
    wide = added.cast(pa.schema([("id", pa.int64()), ("name", pa.large_string()), ("score", pa.float64())]))
    assert _candidates(removed, wide)[0].to_pylist() == [True, True, False]  # names compared by DuckDB only
    assert _bag(net(removed, wide)[0]) == _bag(removed.slice(1))
