"""The group commit: every member's pointer and the cut's ledger rows in one database transaction.

pyiceberg's ``SqlCatalog.commit_table`` swaps one table's pointer per transaction. A cut needs
all of them at once, so this module updates the ``iceberg_tables`` rows itself (the layout is
Iceberg's JDBC catalog's), each with compare-and-swap on the previous metadata location, inserts
the rows of tables created by this cut, and records the cut in the ledger, in one transaction of
the catalog database. Any failure rolls everything back.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping
from typing import cast

from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from sqlalchemy import Connection, Table, insert, update
from sqlalchemy.exc import IntegrityError

from airflow_provider_streambed.exceptions import PublishConflictError
from airflow_provider_streambed.ledger import CutMember, CutRecord, Ledger, RunState, runs_table
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish.tables import MemberPlan

logger = logging.getLogger(__name__)

#: Called inside the publish transaction after the pointer updates, before the commit (tests).
BeforeCommit = Callable[[Connection], None]


class AlreadyPublished(Exception):
    """The run's cut was found in the ledger inside the publish transaction."""

    def __init__(self, record: CutRecord) -> None:
        super().__init__(f"run {record.run_key!r} is cut {record.cut_id}")
        self.record = record


def cut_members(plans: Mapping[str, MemberPlan]) -> dict[str, CutMember]:
    """The ledger's member rows for the planned snapshots."""
    return {
        plan.member: CutMember(plan.member, plan.table_name, plan.snapshot_id, plan.new_location)
        for plan in plans.values()
    }


def swap_pointer(catalog: SqlCatalog, connection: Connection, group: str, plan: MemberPlan) -> None:
    """Move one table's pointer (or insert it on first use) inside ``connection``'s transaction.

    Raises:
        PublishConflictError: the pointer moved since the table was read, or the table was
            created by another writer meanwhile.
    """
    namespace, name = plan.identifier
    rows = cast(Table, IcebergTables.__table__)
    if plan.base_location is None:
        try:
            connection.execute(insert(rows).values(**catalog._create_table_row(namespace, name, plan.new_location)))
        except IntegrityError as error:
            raise PublishConflictError(
                f"group {group!r}, member {plan.member!r}: table {plan.table_name} was created by another writer "
                "while this cut was built; nothing was published"
            ) from error
        return
    statement = (
        update(rows)
        .where(
            rows.c.catalog_name == catalog.name,
            rows.c.table_namespace == namespace,
            rows.c.table_name == name,
            rows.c.metadata_location == plan.base_location,
        )
        .values(metadata_location=plan.new_location, previous_metadata_location=plan.base_location)
    )
    if connection.execute(statement).rowcount != 1:
        raise PublishConflictError(
            f"group {group!r}, member {plan.member!r}: table {plan.table_name} was changed by another writer "
            "since this cut was built; nothing was published"
        )


def commit_group(
    catalog: SqlCatalog,
    ledger: Ledger,
    group: str,
    run_key: str,
    watermark: Lsn,
    cut_id: int,
    plans: Mapping[str, MemberPlan],
    before_commit: BeforeCommit | None = None,
) -> CutRecord:
    """Swap every member's pointer and record cut ``cut_id`` in one transaction.

    Raises:
        AlreadyPublished: the run is in the ledger already (nothing changed).
        PublishConflictError: a member table or the group's cut sequence moved meanwhile.
    """
    with ledger.begin() as connection:
        existing = ledger.cut_for_run(group, run_key, connection)
        if existing is not None:
            raise AlreadyPublished(existing)
        for plan in plans.values():
            swap_pointer(catalog, connection, group, plan)
        if before_commit is not None:
            before_commit(connection)
        record = record_cut(ledger, connection, group, run_key, watermark, cut_id, plans)
    return record


def record_cut(
    ledger: Ledger,
    connection: Connection,
    group: str,
    run_key: str,
    watermark: Lsn,
    cut_id: int,
    plans: Mapping[str, MemberPlan],
) -> CutRecord:
    """Insert the cut's ledger rows; mark the run published and older pinned runs superseded."""
    record = ledger.record_cut(connection, group, run_key, watermark, cut_members(plans))
    if record.cut_id != cut_id:
        raise PublishConflictError(
            f"group {group!r}: cut {record.cut_id - 1} was published while run {run_key!r} built cut {cut_id}; "
            "nothing was published"
        )
    if ledger.get_run(group, run_key, connection) is not None:
        ledger.set_run_state(group, run_key, RunState.PUBLISHED, connection)
    # A pinned run at or below W can never publish now (W strictly increases).
    connection.execute(
        update(runs_table)
        .where(
            runs_table.c.group_name == group,
            runs_table.c.state == RunState.PINNED.value,
            runs_table.c.watermark <= watermark.value,
            runs_table.c.run_key != run_key,
        )
        .values(state=RunState.SUPERSEDED.value, updated_at=dt.datetime.now(dt.UTC))
    )
    return record
