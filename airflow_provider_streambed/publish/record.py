"""Recording a committed cut in the ledger: its rows, its run published, older pinned runs superseded."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import Connection

from airflow_provider_streambed.exceptions import PublishConflictError
from airflow_provider_streambed.ledger import CutMember, CutRecord, Ledger
from airflow_provider_streambed.lsn import Lsn


def record_cut(
    ledger: Ledger,
    connection: Connection,
    group: str,
    run_key: str,
    watermark: Lsn,
    cut_id: int,
    members: Mapping[str, CutMember],
) -> CutRecord:
    """Insert the cut's ledger rows; mark the run published and older pinned runs superseded.

    Raises:
        PublishConflictError: another cut took ``cut_id`` meanwhile, or the run is no longer pinned.
    """
    record = ledger.record_cut(connection, group, run_key, watermark, members)
    if record.cut_id != cut_id:
        raise PublishConflictError(
            f"group {group!r}: cut {record.cut_id - 1} was published while run {run_key!r} built cut {cut_id}; "
            "nothing was published"
        )
    ledger.mark_published(connection, group, run_key, watermark, record.cut_id)
    return record
