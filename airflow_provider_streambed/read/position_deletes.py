"""The rows a position delete names, read from Parquet one row group at a time.

Parquet gives no cheaper way to a row than its row group's pages, so reading the rows at some
positions of a file reads the row groups that hold them only, and takes the rows from each. The
change feed (rows removed between two snapshots) and incremental derived members (rows their
sources lost this run) read removed rows this way, unless the position-delete file carries them
in its ``row`` column (:func:`delete_rows`, :func:`row_images`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFile

from airflow_provider_streambed.staging.iceberg_fields import DELETE_FILE_PATH, DELETE_POS, DELETE_ROW

#: Threads reading the data files that lost rows, and the delete files (the feed and incremental
#: members alike).
READ_THREADS = 4


def positions_by_file(pairs: pa.Table) -> dict[str, pa.Array]:
    """Position-delete rows (``file_path``, ``pos``) as each data file's positions, sorted and distinct."""
    paths = pairs[DELETE_FILE_PATH].combine_chunks().dictionary_encode()
    files, positions = paths.indices.to_numpy(), pairs[DELETE_POS].to_numpy()
    order = np.lexsort((positions, files))  # by file, then position
    files, positions = files[order], positions[order]
    bounds = np.searchsorted(files, np.arange(len(paths.dictionary) + 1))
    found = {}
    for file, path in enumerate(paths.dictionary.to_pylist()):
        chunk = positions[bounds[file]:bounds[file + 1]]
        found[path] = pa.array(chunk[np.concatenate(([True], chunk[1:] != chunk[:-1]))], pa.int64())
    return found


def deleted_positions(io: FileIO, deletes: Iterable[DataFile]) -> dict[str, pa.Array]:
    """The positions each data file lost to ``deletes`` (Parquet position-delete files), sorted and distinct."""
    return read_positions((delete.file_path for delete in deletes), lambda path: io.new_input(path).open())


def read_positions(
    paths: Iterable[str], open_file: Callable[[str], AbstractContextManager[Any]]
) -> dict[str, pa.Array]:
    """The positions each data file lost to the position-delete files at ``paths``, each opened
    for reading by ``open_file``, sorted and distinct."""
    return positions_of(read_deletes(paths, open_file, rows=False))


def read_deletes(
    paths: Iterable[str], open_file: Callable[[str], AbstractContextManager[Any]], rows: bool = True
) -> list[pa.Table]:
    """Each position-delete file at ``paths``, opened for reading by ``open_file``, as
    :func:`delete_rows` reads it (its deleted rows' values too, unless not ``rows``), in threads."""
    def read(path: str) -> pa.Table:
        with open_file(path) as stream:
            return delete_rows(pq.ParquetFile(stream), rows)

    with ThreadPoolExecutor(READ_THREADS) as pool:
        return list(pool.map(read, paths))


def positions_of(deletes: Sequence[pa.Table]) -> dict[str, pa.Array]:
    """The positions each data file lost to the position-delete rows ``deletes``, sorted and distinct."""
    if not deletes:
        return {}
    return positions_by_file(pa.concat_tables([rows.select([DELETE_FILE_PATH, DELETE_POS]) for rows in deletes]))


def delete_rows(parquet: pq.ParquetFile, rows: bool = True) -> pa.Table:
    """A position-delete file's ``file_path`` and ``pos``, and (unless not ``rows``) its ``row``
    column (the deleted rows' values) when it has one."""
    carried = [DELETE_ROW] if rows and DELETE_ROW in parquet.schema_arrow.names else []
    return parquet.read(columns=[DELETE_FILE_PATH, DELETE_POS, *carried])


def row_images(deletes: pa.Table) -> pa.Table:
    """The deleted rows a position-delete table's ``row`` column holds, as a table of their columns
    (their Iceberg field ids kept as field metadata)."""
    values = deletes[DELETE_ROW]
    return pa.Table.from_arrays(values.flatten(), schema=pa.schema(values.type.fields))


def row_groups_of(metadata: pq.FileMetaData, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The row group holding each of ``positions`` (sorted) in a file of ``metadata``, and each
    row group's first position."""
    sizes = np.array([metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)])
    starts = np.cumsum(sizes) - sizes
    return np.searchsorted(starts, positions, side="right") - 1, starts


def rows_at_positions(parquet: pq.ParquetFile, positions: np.ndarray, columns: list[str] | None = None) -> pa.Table:
    """The rows of ``parquet`` at ``positions`` (sorted), as stored (its ``columns`` only, when
    given), from the row groups holding them."""
    group_of, starts = row_groups_of(parquet.metadata, positions)
    parts = [
        parquet.read_row_group(int(group), columns=columns).take(
            pa.array(positions[group_of == group] - starts[group], pa.int64()))
        for group in np.unique(group_of)
    ]
    empty = parquet.schema_arrow.empty_table()
    return pa.concat_tables(parts) if parts else empty if columns is None else empty.select(columns)
