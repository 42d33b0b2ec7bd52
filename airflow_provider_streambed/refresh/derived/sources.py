"""A derived member's sources at W, and the rows they changed this run, read in this process.

Inside the Spark job a source's changes of this run are the facts the change feed reads from
published snapshots (:mod:`airflow_provider_streambed.read.feed.snapshots`), taken from the source's
staged output instead: an incremental output's new data files are the rows added (less the rows
its own deletes remove), its position deletes name the rows removed from the previous snapshot's
files, taken from the deletes' ``row`` column when they carry the rows (a mirror under ``REPLICA
IDENTITY FULL``), otherwise read from the row groups that hold them
(:mod:`airflow_provider_streambed.read.position_deletes`, as the feed reads them), never a whole source.
A carried source changed nothing. A source written whole this run (its first cut, a compaction, a
resync) or whose columns changed gives no such facts (:func:`whole_reason`). Imports no pyspark.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_provider_streambed import storage
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import FinalRefreshError, RefreshError
from airflow_provider_streambed.member_declarations import Member
from airflow_provider_streambed.read.position_deletes import (
    READ_THREADS,
    positions_of,
    read_deletes,
    row_images,
    rows_at_positions,
)
from airflow_provider_streambed.refresh.plan.settings import Settings, switched_on
from airflow_provider_streambed.refresh.plan.work import fit_manifest
from airflow_provider_streambed.staging import (
    DELETE_FILE_PATH,
    DELETE_ROW,
    JobSpec,
    MemberManifest,
    SnapshotFiles,
    TableCapture,
)
from airflow_provider_streambed.staging.file_columns import FileColumns
from airflow_provider_streambed.staging.file_names import file_names
from airflow_provider_streambed.staging.member_manifest import CARRIED

logger = logging.getLogger(__name__)

#: Spark configuration: ``false`` computes every incremental member whole (a full refresh of them).
INCREMENTAL_CONF = "spark.streambed.incrementalMembers"


@dataclass(frozen=True, slots=True)
class SourceState:
    """What the job knows of one source of a derived member at W.

    Attributes:
        previous: the files of its snapshot in the previous cut.
        staged: its output staged for W (``None``: carried over, unchanged).
        columns: its columns at W when its files may hold older schemas (a mirror).
        reshaped: its columns changed this run (a mirror whose source table's columns changed).
        key: its declared key: a mirror's primary key or replica identity (empty: none, a keyless
            or append-only mirror, a derived member).
    """

    previous: SnapshotFiles
    staged: MemberManifest | None
    columns: FileColumns | None = None
    reshaped: bool = False
    key: tuple[str, ...] = ()

    @property
    def files(self) -> SnapshotFiles:
        """The source's files at W."""
        return self.previous if self.staged is None else self.previous.then(self.staged)


def staged_inputs(sources: Mapping[str, SourceState]) -> dict[str, str]:
    """What a derived member computed from ``sources`` records of them
    (:attr:`~airflow_provider_streambed.staging.member_manifest.MemberManifest.inputs`): each staged
    source's output by when it was written, or that it was carried over."""
    return {name: CARRIED if source.staged is None else source.staged.written_at for name, source in sources.items()}


def whole_reason(name: str, source: SourceState) -> str | None:
    """Why source ``name`` gives no changes for this run, or ``None`` when it does."""
    if source.reshaped:
        return f"its source {name!r} changed its columns"
    if not source.previous.data:
        return f"its source {name!r} has no files in the previous cut"
    if source.staged is not None and not source.staged.incremental:
        return f"its source {name!r} was written whole ({source.staged.reason or 'a whole write'})"
    return None


def removed_rows(previous: SnapshotFiles, delete_files: tuple[str, ...], columns: FileColumns | None,
                 names: list[str] | None = None) -> pa.Table | None:
    """The rows of ``previous``'s data files that ``delete_files`` name, read in this process from
    the row groups that hold them (as ``columns`` when given; only the columns ``names``, when
    given), never a whole table (from the delete files alone when they carry the rows); ``None``
    when there are none."""
    if not delete_files:
        return None
    return _removed(previous.data, read_deletes(delete_files, storage.open_input), columns, names)


def live_rows(snapshot: SnapshotFiles, columns: FileColumns | None = None,
              names: list[str] | None = None) -> pa.Table | None:
    """The rows of ``snapshot``'s data files that its delete files leave, read whole in this
    process (as ``columns`` when given; only the columns ``names``, when given); ``None`` when it
    has no data files."""
    return _live(snapshot.data, _positions(read_deletes(snapshot.deletes, storage.open_input, rows=False)), columns,
                 names)


def changed_rows(source: SourceState, names: list[str] | None = None) -> tuple[pa.Table | None, pa.Table | None]:
    """The rows a source that gives changes (:func:`whole_reason`) removed and added this run, as
    :func:`.incremental.source_changes` has them, both read in this process (its delete files
    once), with its columns ``names`` (default all); ``None`` for a side without files."""
    staged = source.staged
    assert staged is not None
    deletes = read_deletes(staged.delete_files, storage.open_input)
    return (_removed(source.previous.data, deletes, source.columns, names),
            _live(staged.files, _positions(deletes), source.columns, names))


