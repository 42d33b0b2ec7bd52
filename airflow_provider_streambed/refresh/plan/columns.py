"""A plan's guard on a mirror's columns between two cuts (before Spark).

A table whose columns changed in a way no change record carries (a column added with a default,
:mod:`~airflow_provider_streambed.staging.column_changes`) is copied again by the capture step
(:mod:`~airflow_provider_streambed.capture.resyncs`), so the plan sees a copy. A capture that
did not compare the table with the last cut (one that was not given the last cut's columns)
leaves the change to this guard, which refuses the run with a final
:class:`~airflow_provider_streambed.exceptions.SchemaChangeError` naming the column and the fix,
instead of publishing rows that are not the source's.
"""

from __future__ import annotations

from collections.abc import Collection

from airflow_provider_streambed.exceptions import SchemaChangeError, resync_member_fix
from airflow_provider_streambed.staging import TableCapture
from airflow_provider_streambed.staging.column_changes import columns_change


def check_mirror_columns(group: str, capture: TableCapture, previous_columns: Collection[str]) -> None:
    """Refuse a source table whose columns changed in a way the mirror cannot follow exactly.

    Args:
        group: the group's name.
        capture: the run's capture of the table (its columns at W).
        previous_columns: the mirror's columns in the previous cut.

    Raises:
        SchemaChangeError: an added column has a default that the source's older rows read from
            its catalog (final: no retry changes the source's catalog).
    """
    if why := columns_change(capture.columns, capture.filled_columns, list(previous_columns), capture.renamed):
        raise SchemaChangeError(f"group {group!r}, member {capture.member!r}: source table {capture.source_table}: "
                                f"{why}; the mirror cannot follow that change in place: "
                                f"{resync_member_fix(group, capture.member)}")
