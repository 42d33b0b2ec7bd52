"""Multiset arithmetic on Arrow tables: what the change feed nets and what its fallback diffs.

A mirror of a keyless table is a multiset (identical rows count), so the feed never collapses
duplicates: ``difference(left, right)`` keeps a row as many times as it occurs in ``left`` beyond
its occurrences in ``right``, NULLs comparing equal (SQL's ``EXCEPT ALL``, run by DuckDB in
process).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa


def difference(left: pa.Table, right: pa.Table) -> pa.Table:
    """``left`` less ``right`` as multisets (``EXCEPT ALL``), with ``left``'s Arrow schema.

    Both tables must have the same columns in the same order.
    """
    if left.num_rows == 0 or right.num_rows == 0:
        return left
    with duckdb.connect() as con:
        con.register("left_rows", left)
        con.register("right_rows", right)
        result = con.sql("SELECT * FROM left_rows EXCEPT ALL SELECT * FROM right_rows").to_arrow_table()
    return result.cast(left.schema)


def net(removed: pa.Table, added: pa.Table) -> tuple[pa.Table, pa.Table]:
    """``removed`` and ``added`` less the rows they share (counting duplicates): a row that left
    and came back, unchanged, is in neither."""
    if removed.num_rows == 0 or added.num_rows == 0:
        return removed, added
    return difference(removed, added), difference(added, removed)
