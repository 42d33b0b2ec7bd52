"""Typed, parallel table copies: binary ``COPY`` into Arrow through ADBC, written as mirror-shaped Parquet.

Every copy connection (Apache Arrow's ADBC PostgreSQL driver, which reads a query's result as
binary ``COPY`` into Arrow record batches) imports one exported snapshot (``REPEATABLE READ`` +
``SET TRANSACTION SNAPSHOT``), as ``pg_dump -j`` does, so all of them see exactly the same rows.
A table larger than :data:`MIN_RANGE_BLOCKS` blocks is split into ranges of ``ctid`` blocks
(PostgreSQL 14+ scans a ``ctid`` range as a TID Range Scan, reading only those blocks); the last
range is open-ended, so rows that moved to blocks added after the split are not visible to the
snapshot anyway and none is missed. Ranges are copied by ``parallelism`` connections, largest
first; each writes its own Parquet files of the mirror's columns only, typed by :mod:`.typemap`
(no bookkeeping columns: the files can become the mirror's first data files as they are).

Memory is bounded by ``parallelism`` x (ADBC's batch of about :data:`BATCH_BYTES`): each batch is
converted with Arrow compute and written as one row group before the next is read.

Progress: every ``progress_interval`` seconds, a line per table still copying (rows, the
estimate from ``pg_class.reltuples``, rate, ETA) and a call of ``on_progress``; at the end a
line per table with rows, bytes and rows/s.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from psycopg import sql

from airflow_provider_streambed import storage
from airflow_provider_streambed.capture.extract import DECODING_SETTINGS
from airflow_provider_streambed.capture.names import quoted_table
from airflow_provider_streambed.capture.source import SourceTable
from airflow_provider_streambed.exceptions import SourceError
from airflow_provider_streambed.staging import join

logger = logging.getLogger(__name__)

#: Copy files are ``<member>/copy-<range>-<part>.parquet`` under the run's ``_capture`` directory.
COPY_PREFIX = "copy"
#: Tables of at least this many blocks (64 MiB of 8 kB blocks) are split into ctid ranges.
MIN_RANGE_BLOCKS = 8192
#: Ranges per copy connection for a split table (more ranges even out the connections' loads).
RANGES_PER_CONNECTION = 2
#: ADBC's batch size hint: about this many bytes of rows per record batch and Parquet row group.
BATCH_BYTES = 32 * 1024 * 1024
#: A range's Parquet file is closed and the next begun after about this many bytes of Arrow data.
FILE_BYTES = 512 * 1024 * 1024
#: A column chunk's dictionary falls back to plain encoding past this size: low-cardinality columns
#: keep their dictionary, and unique ones (keys, names) stop paying for it early (pyarrow's 1 MiB
#: default made writing 3x slower on the benchmark's table, for larger files).
DICTIONARY_PAGE_BYTES = 64 * 1024
DEFAULT_PROGRESS_INTERVAL = 10.0
#: Settings of every copy session: the decoding session's (text forms depend on them), in UTF-8.
SESSION_SETTINGS = {"client_encoding": "UTF8", **DECODING_SETTINGS}


@dataclass(frozen=True, slots=True)
class CopyRange:
    """One query of a table copy: blocks ``[low, high)`` of its heap (``None``: no bound)."""

    table: SourceTable
    index: int
    low: int | None = None
    high: int | None = None
    blocks: int = 0

    def query(self) -> sql.Composed:
        """The ``SELECT`` that reads the range, each column as :mod:`.typemap` copies it."""
        schema, name = self.table.qualified_name.split(".", 1)
        columns = sql.SQL(", ").join(
            sql.SQL("{} AS {}").format(pg_type.copy_expression(column.name), sql.Identifier(column.name))
            for column, pg_type in zip(self.table.layout, self.table.types, strict=True)
        )
        bounds = []
        if self.low is not None:
            bounds.append(sql.SQL("ctid >= {}::tid").format(sql.Literal(f"({self.low},0)")))
        if self.high is not None:
            bounds.append(sql.SQL("ctid < {}::tid").format(sql.Literal(f"({self.high},0)")))
        where = sql.SQL(" WHERE ") + sql.SQL(" AND ").join(bounds) if bounds else sql.SQL("")
        return sql.SQL("SELECT {} FROM {}{}").format(columns, quoted_table(schema, name), where)


def split_ranges(table: SourceTable, blocks: int, parallelism: int) -> list[CopyRange]:
    """The ranges a table of ``blocks`` heap blocks is copied in: one unless it is large and copied in parallel."""
    count = min(parallelism * RANGES_PER_CONNECTION, blocks // MIN_RANGE_BLOCKS) if parallelism > 1 else 1
    if count <= 1:
        return [CopyRange(table, 0, blocks=blocks)]
    bounds = [blocks * i // count for i in range(count + 1)]
    return [
        CopyRange(table, i, None if i == 0 else bounds[i], None if i == count - 1 else bounds[i + 1],
                  bounds[i + 1] - bounds[i])
        for i in range(count)
    ]


@dataclass
class TableProgress:
    """Rows and bytes copied of one table so far (updated by the copy threads)."""

    member: str
    table: str
    estimate: int
    ranges: int
    rows: int = 0
    bytes: int = 0
    done_ranges: int = 0
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, rows: int) -> None:
        """Count copied rows."""
        with self._lock:
            self.rows += rows

    def range_done(self, written_bytes: int) -> None:
        """Count a copied range and the bytes of its files."""
        with self._lock:
            self.bytes += written_bytes
            self.done_ranges += 1
            if self.done_ranges == self.ranges:
                self.finished = time.monotonic()

    def line(self) -> str:
        """``copied N of ~E rows (P %), R rows/s, ETA S s``."""
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = self.rows / elapsed
        if self.estimate > 0:
            share = min(self.rows / self.estimate, 1.0)
            eta = f", ETA {max(self.estimate - self.rows, 0) / rate:.0f} s" if rate > 0 else ""
            return f"copied {self.rows:,} of ~{self.estimate:,} rows ({share:.0%}), {rate:,.0f} rows/s{eta}"
        return f"copied {self.rows:,} rows (no estimate: table never analyzed), {rate:,.0f} rows/s"

    def summary(self) -> str:
        """The final line: rows, bytes and rows/s."""
        elapsed = max((self.finished or time.monotonic()) - self.started, 1e-6)
        return (f"copied {self.rows:,} rows, {self.bytes / 2**20:,.1f} MiB of Parquet in {elapsed:.2f} s "
                f"({self.rows / elapsed:,.0f} rows/s, {self.ranges} ranges)")


@dataclass(frozen=True, slots=True)
class RangeOutput:
    """The files one range wrote."""

    range: CopyRange
    files: tuple[str, ...]
    rows: int
    bytes: int


class _RangeWriter:
    """Parquet files of one range, a new file every :data:`FILE_BYTES` of Arrow data."""

    def __init__(self, directory: str, index: int, schema: pa.Schema) -> None:
        self._directory, self._index, self._schema = directory, index, schema
        self._writer: pq.ParquetWriter | None = None
        self._filled = 0
        self.files: list[str] = []

    def write(self, batch: pa.RecordBatch) -> None:
        if self._writer is None or self._filled >= FILE_BYTES:
            self._open()
        assert self._writer is not None
        self._writer.write_batch(batch)
        self._filled += batch.nbytes

    def _open(self) -> None:
        self.close()
        uri = join(self._directory, f"{COPY_PREFIX}-{self._index:03d}-{len(self.files):03d}.parquet")
        filesystem, path = storage.filesystem(uri)
        filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
        self._writer = pq.ParquetWriter(path, self._schema, filesystem=filesystem,
                                        dictionary_pagesize_limit=DICTIONARY_PAGE_BYTES)
        self._filled = 0
        self.files.append(uri)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def finish(self) -> tuple[tuple[str, ...], int]:
        """Close; a range without rows still writes one file (it carries the schema). Returns files and bytes."""
        if not self.files:
            self._open()
        self.close()
        sizes = 0
        for uri in self.files:
            filesystem, path = storage.filesystem(uri)
            sizes += filesystem.get_file_info(path).size or 0
        return tuple(self.files), sizes


@contextlib.contextmanager
def snapshot_session(conninfo: str, snapshot_name: str) -> Iterator[Any]:
    """An ADBC cursor in a read-only ``REPEATABLE READ`` transaction at the exported snapshot."""
    import adbc_driver_postgresql.dbapi as adbc

    with adbc.connect(conninfo, autocommit=True) as connection, connection.cursor() as cursor:
        for name, value in SESSION_SETTINGS.items():
            cursor.execute(f"SET {name} = '{value}'")
        cursor.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        cursor.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot_name)).as_string())
        cursor.adbc_statement.set_options(**{"adbc.postgresql.batch_size_hint_bytes": str(BATCH_BYTES)})
        yield cursor
        cursor.execute("COMMIT")


def copy_range(cursor: Any, copy: CopyRange, directory: str, where: str, progress: TableProgress,
               stop: threading.Event) -> RangeOutput:
    """Copy one range with ``cursor`` into Parquet files under ``directory``."""
    table = copy.table
    schema = pa.schema([pa.field(c.name, t.arrow) for c, t in zip(table.layout, table.types, strict=True)])
    wheres = [f"{where}, column {column.name!r}" for column in table.layout]
    writer = _RangeWriter(directory, copy.index, schema)
    rows = 0
    try:
        cursor.execute(copy.query().as_string())
        for batch in cursor.fetch_record_batch():
            if stop.is_set():
                raise InterruptedError(f"{where}: copy stopped (another copy failed)")
            columns = [t.from_copy(batch.column(i), wheres[i]) for i, t in enumerate(table.types)]
            writer.write(pa.RecordBatch.from_arrays(columns, schema=schema))
            rows += batch.num_rows
            progress.add(batch.num_rows)
    finally:
        files, written = writer.finish()
    progress.range_done(written)
    return RangeOutput(copy, files, rows, written)


def run_copies(
    conninfo: str,
    snapshot_name: str,
    ranges: list[CopyRange],
    directories: dict[str, str],
    progress: dict[str, TableProgress],
    *,
    group: str,
    parallelism: int,
    progress_interval: float = DEFAULT_PROGRESS_INTERVAL,
    on_progress: Callable[[TableProgress], None] | None = None,
) -> list[RangeOutput]:
    """Copy ``ranges`` over ``parallelism`` connections that all import ``snapshot_name``.

    Args:
        conninfo: libpq connection string of the source (holds the password; never logged).
        snapshot_name: an exported snapshot, alive until every copy connection has imported it.
        ranges: what to copy, largest first is best.
        directories: per member, the directory its files go to.
        progress: per member, its progress (updated here).
        group: the group's name, for messages.
        parallelism: copy connections.
        progress_interval: seconds between progress lines.
        on_progress: called with each table's progress at every interval (gauges).

    Raises:
        DecodeError: a value does not fit its column's type (the first failure; the others stop).
        SourceError: a copy connection failed.
    """
    pending: queue.SimpleQueue[CopyRange] = queue.SimpleQueue()
    for item in ranges:
        pending.put(item)
    stop = threading.Event()
    outputs: list[RangeOutput] = []

    def worker() -> None:
        try:
            with snapshot_session(conninfo, snapshot_name) as cursor:
                while not stop.is_set():
                    try:
                        item = pending.get_nowait()
                    except queue.Empty:
                        return
                    member = item.table.member
                    where = f"group {group!r}, member {member!r}, table {item.table.qualified_name!r}"
                    outputs.append(copy_range(cursor, item, directories[member], where, progress[member], stop))
        except BaseException:
            stop.set()
            raise

    reporter = threading.Thread(
        target=_report, args=(group, progress, stop, progress_interval, on_progress), daemon=True
    )
    reporter.start()
    workers = max(1, min(parallelism, len(ranges)))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="copy")
    try:
        futures = [pool.submit(worker) for _ in range(workers)]
        errors = [error for future in futures if (error := future.exception()) is not None]
    finally:
        stop.set()  # also when this thread is interrupted (task timeout, SIGTERM): copies stop at their next batch
        pool.shutdown(wait=True)
        reporter.join()
    if errors:
        first = next((e for e in errors if not isinstance(e, InterruptedError)), errors[0])
        if type(first).__module__.startswith("adbc_driver"):
            raise SourceError(f"group {group!r}: a bootstrap copy failed: {str(first).splitlines()[0]}") from first
        raise first
    for table in progress.values():
        logger.info("group=%s member=%s table=%s: %s", group, table.member, table.table, table.summary())
        _notify(on_progress, table)
    return outputs


def _notify(on_progress: Callable[[TableProgress], None] | None, table: TableProgress) -> None:
    """Call ``on_progress`` (metrics); its failure is logged, never the copy's."""
    if on_progress is None:
        return
    try:
        on_progress(table)
    except Exception:  # a metrics backend must not fail a copy
        logger.warning("member=%s: the copy progress callback failed", table.member, exc_info=True)


def _report(
    group: str, progress: dict[str, TableProgress], stop: threading.Event, interval: float,
    on_progress: Callable[[TableProgress], None] | None,
) -> None:
    """Every ``interval`` seconds, a progress line (and ``on_progress``) per table still copying."""
    while not stop.wait(interval):
        for item in progress.values():
            if item.finished is None:
                logger.info("group=%s member=%s table=%s: %s", group, item.member, item.table, item.line())
                _notify(on_progress, item)
