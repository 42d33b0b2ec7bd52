"""What a mirror's columns may do between two cuts, checked when a run is planned (before Spark).

An added column follows the source (older rows read null), unless the source gives the rows that
existed before the ``ALTER TABLE ... ADD COLUMN ... DEFAULT`` their value from its catalog
(``pg_attribute.atthasmissing``): no WAL record carries that value, so the mirror would show null
where the source shows the default. That case, and a dropped (or renamed) column, are refused
with a final :class:`~airflow_provider_streambed.exceptions.SchemaChangeError` that names the
column and the fix, a resync of the group, instead of publishing rows that are not the source's.
"""

from __future__ import annotations

from collections.abc import Collection

from airflow_provider_streambed.exceptions import SchemaChangeError
from airflow_provider_streambed.staging import TableCapture

#: How to get a refused group going again: copy its tables anew.
RESYNC_FIX = ("resync the group: trigger its DAG with the Param 'resync' (or run `streambed resync --group {group}`), "
              "which copies its tables again in the next cut; older cuts stay readable")


def check_mirror_columns(group: str, capture: TableCapture, previous_columns: Collection[str]) -> None:
    """Refuse a source table whose columns changed in a way the mirror cannot follow exactly.

    Args:
        group: the group's name.
        capture: the run's capture of the table (its columns at W).
        previous_columns: the mirror's columns in the previous cut.

    Raises:
        SchemaChangeError: a column of the previous cut is gone from the source (dropped or
            renamed), or an added column has a default that the source's older rows read from
            its catalog (final: no retry changes the source's catalog).
    """
    where = f"group {group!r}, member {capture.member!r}: source table {capture.source_table}"
    fix = RESYNC_FIX.format(group=group)
    gone = [name for name in previous_columns if name not in capture.columns]
    if gone:
        raise SchemaChangeError(f"{where}: columns {gone} were dropped or renamed since the last cut; the mirror "
                                f"cannot follow that yet: {fix}")
    filled = [name for name in capture.columns if name not in previous_columns and name in capture.filled_columns]
    if filled:
        raise SchemaChangeError(
            f"{where}: columns {filled} were added with a DEFAULT, which the rows from before the ALTER TABLE read "
            "from the source's catalog and no change carries, so the mirror would show null for them: "
            f"{fix}"
        )
