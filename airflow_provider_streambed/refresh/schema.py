"""The Spark job's check of a mirror's changelog against its previous files: added columns follow,
anything else fails the member before anything is staged.

The previous cut's files carry the schema the mirror had; the changelog segments carry the
source table's schema now. ``ADD COLUMN`` appears in the next cut (older rows null); a changed type
or a changed key fails the refresh. Dropped, renamed and defaulted columns are refused earlier,
when the run is planned (:mod:`.columns`); the job checks them again on the files it reads.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyspark.sql.types import StructType

from airflow_provider_streambed.exceptions import RefreshError, SchemaChangeError
from airflow_provider_streambed.staging import COMMIT_LSN, OP, SEQ, TableCapture

logger = logging.getLogger(__name__)


def check_mirror_schema(
    where: str,
    previous: StructType | None,
    changelog: StructType,
    capture: TableCapture,
    previous_key_columns: Sequence[str],
) -> None:
    """Refuse every change of a mirror's schema except added columns.

    Args:
        where: ``group ..., member ..., table ...`` for messages.
        previous: the schema of the previous cut's files (``None`` before the first cut).
        changelog: the (merged) schema of the run's changelog segments.
        capture: the run's capture of the table (columns and key in source order).
        previous_key_columns: the key in the previous cut (empty: not known).

    Raises:
        SchemaChangeError: a column was dropped or changed type, or the key changed.
        RefreshError: the changelog lacks its bookkeeping columns or a declared column.
    """
    present = {field.name: field.dataType for field in changelog.fields}
    missing = [name for name in (COMMIT_LSN, SEQ, OP, *capture.columns) if name not in present]
    if missing:
        raise RefreshError(f"{where}: changelog segments lack columns {missing}")
    row_columns = set(capture.columns)
    for name in present:
        if not name.startswith("_") and name not in row_columns:
            raise SchemaChangeError(f"{where}: column {name!r} was dropped from the source table during the run")
    if previous_key_columns and tuple(previous_key_columns) != tuple(capture.key_columns):
        raise SchemaChangeError(
            f"{where}: key changed from {list(previous_key_columns)} to {list(capture.key_columns)}; "
            "a mirror's key cannot change (re-create the group)"
        )
    if previous is None:
        return
    for field in previous.fields:
        if field.name not in row_columns:
            raise SchemaChangeError(f"{where}: column {field.name!r} was dropped from the source table")
        if present[field.name] != field.dataType:
            raise SchemaChangeError(
                f"{where}: column {field.name!r} changed type from {field.dataType.simpleString()} "
                f"to {present[field.name].simpleString()}"
            )
    added = [name for name in capture.columns if name not in previous.fieldNames()]
    if added:
        logger.info("%s: columns %s added; earlier rows get null", where, added)
