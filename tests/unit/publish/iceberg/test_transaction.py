"""pyiceberg's ``Transaction`` internals and metadata updates, as publish/iceberg/transaction.py relies on them."""

from __future__ import annotations

from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import AssertTableUUID, TableRequirement, TableUpdate, update_table_metadata
from pyiceberg.table.update.snapshot import ManageSnapshots
from pyiceberg.types import StringType

from airflow_provider_streambed.publish.iceberg.transaction import (
    MemoTransaction,
    apply_updates,
    staged_requirements,
    staged_updates,
    transaction_table,
)


def stage_changes(transaction: Transaction, step: int | None = None) -> None:
    """Stage a property, a new column and a tag (only the ``step``-th of them when given)."""
    snapshot = transaction.table_metadata.current_snapshot_id
    assert snapshot is not None
    changes = [
        lambda: transaction.set_properties({"streambed.test": "yes"}),
        lambda: transaction.update_schema().add_column("extra", StringType()).commit(),
        lambda: ManageSnapshots(transaction).create_tag(snapshot, "bank-cut-1").commit(),
    ]
    for change in changes if step is None else changes[step : step + 1]:
        change()


def comparable(metadata: TableMetadata) -> dict[str, Any]:
    """The metadata as JSON, without the time of the last update (stamped with the clock)."""
    return metadata.model_dump(exclude={"last_updated_ms"})


def test_apply_updates_is_pyiceberg_s_update_table_metadata(table: Table) -> None:
    # _TableMetadataUpdateContext, _apply_table_update and _update_table_metadata_log
    transaction = table.transaction()
    stage_changes(transaction)
    updates, base, location = staged_updates(transaction), table.metadata, table.metadata_location
    ours = apply_updates(base, updates, location)
    theirs = update_table_metadata(base, updates, metadata_location=location)
    assert comparable(ours) == comparable(theirs)
    assert ours.metadata_log[-1].metadata_file == location  # the log gained the previous file
    assert ours.last_updated_ms > base.last_updated_ms
    assert apply_updates(base, ()) == update_table_metadata(base, ()) == base  # no change, no new timestamp


def test_the_staged_updates_and_requirements_are_what_a_commit_sends(
    catalog: SqlCatalog, table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Transaction._table, _updates and _requirements
    transaction = table.transaction()
    stage_changes(transaction)
    staged = (transaction_table(transaction), staged_updates(transaction), staged_requirements(transaction))
    assert staged[0] is table and len(staged[1]) == 4 and staged[2]  # a property, a schema (two), a tag
    sent: list[tuple[Table, tuple[TableRequirement, ...], tuple[TableUpdate, ...]]] = []
    real_commit = catalog.commit_table

    def recording_commit(
        table: Table, requirements: tuple[TableRequirement, ...], updates: tuple[TableUpdate, ...]
    ) -> Any:
        sent.append((table, requirements, updates))
        return real_commit(table, requirements, updates)

    monkeypatch.setattr(catalog, "commit_table", recording_commit)
    transaction.commit_transaction()
    [(committed, requirements, updates)] = sent
    assert committed is staged[0] and updates == staged[1]
    assert requirements == (*staged[2], AssertTableUUID(uuid=table.metadata.table_uuid))


def test_a_memo_transaction_reads_as_its_transaction_after_every_update(table: Table) -> None:
    # MemoTransaction keys its memo on len(Transaction._updates) and applies Transaction._table's metadata
    memo, plain = MemoTransaction(table), Transaction(table)
    assert comparable(memo.table_metadata) == comparable(plain.table_metadata)
    for step in range(3):
        stage_changes(memo, step)
        stage_changes(plain, step)
        assert comparable(memo.table_metadata) == comparable(plain.table_metadata), step
    assert len(staged_updates(memo)) == len(staged_updates(plain)) == 4
