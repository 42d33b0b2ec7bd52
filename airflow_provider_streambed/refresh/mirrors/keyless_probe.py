"""The column that narrows a keyless merge's scan of the previous rows (:mod:`.merge_lookups`).

A keyless mirror's row has no identity but its whole value, so the in-process merge compares
previous rows with the removed rows on every column. Compared whole, the previous rows of every
column are decoded and hashed (10M rows: most of the merge). Narrowed first by one column, the
*probe*, to the rows whose value some removed row has, DuckDB pushes that semi join into the
Parquet scan as min/max and Bloom filters: the probe column is read whole, the other columns only
where the probe matched (and row groups whose statistics exclude every removed value not at all).
The narrowing is exact only when no removed row holds NULL in the probe (``=`` never matches
NULL, and the whole-row comparison holds NULLs equal); a column with NULLs is never the probe.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

#: Types whose values are cheap to scan and hash whole (a fixed width). Floating point is left
#: out (NaN and -0.0 compare unlike the Parquet statistics that would prune row groups), and so
#: are intervals (equal when their months, days and nanoseconds differ).
_FIXED_WIDTH = (
    pa.types.is_integer, pa.types.is_decimal, pa.types.is_timestamp, pa.types.is_date, pa.types.is_time,
    pa.types.is_duration, pa.types.is_fixed_size_binary,
)
#: Types of variable width that compare and hash plainly.
_VARIABLE_WIDTH = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)


def probe_column(removed: pa.Table) -> str | None:
    """The column of ``removed`` (the distinct rows a keyless merge removes) to narrow the previous
    rows by before they are compared whole, or ``None`` when no column may (or nothing is removed).

    The probe holds no NULL among ``removed`` and has a plain type (integer, decimal, temporal,
    binary or text); of those, the one whose distinct values are the most numerous (the fewest
    previous rows pass), a fixed-width one among equals (the cheaper scan), the first among those.
    """
    best: tuple[int, bool] | None = None
    chosen = None
    for field, values in zip(removed.schema, removed.columns, strict=True):
        fixed = any(test(field.type) for test in _FIXED_WIDTH)
        if values.null_count or not len(values) or not (fixed or any(test(field.type) for test in _VARIABLE_WIDTH)):
            continue
        rank = (pc.count_distinct(values).as_py(), fixed)
        if best is None or rank > best:
            best, chosen = rank, field.name
    return chosen
