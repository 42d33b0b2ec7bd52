"""The Spark job's check of a mirror's key against its previous cut's.

Columns follow the source in place (:mod:`~airflow_provider_streambed.staging.file_columns`),
and the capture copies a member again when its key or replica identity changed
(:mod:`~airflow_provider_streambed.capture.resyncs`). A capture that recorded no identity (an
older release's) leaves a changed key to this check, which fails the member before anything is
staged: changes before and after name rows differently.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_streambed.exceptions import SchemaChangeError
from airflow_provider_streambed.staging import TableCapture


def check_mirror_key(where: str, capture: TableCapture, previous_key_columns: Sequence[str]) -> None:
    """Refuse a mirror whose key changed since its previous cut.

    Args:
        where: ``group ..., member ..., table ...`` for messages.
        capture: the run's capture of the table (its key).
        previous_key_columns: the key in the previous cut (empty: not known).

    Raises:
        SchemaChangeError: the key changed (final); names the fix, a resync of the member.
    """
    if previous_key_columns and tuple(previous_key_columns) != tuple(capture.key_columns):
        raise SchemaChangeError(
            f"{where}: key changed from {list(previous_key_columns)} to {list(capture.key_columns)}; the mirror "
            f"cannot follow it change by change: resync the member (`streambed resync --member {capture.member}`)"
        )
