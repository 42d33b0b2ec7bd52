"""Building each member table's next metadata file for a cut, without moving its catalog pointer.

On a pyiceberg ``Transaction`` of the member's table this stages the updates of one cut: schema
evolution if the staged files gained columns, the default name mapping (Spark writes Parquet
without field ids), one snapshot that replaces every previous file with the staged ones or (a
merge-on-read mirror) adds the staged data and position-delete files to the previous ones, and the
tag ``<group>-cut-<k>``; then the removal of the tags and snapshots of cuts that expire in the same
commit. The resulting metadata file is written; the pointer is moved later, by the group commit.
"""

from __future__ import annotations

import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import parquet_file_to_data_file
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.serializers import ToOutputFile
from pyiceberg.table import TableProperties, Transaction
from pyiceberg.table.update.snapshot import ManageSnapshots
from pyiceberg.typedef import Record

from airflow_provider_streambed import storage
from airflow_provider_streambed.exceptions import PublishError
from airflow_provider_streambed.publish.expiry import ExpiryPlan, stage_retention
from airflow_provider_streambed.publish.iceberg.snapshot import ReplaceAll, RowDelta
from airflow_provider_streambed.publish.iceberg.transaction import (
    MemoTransaction,
    apply_updates,
    staged_updates,
    transaction_table,
)
from airflow_provider_streambed.publish.members import BuiltMember, MemberFiles, MemberPlan
from airflow_provider_streambed.publish.schema import evolve_schema


def position_delete_file(io: FileIO, uri: str) -> DataFile:
    """The manifest entry's file of a Parquet position-delete file (unpartitioned tables)."""
    input_file = io.new_input(uri)
    with input_file.open() as stream:
        rows = pq.read_metadata(stream).num_rows
    return DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=uri,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=rows,
        file_size_in_bytes=len(input_file),
        spec_id=0,
    )


def stage_cut_updates(
    transaction: Transaction, files: MemberFiles, snapshot_properties: dict[str, str], tag: str, commit_uuid: object
) -> int:
    """Stage the cut on ``transaction``: schema, name mapping, the snapshot (whole or row delta), tag.

    Returns:
        The new snapshot's id.
    """
    table = transaction_table(transaction)
    if files.data:
        filesystem, path = storage.filesystem(files.data[0], table.io.properties)
        with filesystem.open_input_file(path) as stream:
            arrow_schema = pq.read_schema(stream)
        evolve_schema(transaction, arrow_schema, retype=files.retype, renamed=files.renamed)
    if transaction.table_metadata.name_mapping() is None:
        mapping = transaction.table_metadata.schema().name_mapping.model_dump_json()
        transaction.set_properties({TableProperties.DEFAULT_NAME_MAPPING: mapping})
    metadata = transaction.table_metadata
    if files.deletes and metadata.spec().fields:
        raise PublishError(f"table {'.'.join(table.name())}: position deletes on a partitioned table")
    added = [parquet_file_to_data_file(table.io, metadata, file) for file in files.data]
    added += [position_delete_file(table.io, file) for file in files.deletes]
    producer = RowDelta if files.incremental else ReplaceAll
    with producer(transaction, commit_uuid, snapshot_properties, tag) as snapshot:  # type: ignore[arg-type]  # a UUID
        for data_file in added:
            snapshot.append_data_file(data_file)
    return snapshot.snapshot_id


def _write_metadata(plan: MemberPlan, transaction: Transaction, expiry: ExpiryPlan | None) -> None:
    """Stage the table's part of ``expiry`` (after the cut's own updates, whose tag then protects
    its snapshot) and write the new metadata file at ``plan.new_location`` (the metadata log
    trimmed to the table's ``write.metadata.previous-versions-max``)."""
    if expiry is not None:
        stage_retention(transaction, plan.table_name, expiry)
    metadata = apply_updates(plan.table.metadata, staged_updates(transaction), plan.base_location)
    ToOutputFile.table_metadata(metadata, plan.table.io.new_output(plan.new_location))


def build_carried(plan: MemberPlan, snapshot_id: int, tag: str, expiry: ExpiryPlan | None = None) -> BuiltMember:
    """Carry a member's snapshot into the cut: a metadata file that only adds the cut's tag to it
    (and removes what ``expiry`` names)."""
    transaction = MemoTransaction(plan.table)
    with ManageSnapshots(transaction) as manage:
        manage.create_tag(snapshot_id, tag)
    _write_metadata(plan, transaction, expiry)
    return BuiltMember(plan, snapshot_id, plan.new_location)


def build_member(
    plan: MemberPlan, files: MemberFiles, snapshot_properties: dict[str, str], tag: str, commit_uuid: object,
    expiry: ExpiryPlan | None = None,
) -> BuiltMember:
    """Stage the cut's updates for one member (and the removals ``expiry`` names) and write its new
    metadata file (no pointer move)."""
    transaction = MemoTransaction(plan.table)
    snapshot_id = stage_cut_updates(transaction, files, snapshot_properties, tag, commit_uuid)
    _write_metadata(plan, transaction, expiry)
    return BuiltMember(plan, snapshot_id, plan.new_location)


def build_expiry(plan: MemberPlan, expiry: ExpiryPlan) -> None:
    """Write ``plan.new_location``: the table's metadata without the expired tags and snapshots."""
    _write_metadata(plan, MemoTransaction(plan.table), expiry)
