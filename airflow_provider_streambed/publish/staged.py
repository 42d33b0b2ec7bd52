"""A member's staged output: checked before publish moves anything, then moved into its table.

Staged files move into the table's ``data/<run dir>/`` (:func:`run_data_dir`); an attempt of the
same run retried after a move finds them there (:func:`moved_path`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import fs

from airflow_provider_streambed import storage
from airflow_provider_streambed.exceptions import DamagedOutputError, StaleOutputError
from airflow_provider_streambed.ledger.schema import now
from airflow_provider_streambed.publish.iceberg.transaction import MemoTransaction
from airflow_provider_streambed.publish.members import MemberFiles, MemberPlan
from airflow_provider_streambed.publish.schema import evolve_schema
from airflow_provider_streambed.staging import DELETE_FILE_PATH, MemberManifest, publishing_marker_uri, write_json
from airflow_provider_streambed.staging.paths import run_dir_name


def run_data_dir(table_location: str, run_key: str) -> str:
    """Where a run's staged files live once published into a table: ``<table>/data/<run dir name>``
    (:func:`~airflow_provider_streambed.staging.paths.run_dir_name`)."""
    return f"{table_location.rstrip('/')}/data/{run_dir_name(run_key)}"


def check_staged_output(plan: MemberPlan, manifest: MemberManifest, run_key: str) -> None:
    """Check a member's staged output before publish moves anything: every file is whole (its
    staged size) or already in the table (moved by an earlier attempt), and the output's schema
    fits the table's (a dry run of the schema update).

    Raises:
        DamagedOutputError: a staged file is truncated, or missing and not moved either.
        OutputSchemaError: the output changes a column's type beyond a widening.
        StaleOutputError: an incremental output applies to another snapshot than the table's current one.
    """
    current = plan.table.metadata.current_snapshot_id
    if manifest.incremental and manifest.base_snapshot_id is not None and manifest.base_snapshot_id != current:
        raise StaleOutputError(
            f"member {plan.member!r}: its output changes snapshot {manifest.base_snapshot_id} of table "
            f"{plan.table_name}, which is at snapshot {current}: it was computed on another cut", plan.member,
        )
    properties = plan.table.io.properties

    def where(source: str) -> tuple[fs.FileSystem, fs.FileInfo, bool]:
        """The file as staged, else where an earlier attempt moved it (and whether it moved)."""
        filesystem, path = storage.filesystem(source, properties)
        info = filesystem.get_file_info(path)
        if info.type != fs.FileType.NotFound:
            return filesystem, info, False
        filesystem, moved = storage.filesystem(moved_path(plan.table.metadata.location, run_key, source), properties)
        return filesystem, filesystem.get_file_info(moved), True

    for source in (*manifest.files, *manifest.delete_files):
        _, info, moved = where(source)
        if info.type == fs.FileType.NotFound:
            raise DamagedOutputError(f"member {plan.member!r}: staged file {source} is missing (and was not "
                                     "moved into the table either)", plan.member)
        if not moved and (staged := manifest.sizes.get(source)) is not None and info.size != staged:
            raise DamagedOutputError(f"member {plan.member!r}: staged file {source} has {info.size} bytes, not the "
                                     f"{staged} staged (truncated?)", plan.member)
    if plan.base_location is not None and manifest.files:
        filesystem, info, _ = where(manifest.files[0])
        with filesystem.open_input_file(info.path) as stream:
            arrow_schema = pq.read_schema(stream)
        evolve_schema(MemoTransaction(plan.table), arrow_schema, retype=bool(manifest.resynced),  # a dry run
                      renamed=manifest.renamed)


def moved_path(table_location: str, run_key: str, source: str) -> str:
    """Where publish moves the staged file ``source``: the table's ``data/<run key>/``."""
    return f"{run_data_dir(table_location, run_key)}/{source.rsplit('/', 1)[-1]}"