def _removed(data: tuple[str, ...], deletes: list[pa.Table], columns: FileColumns | None,
             names: list[str] | None) -> pa.Table | None:
    """The rows of the data files ``data`` that the position-delete rows ``deletes`` name: the
    rows they carry when every delete file does (:func:`_images`), else read from the row groups
    that hold them."""
    if deletes and all(DELETE_ROW in rows.column_names for rows in deletes):
        return _images(data, deletes, columns, names)
    deleted = _positions(deletes)

    def at_positions(name: str, parquet: pq.ParquetFile, stored: list[str] | None) -> pa.Table:
        return rows_at_positions(parquet, deleted[name].to_numpy(), stored)

    named = [(uri, functools.partial(at_positions, name)) for name, uri in file_names(data).items()
             if name in deleted]
    return _read_files(named, columns, names)


def _images(data: tuple[str, ...], deletes: list[pa.Table], columns: FileColumns | None,
            names: list[str] | None) -> pa.Table:
    """The deleted rows the position-delete rows ``deletes`` carry (their ``row`` column), as
    ``columns`` when given, only the columns ``names`` when given.

    Raises:
        FinalRefreshError: a row names a file that ``data`` (the previous snapshot's) does not
            list; a retry reads the same staged deletes.
    """
    named = {path.rsplit("/", 1)[-1] for rows in deletes for path in pc.unique(rows[DELETE_FILE_PATH]).to_pylist()}
    if stray := named - set(file_names(data)):
        raise FinalRefreshError(f"position deletes carry rows of data files the previous snapshot does not list: "
                                f"{sorted(stray)[:3]}; resync the source member (streambed resync)")
    rows = pa.concat_tables([row_images(part) for part in deletes])  # a position is deleted once: no duplicates
    logger.debug("%d removed rows taken from %d delete files' rows", rows.num_rows, len(deletes))
    rows = rows if columns is None else columns.conform(rows)
    return rows if names is None else rows.select(names)


def _live(data: tuple[str, ...], deleted: Mapping[str, pa.Array], columns: FileColumns | None,
          names: list[str] | None) -> pa.Table | None:
    """The rows of the data files ``data`` but those at the positions ``deleted`` names (by file name)."""
    def kept(name: str, parquet: pq.ParquetFile, stored: list[str] | None) -> pa.Table:
        rows = parquet.read(columns=stored)
        if name not in deleted:
            return rows
        return rows.filter(~np.isin(np.arange(rows.num_rows), deleted[name].to_numpy()))

    named = [(uri, functools.partial(kept, name)) for name, uri in file_names(data).items()]
    return _read_files(named, columns, names)


def _positions(deletes: list[pa.Table]) -> dict[str, pa.Array]:
    """The positions the position-delete rows ``deletes`` name, by data file name (sorted, distinct)."""
    return {path.rsplit("/", 1)[-1]: found for path, found in positions_of(deletes).items()}


#: Reads the rows it takes from a Parquet file, given the stored columns to read (``None``: all).
RowsOf = Callable[[pq.ParquetFile, list[str] | None], pa.Table]


def _read_files(files: Sequence[tuple[str, RowsOf]], columns: FileColumns | None,
                names: list[str] | None) -> pa.Table | None:
    """The rows each file's reader takes from it (given its stored columns of ``names``, default
    all), in threads, as ``columns`` when given and only the columns ``names``; ``None`` when no
    file is given."""
    def read(uri: str, rows_of: RowsOf) -> pa.Table:
        with storage.open_input(uri) as stream:
            parquet = pq.ParquetFile(stream)
            stored = None if names is None else names if columns is None else [
                held for column in names for held in columns.held(column, parquet.schema_arrow.names)]
            rows = rows_of(parquet, stored)
        rows = rows if columns is None else columns.conform(rows)
        return rows if names is None else rows.select(names)

    with ThreadPoolExecutor(READ_THREADS) as pool:
        parts = list(pool.map(lambda file: read(*file), files))
    return pa.concat_tables(parts) if parts else None


def basis_reason(settings: Settings, spec: JobSpec, member: str, sources: Mapping[str, SourceState]) -> str | None:
    """Why member ``member`` must be computed whole this run (its output in the previous cut and
    its sources' changes are no basis for it), or ``None`` when they are."""
    if not switched_on(settings, INCREMENTAL_CONF):
        return f"{INCREMENTAL_CONF} is false (a full refresh)"
    if member not in spec.incremental:
        return "no previous output of its definition (its first cut, or its definition changed)"
    if not spec.previous_snapshot(member).data:
        return "its snapshot in the previous cut has no files"
    return next((reason for name, source in sources.items() if (reason := whole_reason(name, source))), None)


def source_state(
    spec: JobSpec, group: RefreshGroup, member: Member, source: str, staged: dict[str, MemberManifest],
    captures: dict[str, TableCapture],
) -> SourceState:
    """What ``source`` is at W: its previous snapshot, and its staged output unless carried; a
    mirror's columns at W and whether they changed."""
    canonical = group.member(source).name
    previous = spec.previous_snapshot(canonical)
    capture = captures.get(canonical.lower())
    columns = None if capture is None else FileColumns.of(capture)
    reshaped = capture is not None and capture.reshaped
    key = spec.previous_key_columns.get(canonical, ()) if capture is None else capture.key_columns
    if canonical in spec.carried:
        if not previous.data:
            raise RefreshError(f"source {canonical!r} of member {member.name!r} is carried over but the spec "
                               "names no files of its previous snapshot")
        return SourceState(previous, None, columns, reshaped, key)
    manifest = staged.get(canonical) or fit_manifest(spec, group, group.member(canonical))
    if manifest is None:
        raise RefreshError(f"source {canonical!r} of member {member.name!r} has no reusable output staged for W (none "
                           "yet, or its declaration or one of its own sources changed since); stage it first")
    return SourceState(previous, manifest, columns, reshaped, key)
