"""The rows a merge-on-read member gained and lost between two of its snapshots, from metadata.

Streambed's row deltas keep every manifest of the parent snapshot and add one manifest of new data
files and one of new position-delete files. So when every manifest of the earlier snapshot is
still listed by the later one, the manifests listed only by the later one hold exactly what the
snapshots in between added, whatever their number (even if some of them expired since): the new
data files are rows added (less the rows the new deletes remove from them), the new position
deletes that point into older data files are rows removed: read from the delete file's ``row``
column when it carries the deleted rows' values (the merges write them under ``REPLICA
IDENTITY FULL``), otherwise from those data files at those positions only. A whole
rewrite in between (a compaction, a resync, a derived member's recompute) drops the earlier
manifests or records deleted files; then :func:`snapshot_delta` says why it cannot walk, and the
caller diffs the two snapshots' contents instead.
"""

from __future__ import annotations

import logging
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask, StaticTable
from pyiceberg.table.snapshots import Snapshot

from airflow_provider_streambed.exceptions import ChangeFeedError
from airflow_provider_streambed.read.position_deletes import (
    READ_THREADS,
    positions_of,
    read_deletes,
    row_groups_of,
    row_images,
    rows_at_positions,
)
from airflow_provider_streambed.staging.iceberg_fields import DELETE_FILE_PATH, DELETE_ROW

logger = logging.getLogger(__name__)



@dataclass(frozen=True, slots=True)
class SnapshotDelta:
    """The files the later snapshot lists beyond the earlier one's.

    Attributes:
        data: data files added in between (rows added).
        deletes: position-delete files added in between (rows removed, from older or newer files).
        older_data: the earlier snapshot's data manifests (the files both snapshots list).
    """

    data: tuple[DataFile, ...]
    deletes: tuple[DataFile, ...]
    older_data: tuple[ManifestFile, ...]


def snapshot_delta(io: FileIO, earlier: Snapshot, later: Snapshot) -> SnapshotDelta | str:
    """The files added between ``earlier`` and ``later``, or why they do not say what changed."""
    before = {manifest.manifest_path: manifest for manifest in earlier.manifests(io)}
    after = later.manifests(io)
    if not set(before) <= {manifest.manifest_path for manifest in after}:
        return "a snapshot in between rewrote the member whole (a compaction, a resync or a whole write)"
    data: list[DataFile] = []
    deletes: list[DataFile] = []
    for manifest in after:
        if manifest.manifest_path in before:
            continue
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
            if entry.status != ManifestEntryStatus.ADDED:
                return "a snapshot in between removed whole files (a compaction, a resync or a whole write)"
            content = entry.data_file.content
            if content == DataFileContent.EQUALITY_DELETES:
                return f"a snapshot in between wrote equality deletes ({entry.data_file.file_path})"
            (data if content == DataFileContent.DATA else deletes).append(entry.data_file)
    older = tuple(manifest for manifest in before.values() if manifest.content == ManifestContent.DATA)
    return SnapshotDelta(tuple(data), tuple(deletes), older)


def _scan(table: StaticTable, schema: Schema) -> ArrowScan:
    """pyiceberg's reader of ``table``'s files, projecting them onto ``schema`` by field id."""
    return ArrowScan(table.metadata, table.io, schema, AlwaysTrue())


def added_rows(table: StaticTable, schema: Schema, delta: SnapshotDelta) -> pa.Table:
    """The rows of the added data files that the added deletes left, in ``schema``'s columns."""
    deletes = set(delta.deletes)
    return _scan(table, schema).to_table([FileScanTask(data_file, deletes) for data_file in delta.data])


def _extract(rows: pa.Table, like: DataFile, directory: Path) -> DataFile:
    """``rows`` (a data file's columns as stored) as a Parquet file in ``directory``, listed as a
    data file of ``like``'s partition and spec."""
    path = directory / f"{uuid.uuid4().hex}.parquet"
    pq.write_table(rows, path, compression="none", use_dictionary=False, write_statistics=False)  # read once, here
    extract = DataFile.from_args(content=DataFileContent.DATA, file_path=path.as_uri(), file_format=FileFormat.PARQUET,
                                 partition=like.partition, record_count=rows.num_rows,
                                 file_size_in_bytes=path.stat().st_size)
    extract.spec_id = like.spec_id  # not a field of the entry: pyiceberg sets it apart
    return extract


