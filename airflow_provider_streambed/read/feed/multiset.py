"""Multiset arithmetic on Arrow tables: what the change feed nets and what its fallback diffs.

A mirror of a keyless table is a multiset (identical rows count), so the feed never collapses
duplicates: the difference of ``left`` and ``right`` keeps a row as many times as it occurs in
``left`` beyond its occurrences in ``right``, NULLs comparing equal (SQL's ``EXCEPT ALL``, run by
DuckDB in process).

Between two snapshots few rows can cancel, so :func:`net` can first set aside the rows that have
no equal on the other side (:func:`_candidates`): a few hash lookups per column instead of
DuckDB's two differences. After updates that change a column of a type compared here (not a
float, not a nested type) to a value the other side does not hold, that is every row.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def net(removed: pa.Table, added: pa.Table, *, narrow: bool = True) -> tuple[pa.Table, pa.Table]:
    """``removed`` less ``added`` and ``added`` less ``removed``, as multisets (``EXCEPT ALL`` both
    ways), each in its own Arrow schema: a row that left and came back is in neither.

    Both tables must have the same columns in the same order. With a whole table on each side
    this is the diff of two versions of it; pass ``narrow=False`` then (most rows have an equal,
    and setting aside those that have none would only cost memory). The order of the rows is not
    kept.
    """
    if removed.num_rows == 0 or added.num_rows == 0:
        return removed, added
    left, right = _candidates(removed, added) if narrow else (None, None)
    if left is not None and not (pc.any(left).as_py() and pc.any(right).as_py()):
        return removed, added
    with duckdb.connect() as con:
        con.register("removed_rows", removed if left is None else removed.filter(left))
        con.register("added_rows", added if right is None else added.filter(right))
        gone = con.sql("SELECT * FROM removed_rows EXCEPT ALL SELECT * FROM added_rows").to_arrow_table()
        came = con.sql("SELECT * FROM added_rows EXCEPT ALL SELECT * FROM removed_rows").to_arrow_table()
    if left is None:
        return gone.cast(removed.schema), came.cast(added.schema)
    return (pa.concat_tables([removed.filter(pc.invert(left)), gone.cast(removed.schema)]),
            pa.concat_tables([added.filter(pc.invert(right)), came.cast(added.schema)]))


def _compared_alike(column: pa.DataType) -> bool:
    """Whether Arrow's ``is_in`` finds equal exactly the values of ``column``'s type that DuckDB's
    ``EXCEPT ALL`` does. Not floats (DuckDB takes ``-0.0`` for ``0.0``), nested types, or units
    finer than a microsecond and ``date64`` (DuckDB truncates them when it reads Arrow)."""
    if pa.types.is_timestamp(column) or pa.types.is_time(column):
        return column.unit in ("s", "ms", "us")
    return any(check(column) for check in (
        pa.types.is_boolean, pa.types.is_integer, pa.types.is_decimal, pa.types.is_string,
        pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary, pa.types.is_fixed_size_binary,
        pa.types.is_date32,
    ))


def _candidates(removed: pa.Table, added: pa.Table) -> tuple[pa.Array | pa.ChunkedArray, pa.Array | pa.ChunkedArray]:
    """Masks of the rows of ``removed`` and of ``added`` that may equal a row of the other side:
    in every column of one type on both sides and compared alike, a value (or NULL) that the other
    side's candidates hold too. A row outside its mask has no equal on the other side."""
    left, right = pa.array(np.ones(removed.num_rows, bool)), pa.array(np.ones(added.num_rows, bool))
    for index, field in enumerate(removed.schema):
        if field.type != added.schema.field(index).type or not _compared_alike(field.type):
            continue
        ours, theirs = removed.column(index), added.column(index)
        left = pc.and_(left, pc.is_in(ours, value_set=theirs.filter(right), skip_nulls=False))
        right = pc.and_(right, pc.is_in(theirs, value_set=ours.filter(left), skip_nulls=False))
    return left, right
