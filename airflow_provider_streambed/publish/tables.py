"""Building each member table's next snapshot without moving its catalog pointer.

For every member this module loads the current table (all pointer rows in one query, metadata
files read in parallel on remote storage), or stages a new table on first use, then stages on a
pyiceberg ``Transaction`` the updates of one cut: schema evolution if the staged files gained columns,
the default name mapping (Spark writes Parquet without field ids), one snapshot that replaces
every previous file with the staged ones or (a merge-on-read mirror) adds the staged data and
position-delete files to the previous ones, and the tag ``<group>-cut-<k>``; then the removal
of the tags and snapshots of cuts that expire in the same commit. The resulting metadata file
is written; the pointer is moved later, by the group commit.

It relies on pyiceberg 0.12 ``SqlCatalog`` internals (``IcebergTables``, ``_create_staged_table``,
``_parse_metadata_version``, ``Transaction._updates``, and those named in :func:`apply_updates`);
``pyproject.toml`` bounds pyiceberg below 0.13.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import fs
from pyiceberg.catalog import Catalog, MetastoreCatalog
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.exceptions import ResolveError, ValidationError
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.io.pyarrow import parquet_file_to_data_file
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.serializers import FromInputFile, ToOutputFile
from pyiceberg.table import StagedTable, Table, TableProperties, Transaction
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.update.snapshot import ManageSnapshots
from pyiceberg.typedef import Record
from sqlalchemy import select

from airflow_provider_streambed import storage
from airflow_provider_streambed.catalog import warehouse_of
from airflow_provider_streambed.exceptions import (
    DamagedOutputError,
    OutputSchemaError,
    PublishError,
    StaleOutputError,
)
from airflow_provider_streambed.publish.expiry import ExpiryPlan, stage_retention
from airflow_provider_streambed.publish.iceberg.snapshot import ReplaceAll, RowDelta
from airflow_provider_streambed.publish.iceberg.transaction import MemoTransaction, apply_updates
from airflow_provider_streambed.publish.members import BuiltMember, MemberFiles, MemberPlan
from airflow_provider_streambed.staging import DELETE_FILE_PATH, MemberManifest
from airflow_provider_streambed.staging.members import parquet_type
from airflow_provider_streambed.staging.paths import run_dir_name

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

#: Threads for per-member file I/O (metadata reads, Parquet footers, Avro and JSON writes) on
#: remote storage. On a local disk that work is CPU-bound Python: threads only contend for the GIL.
IO_THREADS = 16


def run_data_dir(table_location: str, run_key: str) -> str:
    """Where a run's staged files live once published into a table: ``<table>/data/<run dir name>``
    (:func:`~airflow_provider_streambed.staging.paths.run_dir_name`)."""
    return f"{table_location.rstrip('/')}/data/{run_dir_name(run_key)}"


def parallel(function: Callable[[T], R], items: Iterable[T], location: str) -> list[R]:
    """``map`` over ``items``, whose files live under ``location``, re-raising the first error.

    In a thread pool when ``location`` is remote storage (file I/O bound), one by one on a local disk.
    """
    listed = list(items)
    if len(listed) <= 1 or urlparse(location).scheme in ("", "file"):
        return [function(item) for item in listed]
    with ThreadPoolExecutor(max_workers=min(IO_THREADS, len(listed))) as pool:
        return list(pool.map(function, listed))


def current_pointers(catalog: SqlCatalog, namespace: str, names: Iterable[str]) -> dict[str, str]:
    """The current metadata location of each existing table ``namespace.<name>``, in one query."""
    rows = IcebergTables.__table__
    query = select(rows.c.table_name, rows.c.metadata_location).where(
        rows.c.catalog_name == catalog.name,
        rows.c.table_namespace == namespace,
        rows.c.table_name.in_(list(names)),
    )
    with catalog.engine.connect() as connection:
        return {row.table_name: row.metadata_location for row in connection.execute(query)}


def plan_members(
    catalog: Catalog,
    namespace: str,
    members: Iterable[str],
    manifests: Mapping[str, MemberManifest],
    pointers: Mapping[str, str],
    run_key: str = "",
) -> dict[str, MemberPlan]:
    """Load (or stage, on first use) every member's table; ``pointers`` from :func:`current_pointers`.

    A table that does not exist yet takes its schema from the member's staged output (``manifests``
    of the run ``run_key``), wherever it is: in staging, or moved by an earlier attempt.
    """
    names = list(members)
    if any(name not in pointers for name in names):
        catalog.create_namespace_if_not_exists(namespace)

    def plan(member: str) -> MemberPlan:
        identifier = (namespace, member)
        location = pointers.get(member)
        if location is None:
            if member not in manifests:
                raise PublishError(f"member {member!r}: table {namespace}.{member} does not exist, nothing staged")
            staged = _stage_new_table(catalog, identifier, manifests[member], run_key)
            return MemberPlan(member, identifier, staged, None, staged.metadata_location)
        metadata = FromInputFile.table_metadata(load_file_io(catalog.properties, location).new_input(location))
        io = load_file_io({**catalog.properties, **metadata.properties}, location)
        table = Table(identifier=identifier, metadata=metadata, metadata_location=location, io=io, catalog=catalog)
        version = MetastoreCatalog._parse_metadata_version(location) + 1
        new_location = load_location_provider(metadata.location, metadata.properties).new_table_metadata_file_location(
            version
        )
        return MemberPlan(member, identifier, table, location, new_location)

    return dict(zip(names, parallel(plan, names, warehouse_of(catalog)), strict=True))


def _stage_new_table(
    catalog: Catalog, identifier: tuple[str, str], manifest: MemberManifest, run_key: str
) -> StagedTable:
    """A new table whose schema comes from the staged Parquet footer (the name mapping follows).

    Raises:
        DamagedOutputError: the file is not readable Parquet (truncated).
    """
    if not isinstance(catalog, MetastoreCatalog):
        raise PublishError(f"catalog {catalog.name!r} cannot stage table {'.'.join(identifier)}")
    def moved(source: str) -> str:  # where an earlier attempt moved it: the new table's location
        return moved_path(catalog._resolve_table_location(None, *identifier), run_key, source)

    arrow_schema = new_table_schema(manifest, ".".join(identifier), moved)
    return catalog._create_staged_table(identifier, Catalog._convert_schema_if_needed(arrow_schema))


def new_table_schema(
    manifest: MemberManifest, table_name: str, moved: Callable[[str], str] | None = None,
    properties: Mapping[str, str] | None = None,
) -> pa.Schema:
    """The schema of a member's first staged file, for its table created on first use: where it
    was staged, else (``moved``) where an earlier attempt moved it. ``properties`` configure an
    object store.

    Raises:
        PublishError: the output has no Parquet file.
        DamagedOutputError: the file is not readable Parquet (truncated).
    """
    if not manifest.files:
        raise PublishError(f"member {manifest.member!r}: table {table_name} does not exist yet and the staged "
                           "output has no Parquet file to take its schema from")
    source = manifest.files[0]
    filesystem, path = storage.filesystem(source, properties)
    if moved is not None and filesystem.get_file_info(path).type == fs.FileType.NotFound:
        filesystem, path = storage.filesystem(moved(source), properties)
    try:
        with filesystem.open_input_file(path) as stream:
            return pq.read_schema(stream)
    except (pa.ArrowInvalid, OSError) as error:
        raise DamagedOutputError(f"member {manifest.member!r}: staged file {source} is not readable Parquet "
                                 f"({error})", manifest.member) from error


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
        evolve_schema(MemoTransaction(plan.table), arrow_schema)  # the transaction is dropped: a dry run


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
            if storage.scheme_of(target) in storage.LOCAL_SCHEMES:  # object stores have no directories to make
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
    return MemberFiles(data, deletes, manifest.incremental)


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
    if storage.scheme_of(target) not in storage.LOCAL_SCHEMES:
        with target_fs.open_output_stream(target_path) as stream:
            pq.write_table(table, stream)
        return
    partial = f"{target_path}.{uuid.uuid4().hex}.partial"  # concurrent publishers of a run each write their own
    with target_fs.open_output_stream(partial) as stream:
        pq.write_table(table, stream)
    target_fs.move(partial, target_path)


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
    table = transaction._table
    if files.data:
        filesystem, path = storage.filesystem(files.data[0], table.io.properties)
        with filesystem.open_input_file(path) as stream:
            arrow_schema = pq.read_schema(stream)
        evolve_schema(transaction, arrow_schema)
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


def same_schema(schema: Schema, arrow_schema: pa.Schema) -> bool:
    """Whether a staged output's Arrow schema is the table's schema (no update needed): the same
    columns in order, of the same types and nullability. pyiceberg gives large strings and
    binaries where Parquet files hold plain ones; Iceberg does not tell them apart. A nested
    type compares as is (a mismatch only costs the schema update's dry run)."""

    def shape(of: pa.Schema) -> list[tuple[str, pa.DataType, bool]]:
        return [(field.name, parquet_type(field.type), field.nullable) for field in of]

    return shape(schema.as_arrow()) == shape(arrow_schema)


def evolve_schema(transaction: Transaction, arrow_schema: pa.Schema) -> None:
    """Widen the table's schema to a staged output's: new columns, promoted types (int to long).
    Stages nothing when the output's schema is the table's (the common case: a schema update
    costs milliseconds per member, a comparison microseconds).

    Raises:
        OutputSchemaError: the output changes a column's type in a way Iceberg does not allow;
            names the member (the table's name), the columns and both types.
    """
    if same_schema(transaction.table_metadata.schema(), arrow_schema):
        return
    try:
        with transaction.update_schema() as update:
            update.union_by_name(arrow_schema)
    except (ResolveError, ValidationError, ValueError) as error:
        current = transaction.table_metadata.schema().as_arrow()
        changed = [
            f"{field.name} {current.field(field.name).type} -> {field.type}" for field in arrow_schema
            if field.name in current.names and parquet_type(current.field(field.name).type) != parquet_type(field.type)
        ]
        identifier = transaction._table.name()
        raise OutputSchemaError(
            f"member {identifier[-1]!r}: its output does not fit table {'.'.join(identifier)}: "
            f"{', '.join(changed) or error} (Iceberg only widens a column: int to long, float to double, a "
            "longer decimal); fix the member, or drop its table to start it anew", identifier[-1],
        ) from error


def _write_metadata(plan: MemberPlan, transaction: Transaction, expiry: ExpiryPlan | None) -> None:
    """Stage the table's part of ``expiry`` (after the cut's own updates, whose tag then protects
    its snapshot) and write the new metadata file at ``plan.new_location`` (the metadata log
    trimmed to the table's ``write.metadata.previous-versions-max``)."""
    if expiry is not None:
        stage_retention(transaction, plan.table_name, expiry)
    metadata = apply_updates(plan.table.metadata, transaction._updates, plan.base_location)
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
