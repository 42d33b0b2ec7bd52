"""Planning a pinned snapshot's files: its data and Parquet position-delete files, their sizes, its columns.

Every reader and the refresh plan take a snapshot's files from here (pyiceberg's scan
planning), so all of them refuse the same delete files streambed does not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyiceberg.manifest import DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from airflow_provider_streambed.exceptions import PublishError
from airflow_provider_streambed.staging import SnapshotFiles
from airflow_provider_streambed.staging.file_columns import FileColumns


@dataclass(frozen=True, slots=True)
class PlannedSnapshot:
    """A snapshot's files as pyiceberg plans them, with each file's size in bytes."""

    files: SnapshotFiles
    sizes: Mapping[str, int]


def plan_snapshot(table: Table, snapshot_id: int | None) -> PlannedSnapshot:
    """The data files of ``table`` at ``snapshot_id``, its position-delete files (``None``: empty), and sizes.

    Raises:
        PublishError: the snapshot has delete files streambed does not write (equality deletes,
            deletion vectors or another format); such a snapshot cannot be the base of a refresh.
    """
    if snapshot_id is None:
        return PlannedSnapshot(SnapshotFiles(), {})
    data: list[str] = []
    deletes: list[str] = []
    sizes: dict[str, int] = {}
    for task in table.scan(snapshot_id=snapshot_id).plan_files():
        data.append(task.file.file_path)
        sizes[task.file.file_path] = task.file.file_size_in_bytes
        for delete in task.delete_files:
            if delete.content != DataFileContent.POSITION_DELETES or delete.file_format != FileFormat.PARQUET:
                raise PublishError(
                    f"table {'.'.join(table.name())!r}, snapshot {snapshot_id}: has {delete.content.name.lower()} "
                    f"file {delete.file_path} ({delete.file_format}); streambed reads Parquet position deletes "
                    "only (rewrite the table to compact them)"
                )
            if delete.file_path not in sizes:
                deletes.append(delete.file_path)
                sizes[delete.file_path] = delete.file_size_in_bytes
    return PlannedSnapshot(SnapshotFiles(tuple(data), tuple(deletes)), sizes)


def plan_snapshot_files(table: Table, snapshot_id: int | None) -> SnapshotFiles:
    """The data and position-delete files of ``table`` at ``snapshot_id`` (see :func:`plan_snapshot`)."""
    return plan_snapshot(table, snapshot_id).files


def column_names(table: Table, schema: Schema) -> dict[str, tuple[str, ...]]:
    """Each column of ``schema`` (one of ``table``'s), by name: every name the table's files may
    hold it under, per its name mapping (a renamed column keeps its older names), its own first."""
    mapped = {field.field_id: tuple(field.names) for field in table.metadata.name_mapping() or ()}
    return {field.name: tuple(dict.fromkeys((field.name, *mapped.get(field.field_id, ())))) for field in schema.fields}


def snapshot_columns(table: Table, snapshot_id: int) -> FileColumns:
    """The columns of ``table``'s snapshot, as its files are read (:class:`~.staging.file_columns.FileColumns`)."""
    snapshot = table.snapshot_by_id(snapshot_id)
    schema_id = None if snapshot is None else snapshot.schema_id
    schema = table.schemas().get(schema_id, table.schema()) if schema_id is not None else table.schema()
    aliases = {name: names[1:] for name, names in column_names(table, schema).items() if len(names) > 1}
    return FileColumns(schema.as_arrow(), aliases)
