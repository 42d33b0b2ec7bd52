"""The Spark job's check of a mirror's key against its previous cut's.

Columns follow the source in place (:mod:`~airflow_provider_streambed.staging.file_columns`),
and the capture copies a member again when its key or replica identity changed
(:mod:`~airflow_provider_streambed.capture.resyncs`). A capture that recorded no identity (an
older release's) leaves a changed key to this check, which fails the member before anything is
staged: changes before and after name rows differently.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_streambed.exceptions import SchemaChangeError, resync_member_fix
from airflow_provider_streambed.staging import TableCapture


def check_mirror_key(group: str, capture: TableCapture, previous_key_columns: Sequence[str]) -> None:
    """Refuse a mirror whose key changed since its previous cut.

    Args:
        group: the group's name.
        capture: the run's capture of the table (its key).
        previous_key_columns: the key in the previous cut (empty: not known).

    Raises:
        SchemaChangeError: the key changed (final); names the fix, a resync of the member.
    """
    if previous_key_columns and tuple(previous_key_columns) != tuple(capture.key_columns):
        raise SchemaChangeError(
            f"group {group!r}, member {capture.member!r}, table {capture.source_table!r}: key changed from "
            f"{list(previous_key_columns)} to {list(capture.key_columns)}; the mirror cannot follow it change by "
            f"change: {resync_member_fix(group, capture.member)}"
        )
