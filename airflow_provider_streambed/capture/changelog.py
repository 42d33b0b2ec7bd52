"""Streaming writer of changelog segments: one series of Parquet files per mirrored table.

Rows are buffered per table and written as one row group every ``batch_rows`` rows, so memory is
bounded by the batch, never by a transaction or the WAL range. Each file has the row columns
(typed by :mod:`.typemap` from the Relation message's types) plus ``_commit_lsn`` (int64), ``_xid``
(int64), ``_seq`` (int64, order inside the transaction) and ``_op`` (``I``/``U``/``D``/``T``).

Unchanged-TOAST markers: every column whose type can be stored out of line (varlena)
always gets a boolean ``_toast_<column>``, true where the change left that value unchanged (the
value itself is then null). Always having them keeps a table's schema stable across files and
runs. A Relation message with a different column layout (``ALTER TABLE`` mid-range) closes the
current file and starts a new one with the new schema. The last file always has the table's
columns as the capture described them at W (an empty one is added when the last Relation message
had another layout): readers take each segment as those columns
(:class:`~airflow_provider_streambed.staging.file_columns.FileColumns`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_streambed import storage
from airflow_provider_streambed.capture.pgoutput import UNCHANGED_TOAST, Column, Value
from airflow_provider_streambed.capture.typemap import PgType
from airflow_provider_streambed.staging import COMMIT_LSN, OP, OP_INSERT, SEQ, TOAST_MARKER_PREFIX, XID, join

logger = logging.getLogger(__name__)

DEFAULT_BATCH_ROWS = 50_000
#: Changelog files are ``<member>/changes-NNNNN.parquet`` under the run's ``_capture`` directory.
CHANGES_PREFIX = "changes"


def changelog_schema(layout: tuple[Column, ...], types: tuple[PgType, ...]) -> pa.Schema:
    """The Parquet schema of a table's changelog files for a column layout and its types."""
    fields = [pa.field(c.name, t.arrow) for c, t in zip(layout, types, strict=True)]
    fields += [pa.field(COMMIT_LSN, pa.int64()), pa.field(XID, pa.int64()), pa.field(SEQ, pa.int64()),
               pa.field(OP, pa.string())]
    fields += [
        pa.field(TOAST_MARKER_PREFIX + c.name, pa.bool_())
        for c, t in zip(layout, types, strict=True) if not t.fixed_width
    ]
    return pa.schema(fields)


@dataclass
class TableLog:
    """The changelog files of one table being written.

    Attributes:
        where: ``group/member/table`` for error messages.
        directory: URI of the directory the files go to.
        layout: the current column layout.
        types: the layout's column types.
    """

    where: str
    directory: str
    layout: tuple[Column, ...]
    types: tuple[PgType, ...]
    batch_rows: int = DEFAULT_BATCH_ROWS
    files: list[str] = field(default_factory=list)
    changes: int = 0
    _rows: list[Sequence[Value]] = field(default_factory=list)
    _meta: list[tuple[int, int, int, str]] = field(default_factory=list)
    _unchanged: list[tuple[int, int]] = field(default_factory=list)
    _writer: pq.ParquetWriter | None = None
    _described: tuple[tuple[Column, ...], tuple[PgType, ...]] = ((), ())

    def __post_init__(self) -> None:
        self._described = (self.layout, self.types)

    def set_layout(self, layout: tuple[Column, ...], types: tuple[PgType, ...]) -> None:
        """Follow a Relation message with a changed layout: the next rows go to a new file."""
        self.flush()
        self._close_writer()
        self.layout, self.types = layout, types

    def add(self, op: str, values: list[Value], commit_lsn: int, xid: int, seq: int) -> None:
        """Buffer one change; ``values`` may hold None and UNCHANGED_TOAST (bytes otherwise)."""
        if UNCHANGED_TOAST in values:
            for index, value in enumerate(values):
                if value is UNCHANGED_TOAST:
                    self._unchanged.append((len(self._rows), index))
                    values[index] = None
        self._rows.append(values)
        self._meta.append((commit_lsn, xid, seq, op))
        if len(self._rows) >= self.batch_rows:
            self.flush()

    def add_insert(self, values: list[Value], commit_lsn: int, xid: int, seq: int) -> None:
        """Buffer one inserted row (the hot path: an insert never has unchanged-TOAST values)."""
        self._rows.append(values)
        self._meta.append((commit_lsn, xid, seq, OP_INSERT))
        if len(self._rows) >= self.batch_rows:
            self.flush()

    def flush(self) -> None:
        """Write the buffered rows as one row group."""
        if not self._rows:
            return
        schema = changelog_schema(self.layout, self.types)
        count = len(self._rows)
        columns = list(zip(*self._rows, strict=True)) if self.layout else []
        arrays: list[pa.Array] = [
            t.from_text(values, f"{self.where}, column {c.name!r}")
            for values, c, t in zip(columns, self.layout, self.types, strict=True)
        ]
        lsns, xids, seqs, ops = zip(*self._meta, strict=True)
        arrays += [pa.array(lsns, pa.int64()), pa.array(xids, pa.int64()), pa.array(seqs, pa.int64()),
                   pa.array(ops, pa.string())]
        arrays += self._markers(count)
        self._writer_for(schema).write_table(pa.Table.from_arrays(arrays, schema=schema))
        self.changes += count
        self._rows.clear()
        self._meta.clear()
        self._unchanged.clear()

    def _markers(self, count: int) -> list[pa.Array]:
        toastable = [index for index, t in enumerate(self.types) if not t.fixed_width]
        flags = {index: [False] * count for index in toastable}
        for row, index in self._unchanged:
            flags[index][row] = True
        return [pa.array(flags[index], pa.bool_()) for index in toastable]

    def _writer_for(self, schema: pa.Schema) -> pq.ParquetWriter:
        if self._writer is None:
            uri = join(self.directory, f"{CHANGES_PREFIX}-{len(self.files):05d}.parquet")
            filesystem, path = storage.filesystem(uri)
            filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
            self._writer = pq.ParquetWriter(path, schema, filesystem=filesystem)
            self.files.append(uri)
        return self._writer

    def _close_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def close(self) -> tuple[str, ...]:
        """Flush and close; the last file has the described layout (an empty one when needed: a
        table without any change still gets one, its schema)."""
        self.flush()
        if not self.files or self.layout != self._described[0]:
            self._close_writer()
            self.layout, self.types = self._described
            self._writer_for(changelog_schema(self.layout, self.types))
        self._close_writer()
        logger.debug("%s: wrote %d changes in %d files", self.where, self.changes, len(self.files))
        return tuple(self.files)