def move_staged_files(plan: MemberPlan, manifest: MemberManifest, run_key: str) -> MemberFiles:
    """Move a member's staged files into its table's ``data/<run key>/``; returns the new URIs.

    Position deletes of a whole output name its own data files (an adopted bootstrap copy): they
    are rewritten with the files' new paths (Iceberg's ``rewrite_table_path`` does the same),
    the others name files of the previous snapshot, which do not move. Idempotent: a file already
    moved by an earlier attempt of the same run is found in place. Check the output first
    (:func:`check_staged_output`).

    Raises:
        DamagedOutputError: a staged file vanished since it was checked.
    """
    properties = plan.table.io.properties

    def move(source: str, write: Callable[[str, str], None] | None = None) -> str:
        target = moved_path(plan.table.metadata.location, run_key, source)
        source_fs, source_path = storage.filesystem(source, properties)
        target_fs, target_path = storage.filesystem(target, properties)
        if source_fs.get_file_info(source_path).type != fs.FileType.NotFound:
            if storage.is_local(target):  # object stores have no directories to make
                target_fs.create_dir(target_path.rsplit("/", 1)[0], recursive=True)
            if write is not None:
                write(source, target)
            try:
                if write is None:
                    storage.transfer(source, target, properties)
                else:
                    source_fs.delete_file(source_path)
            except OSError:  # fine if a concurrent publisher of the run moved it first; else the store failed
                if source_fs.get_file_info(source_path).type != fs.FileType.NotFound:
                    raise
        if target_fs.get_file_info(target_path).type == fs.FileType.NotFound:
            raise DamagedOutputError(f"member {plan.member!r}: staged file {source} is missing (and was not moved "
                                     "into the table either)", plan.member)
        return target

    data = tuple(move(file) for file in manifest.files)
    if manifest.incremental or not manifest.delete_files:
        deletes = tuple(move(file) for file in manifest.delete_files)
    else:
        moved = dict(zip(manifest.files, data, strict=True))
        deletes = tuple(move(file, lambda source, target: relocate_deletes(source, target, moved, properties))
                        for file in manifest.delete_files)
    return MemberFiles(data, deletes, manifest.incremental, bool(manifest.resynced), manifest.renamed)


def relocate_deletes(
    source: str, target: str, moved: dict[str, str], properties: Mapping[str, str] | None = None
) -> None:
    """Write the position-delete file ``source`` to ``target`` with each ``file_path`` in ``moved``
    replaced by its new path (field ids kept); written under a temporary name, then renamed (on an
    object store, where an upload appears whole, written in place). ``properties`` configure object stores."""
    filesystem, source_path = storage.filesystem(source, properties)
    with filesystem.open_input_file(source_path) as stream:
        table = pq.read_table(stream)
    paths = table.column(DELETE_FILE_PATH)
    found = pc.index_in(paths, value_set=pa.array(list(moved), pa.string()))
    relocated = pc.coalesce(pa.array(list(moved.values()), pa.string()).take(found), paths)
    table = table.set_column(table.schema.get_field_index(DELETE_FILE_PATH),
                             table.schema.field(DELETE_FILE_PATH), relocated)
    target_fs, target_path = storage.filesystem(target, properties)
    if not storage.is_local(target):
        with target_fs.open_output_stream(target_path) as stream:
            pq.write_table(table, stream)
        return
    partial = f"{target_path}.{uuid.uuid4().hex}.partial"  # concurrent publishers of a run each write their own
    with target_fs.open_output_stream(partial) as stream:
        pq.write_table(table, stream)
    target_fs.move(partial, target_path)


def check_then_mark(
    plans: Mapping[str, MemberPlan], manifests: Mapping[str, MemberManifest], run_key: str, root: str
) -> None:
    """Check every member's staged output, then record, before the first staged file moves into
    a table, that this run's publish began.

    Raises:
        StagedOutputError: see :func:`check_staged_output`.
    """
    for name, manifest in manifests.items():
        check_staged_output(plans[name], manifest, run_key)
    write_json(publishing_marker_uri(root), {"run_key": run_key, "started_at": now().isoformat()})
