"""pyiceberg's snapshot-producer internals, as publish/iceberg/snapshot.py relies on them: the cut's
snapshots summarise and list their files as pyiceberg's own producers do, and a cut snapshot that
loses a race fails without a rebase and leaves no file behind."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io.pyarrow import parquet_file_to_data_file
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table, Transaction
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.update import AddSnapshotUpdate

from airflow_provider_streambed.publish.iceberg.snapshot import ReplaceAll, RowDelta
from airflow_provider_streambed.publish.iceberg.transaction import MemoTransaction, apply_updates, staged_updates
from tests.unit.publish.iceberg.conftest import ROWS

PROPERTIES = {"streambed.cut-id": "2"}


def new_data_file(table: Table, name: str) -> DataFile:
    """``ROWS`` written to a new Parquet file in the table's data directory."""
    path = f"{table.location()}/data/{name}.parquet"
    pq.write_table(ROWS, path.removeprefix("file://"))
    return parquet_file_to_data_file(table.io, table.metadata, path)


def staged_snapshot(transaction: Transaction) -> Snapshot:
    """The snapshot ``transaction`` stages."""
    [snapshot] = [update.snapshot for update in staged_updates(transaction) if isinstance(update, AddSnapshotUpdate)]
    return snapshot


def stage_cut(transaction: Transaction, producer: type[ReplaceAll | RowDelta], added: DataFile) -> Snapshot:
    """Stage a cut snapshot of ``producer``'s kind adding ``added``, tagged ``bank-cut-2``."""
    with producer(transaction, None, PROPERTIES, "bank-cut-2") as snapshot:
        snapshot.append_data_file(added)
    return staged_snapshot(transaction)


def live_files(table: Table, snapshot: Snapshot) -> set[str]:
    """The data files ``snapshot`` reads, by pyiceberg's own manifest reading."""
    return {entry.data_file.file_path for manifest in snapshot.manifests(table.io)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)}


def manifest_list_named_as_pyiceberg_names_it(snapshot: Snapshot) -> bool:
    """``snap-<snapshot id>-<attempt 0>-<commit uuid>.avro`` (pyiceberg's ``_new_manifest_list_file_name``)."""
    return re.fullmatch(rf"snap-{snapshot.snapshot_id}-0-[0-9a-f-]{{36}}\.avro",
                        snapshot.manifest_list.rsplit("/", 1)[-1]) is not None


def test_a_replace_all_snapshot_is_pyiceberg_s_overwrite_of_every_file(table: Table) -> None:
    # _OverwriteFiles: _summary, delete_data_file, _added_data_files; _new_manifest_list_file_name
    added, ours, theirs = new_data_file(table, "replacing"), MemoTransaction(table), table.transaction()
    mine = stage_cut(ours, ReplaceAll, added)
    with theirs.update_snapshot(snapshot_properties=PROPERTIES).overwrite() as overwrite:
        for task in table.scan().plan_files():
            overwrite.delete_data_file(task.file)
        overwrite.append_data_file(added)
    pyiceberg_s = staged_snapshot(theirs)
    assert mine.summary == pyiceberg_s.summary and mine.summary.operation.value == "overwrite"
    assert live_files(table, mine) == live_files(table, pyiceberg_s) == {added.file_path}
    assert manifest_list_named_as_pyiceberg_names_it(mine) and manifest_list_named_as_pyiceberg_names_it(pyiceberg_s)
    refs = apply_updates(table.metadata, staged_updates(ours)).refs
    assert refs["main"].snapshot_id == refs["bank-cut-2"].snapshot_id == mine.snapshot_id


def test_a_row_delta_of_data_only_is_pyiceberg_s_append(table: Table) -> None:
    # _SnapshotProducer._summary, with the operation a row delta sets (_operation)
    added, theirs = new_data_file(table, "appended"), table.transaction()
    mine = stage_cut(MemoTransaction(table), RowDelta, added)
    with theirs.update_snapshot(snapshot_properties=PROPERTIES).fast_append() as append:
        append.append_data_file(added)
    pyiceberg_s = staged_snapshot(theirs)
    assert mine.summary == pyiceberg_s.summary and mine.summary.operation.value == "append"
    assert live_files(table, mine) == live_files(table, pyiceberg_s) == {*live_files(table, table.current_snapshot()),
                                                                          added.file_path}


def test_a_cut_snapshot_that_lost_a_race_fails_and_pyiceberg_deletes_its_files(
    catalog: SqlCatalog, table: Table
) -> None:
    # _refresh_for_retry (no rebase), _written_manifest_lists (cleaned up by pyiceberg on failure)
    transaction = table.transaction()
    manifest_list = Path(stage_cut(transaction, ReplaceAll, new_data_file(table, "late")).manifest_list
                         .removeprefix("file://"))
    assert manifest_list.exists()
    catalog.load_table("ns.t").append(ROWS)  # another writer commits first
    with pytest.raises(CommitFailedException, match=r"table ns\.t: changed by another writer since its cut was built"):
        transaction.commit_transaction()
    assert not manifest_list.exists()
    assert catalog.load_table("ns.t").metadata.refs.get("bank-cut-2") is None