def _rows_at(io: FileIO, data_file: DataFile, positions: np.ndarray, directory: Path) -> tuple[DataFile, bool]:
    """An extract (:func:`_extract`) of ``data_file``'s rows at ``positions`` (sorted), as stored
    (its physical columns and field ids), read one row group at a time from the row groups that
    hold them only; and whether that was every row group of a file of more than one."""
    with io.new_input(data_file.file_path).open() as stream:
        parquet = pq.ParquetFile(stream)
        rows = rows_at_positions(parquet, positions)
        groups = parquet.metadata.num_row_groups
        whole = groups > 1 and len(np.unique(row_groups_of(parquet.metadata, positions)[0])) == groups
    return _extract(rows, data_file, directory), whole


def removed_rows(table: StaticTable, schema: Schema, delta: SnapshotDelta) -> pa.Table:
    """The rows the added deletes removed from older data files, in ``schema``'s columns.

    The delete files are read (in threads). The rows a delete file carries in its ``row`` column
    are taken from there (a position is deleted once: the merges delete live rows only); for the
    others, each data file's row groups that hold deleted positions are read (in threads). Both
    are kept in small local Parquet files, and pyiceberg reads these onto ``schema`` by field id
    (or name mapping), as it reads any data file of the table.
    """
    added = pa.array([data_file.file_path for data_file in delta.data], pa.string())
    read = read_deletes([delete.file_path for delete in delta.deletes], lambda path: table.io.new_input(path).open())
    older = [(delete, rows.filter(pc.invert(pc.is_in(rows[DELETE_FILE_PATH], value_set=added))))
             for delete, rows in zip(delta.deletes, read, strict=True)]
    imaged = [(delete, rows) for delete, rows in older if DELETE_ROW in rows.column_names and len(rows)]
    plain = [rows for _, rows in older if DELETE_ROW not in rows.column_names]
    wanted = {path: found.to_numpy() for path, found in positions_of(plain).items()}
    named = set(wanted) | {path for _, rows in imaged for path in pc.unique(rows[DELETE_FILE_PATH]).to_pylist()}
    listed = {
        entry.data_file.file_path: entry.data_file
        for manifest in delta.older_data
        for entry in manifest.fetch_manifest_entry(table.io)
        if entry.data_file.file_path in named
    }
    if missing := named - set(listed):
        raise ChangeFeedError(f"table {'.'.join(table.name())}: position deletes name data files that neither "
                              f"snapshot lists: {sorted(missing)[:3]}")
    files = [listed[path] for path in wanted]
    with tempfile.TemporaryDirectory(prefix="streambed-feed-") as directory, ThreadPoolExecutor(READ_THREADS) as pool:
        taken = list(pool.map(lambda data_file: _rows_at(table.io, data_file, wanted[data_file.file_path],
                                                         Path(directory)), files))
        extracts = [extract for extract, _ in taken]
        extracts += [_extract(row_images(rows), delete, Path(directory)) for delete, rows in imaged]
        rows = _scan(table, schema).to_table([FileScanTask(extract) for extract in extracts])
    logger.debug("table=%s: %d removed rows read from %d data files and %d delete files' rows", table.name(),
                 rows.num_rows, len(files), len(imaged))
    if read_whole := sum(1 for _, every in taken if every):
        logger.info("table=%s: the removed rows took every row group of %d of the %d data files they were read "
                    "from (changes spread over the table); the deletes carry the removed rows when the merge "
                    "writes them for a keyed source table with REPLICA IDENTITY FULL (docs: limitations, "
                    "the change feed)", ".".join(table.name()), read_whole, len(files))
    return rows


def rows_at(table: StaticTable, schema: Schema, planned: StaticTable, snapshot_id: int | None) -> pa.Table:
    """Every row of ``planned``'s snapshot ``snapshot_id`` (``None``: no rows), read with ``table``'s
    metadata in ``schema``'s columns."""
    tasks = [] if snapshot_id is None else list(planned.scan(snapshot_id=snapshot_id).plan_files())
    return _scan(table, schema).to_table(tasks)
