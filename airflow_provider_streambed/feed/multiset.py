"""Multiset arithmetic on Arrow tables: what the change feed nets and what its fallback diffs.

A mirror of a keyless table is a multiset (identical rows count), so the feed never collapses
duplicates: the difference of ``left`` and ``right`` keeps a row as many times as it occurs in
``left`` beyond its occurrences in ``right``, NULLs comparing equal (SQL's ``EXCEPT ALL``, run by
DuckDB in process).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa


def net(removed: pa.Table, added: pa.Table) -> tuple[pa.Table, pa.Table]:
    """``removed`` less ``added`` and ``added`` less ``removed``, as multisets (``EXCEPT ALL`` both
    ways), each in its own Arrow schema: a row that left and came back is in neither.

    Both tables must have the same columns in the same order. With a whole table on each side
    this is the diff of two versions of it.
    """
    if removed.num_rows == 0 or added.num_rows == 0:
        return removed, added
    with duckdb.connect() as con:
        con.register("removed_rows", removed)
        con.register("added_rows", added)
        gone = con.sql("SELECT * FROM removed_rows EXCEPT ALL SELECT * FROM added_rows").to_arrow_table()
        came = con.sql("SELECT * FROM added_rows EXCEPT ALL SELECT * FROM removed_rows").to_arrow_table()
    return gone.cast(removed.schema), came.cast(added.schema)
