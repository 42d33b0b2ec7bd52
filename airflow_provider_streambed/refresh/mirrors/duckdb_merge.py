"""Mirror merge in this process with DuckDB: the common incremental case, without a Spark job.

The merge is :mod:`.spark_merge`'s, with the same result: the last image of each changed key ordered by
``(_commit_lsn, _seq)``, deletes dropped, and position deletes of the changed keys' rows in the
previous snapshot's files. Spark pays about ten jobs for it, whatever the change: on a warm
``local[2]`` session a refresh of one key costs a quarter of a plain read and write of a
10M-row table (``benchmarks/bench_merge_on_read.py``). Here DuckDB finds the previous rows of the
changed keys (their file name and row number, reading the key columns only) and ranks the
changes; the new images are the changelog's own rows, taken by pyarrow, so their values and
types are exactly the changelog's (as a bootstrap copy's are). A keyless mirror is merged as a
multiset, as :mod:`.spark_merge` does: DuckDB counts each distinct changed row's inserts minus
deletes, and picks that many previous live rows equal to each removed row (compared on every
column, the whole row being the only identity, after a scan narrowed by one column:
:mod:`.keyless_probe`).

When the capture carries every change's old row (``REPLICA IDENTITY FULL``) and the table's
columns did not change this run
(:attr:`~airflow_provider_streambed.staging.TableCapture.deleted_row_ids`), and the mirror is not
rewritten whole, the position deletes carry the deleted rows' values, with the table's field ids,
in Iceberg's optional ``row`` column: each is its key's first change in the run, a delete of the
row the previous cut holds. The change feed then reads removed rows from there, not from the
older data files.

Columns dropped, renamed, added or widened since the previous cut merge here too: the previous
files and the changelog segments are read as the columns at W
(:class:`~airflow_provider_streambed.staging.file_columns.FileColumns`), and the output has them.

:func:`merge_in_process` merges only when every previous file is on a local file system;
otherwise it returns ``None`` (and logs why) and Spark merges:

- a compaction (``rewrite``) of previous files over :data:`~.rewrite.MAX_REWRITE_BYTES`:
  the mirror is written whole (a smaller mirror's compaction is written whole here,
  :mod:`.rewrite`, and so is the mirror after a truncate among the changes, or over an
  empty previous snapshot, such as the first cut of a table copied empty: the changes, after the
  last truncate, merged on nothing);
- the key changed, or column names that differ only in case (DuckDB's names do not);
- unchanged-TOAST values with no previous row (after a truncate in the same run, or on an empty
  mirror: their values are unknown);
- more than :data:`MAX_CHANGES` changes (the changelog is read whole into memory);
- files not on a local file system, or any failure of the in-process merge (logged as a
  warning).

The Spark job turns it off with ``spark.streambed.mirror.inProcessMerge=false`` (every mirror is
then merged by Spark).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_provider_streambed import storage
from airflow_provider_streambed.refresh.mirrors.keyless_probe import probe_column
from airflow_provider_streambed.refresh.mirrors.merge_input import MirrorInput, diverged
from airflow_provider_streambed.refresh.mirrors.merge_output import LocalMirrorOutput
from airflow_provider_streambed.refresh.mirrors.merge_queries import (
    FILE,
    NET,
    POS,
    ROW,
    copies_query,
    first_changes_query,
    images_query,
    net_query,
    positions_query,
    quoted,
    quoted_text,
    removed_positions_query,
    unchanged_values_query,
)
from airflow_provider_streambed.refresh.mirrors.rewrite import MAX_REWRITE_BYTES, rewrite_whole, small_enough
from airflow_provider_streambed.staging import (
    COMMIT_LSN,
    OP,
    OP_INSERT,
    OP_TRUNCATE,
    SEQ,
    TOAST_MARKER_PREFIX,
)
from airflow_provider_streambed.staging.file_columns import FileColumns
from airflow_provider_streambed.staging.file_names import file_names
from airflow_provider_streambed.staging.records import (
    DELETE_FIELD_IDS,
    DELETE_FILE_PATH,
    DELETE_POS,
    DELETE_ROW,
    DELETE_ROW_FIELD_ID,
    FIELD_ID,
)

logger = logging.getLogger(__name__)

#: The Spark setting that turns the in-process merge off (``false``); on by default.
IN_PROCESS_MERGE_CONF = "spark.streambed.mirror.inProcessMerge"
#: Changelogs of more changes than this are merged by Spark: the in-process merge reads the run's
#: changelog of the table whole (all columns) into memory.
MAX_CHANGES = 1_000_000
#: Position-delete rows as Iceberg names them, with their reserved field ids.
DELETE_SCHEMA = pa.schema([
    pa.field(DELETE_FILE_PATH, pa.string(), nullable=False,
             metadata={FIELD_ID: str(DELETE_FIELD_IDS[DELETE_FILE_PATH]).encode()}),
    pa.field(DELETE_POS, pa.int64(), nullable=False, metadata={FIELD_ID: str(DELETE_FIELD_IDS[DELETE_POS]).encode()}),
])


def merge_in_process(source: MirrorInput) -> LocalMirrorOutput | None:
    """The mirror's changes to its previous snapshot, merged here; ``None`` when Spark must merge
    (see the module's documentation; the reason is logged)."""
    where = f"group={source.group} member={source.member.name}"
    try:
        merged, why = _merge(source)
    except (duckdb.Error, pa.ArrowException, ValueError, OSError) as error:  # Spark merges it, or says what is wrong
        logger.warning("%s: merged by Spark: the in-process merge failed: %s: %s", where, type(error).__name__,
                       str(error).splitlines()[0])
        return None
    if merged is None:
        logger.info("%s: merged by Spark: %s", where, why)
    elif not merged.incremental:
        logger.info("%s: rewritten whole in-process (%s): %d rows", where, merged.reason, len(merged.rows))
    else:
        logger.info("%s: merged in-process: %d new images, %d rows deleted", where, len(merged.rows),
                    0 if merged.deletes is None else len(merged.deletes))
    return merged


def _merge(source: MirrorInput) -> tuple[LocalMirrorOutput | None, str]:
    """The merge, or why it is Spark's."""
    paths, why = _local_paths(source)
    if paths is None:
        return None, why
    if source.capture.changes > MAX_CHANGES:  # the changelog is read whole, into this process's memory
        return None, f"{source.capture.changes} changes (more than {MAX_CHANGES})"
    columns = FileColumns.of(source.capture)
    shape = columns.schema  # the columns at W: the previous files may hold older ones (schema evolution)
    changes, why = _changes(source, columns)
    if changes is None:
        return None, why
    truncates = pc.indices_nonzero(pc.equal(changes[OP], OP_TRUNCATE))
    if len(truncates) or not source.previous.data:  # no previous row: the changes (after a truncate) are the table
        after = changes.slice(truncates[-1].as_py() + 1) if len(truncates) else changes
        if _marked(source, after):
            return None, "unchanged-TOAST values with no previous row"
        return _on_nothing(source, after, shape, "truncated" if len(truncates) else "first cut"), ""
    if source.capture.keyless and not source.member.append_only:
        images, positions = _locate_rows(source, changes, columns, *paths)
        rows, removed = changes.take(images), None
    elif source.member.append_only or not source.capture.key_columns:
        inserted = changes.filter(pc.equal(changes[OP], OP_INSERT)).select(shape.names).cast(shape)
        merged = LocalMirrorOutput(inserted, None, "append-only")
        return (rewrite_whole(*paths, columns, merged, source.rewrite) if source.rewrite else merged), ""
    else:
        markers = _marked(source, changes)
        imaged = source.capture.deleted_row_ids is not None and not markers and not source.rewrite
        images, positions, unchanged = _locate(changes, list(source.capture.key_columns), columns, *paths, markers,
                                               imaged=imaged)
        rows = _with_unchanged_values(changes.take(images), markers, unchanged)
        removed = _old_images(source, changes, positions, shape) if imaged and len(positions) else None
    merged = LocalMirrorOutput(rows.select(shape.names).cast(shape), _deletes(source, positions, removed),
                               "merge-on-read")
    return (rewrite_whole(*paths, columns, merged, source.rewrite) if source.rewrite else merged), ""


def _locate(
    changes: pa.Table, key: list[str], columns: FileColumns, data: tuple[str, ...], deletes: tuple[str, ...],
    markers: list[str], *, imaged: bool,
) -> tuple[pa.Array, pa.Table, pa.Table | None]:
    """The changelog positions of the new images, the file names and row numbers of the previous
    rows to delete (``imaged``: with their key's first change, :func:`.merge_queries.first_changes_query`),
    and (with ``markers``) the values of the images' unchanged-TOAST columns."""
    flags = [TOAST_MARKER_PREFIX + name for name in markers]
    ranked = changes.select([*key, COMMIT_LSN, SEQ, OP, *flags, *markers]).append_column(
        ROW, pa.array(np.arange(len(changes), dtype=np.int64)))
    with _database().cursor() as connection:  # a connection of its own: its registered tables are its own
        connection.register("changes", ranked)
        _previous_files(connection, columns, data)
        images = connection.execute(images_query(key)).to_arrow_table()
        carried = markers if markers or imaged else None  # columns beside the positions: the key, and these
        positions = connection.execute(positions_query(key, bool(deletes), carried),
                                       [list(deletes)] if deletes else []).to_arrow_table()
        if imaged:
            connection.register("located", positions)
            positions = connection.execute(first_changes_query(key)).to_arrow_table()
        unchanged = None
        if markers:  # the previous rows' values, for the images whose key has no earlier change
            connection.register("images", images)
            connection.register("previous", positions.select([*key, *markers]))
            unchanged = connection.execute(unchanged_values_query(key, markers)).to_arrow_table()
    return _column(images, ROW), positions, unchanged


def _old_images(source: MirrorInput, changes: pa.Table, positions: pa.Table, shape: pa.Schema) -> pa.Table | None:
    """The deleted previous rows' values, in ``positions``' order, with the mirror's field ids
    (:attr:`~airflow_provider_streambed.staging.TableCapture.deleted_row_ids`): their key's first
    change in the run, a delete of the whole old row; ``None`` when some key's first change is not
    a delete (then no delete of the run carries rows)."""
    ids = source.capture.deleted_row_ids
    assert ids is not None
    if not pc.all(positions["deleted"]).as_py():
        logger.info("group=%s member=%s: position deletes without rows: a changed key's first change is not a delete "
                    "of its old row", source.group, source.member.name)
        return None
    return changes.take(_column(positions, ROW)).select(shape.names).cast(identified(shape, ids))


def identified(shape: pa.Schema, ids: Mapping[str, int]) -> pa.Schema:
    """``shape`` with each field's Iceberg field id (``ids``, by name) as its :data:`FIELD_ID` metadata."""
    return pa.schema([field.with_metadata({FIELD_ID: str(ids[field.name]).encode()}) for field in shape])


def _marked(source: MirrorInput, changes: pa.Table) -> list[str]:
    """The columns some of ``changes`` mark as unchanged-TOAST values (their value not sent)."""
    flags = {name: TOAST_MARKER_PREFIX + name for name in source.capture.columns}
    return [name for name, flag in flags.items()
            if flag in changes.column_names and pc.any(changes[flag].cast(pa.bool_())).as_py()]


def _with_unchanged_values(images: pa.Table, markers: list[str], unchanged: pa.Table | None) -> pa.Table:
    """``images`` with each marked column's value taken from ``unchanged`` (same order) where marked."""
    for name in markers:
        assert unchanged is not None
        marked = images[TOAST_MARKER_PREFIX + name].cast(pa.bool_()).fill_null(False)
        value = unchanged[name].cast(images.schema.field(name).type)
        images = images.set_column(images.schema.get_field_index(name), images.schema.field(name),
                                   pc.if_else(marked, value, images[name]))
    return images


def _locate_rows(
    source: MirrorInput, changes: pa.Table, columns: FileColumns, data: tuple[str, ...], deletes: tuple[str, ...]
) -> tuple[pa.Array, pa.Table]:
    """A keyless mirror's multiset merge: per distinct row, its inserts minus its deletes. The
    changelog positions of the rows to add (one per added copy), and the file names and row
    numbers of as many previous live rows equal to each removed row as it loses.

    Raises:
        MirrorDivergedError: the previous cut holds fewer rows equal to a removed row than the
            changes remove (the mirror no longer equals its source).
    """
    counted = changes.select([*columns.names, OP]).append_column(
        ROW, pa.array(np.arange(len(changes), dtype=np.int64)))
    with _database().cursor() as connection:
        connection.register("changes", counted)
        _previous_files(connection, columns, data)
        net = connection.execute(net_query(columns.names)).to_arrow_table()
        connection.register("net", net)
        images = connection.execute(copies_query()).to_arrow_table()
        probe = probe_column(net.filter(pc.less(net[NET], 0)).select(columns.names))
        query = removed_positions_query(columns.names, bool(deletes), probe)
        positions = connection.execute(query, [list(deletes)] if deletes else []).to_arrow_table()
    removed = -(pc.sum(pc.filter(net[NET], pc.less(net[NET], 0))).as_py() or 0)
    if len(positions) < removed:
        raise diverged(source, f"the previous cut holds {removed - len(positions)} fewer rows equal to rows the "
                               "changes delete than they delete")
    return _column(images, ROW), positions


def _on_nothing(source: MirrorInput, changes: pa.Table, shape: pa.Schema, reason: str) -> LocalMirrorOutput:
    """The mirror written whole from ``changes`` merged on no previous row: after a truncate (the
    changes after the last one), or over an empty previous snapshot (a first cut of an empty table).

    Raises:
        MirrorDivergedError: a keyless change deletes a row no change added.
    """
    if source.member.append_only or not (source.capture.key_columns or source.capture.keyless):
        rows = changes.filter(pc.equal(changes[OP], OP_INSERT))
        return LocalMirrorOutput(rows.select(shape.names).cast(shape), None, reason, incremental=False)
    key = [] if source.capture.keyless else list(source.capture.key_columns)
    numbered = changes.select([*(key or shape.names), COMMIT_LSN, SEQ, OP]).append_column(
        ROW, pa.array(np.arange(len(changes), dtype=np.int64)))
    with _database().cursor() as connection:
        connection.register("changes", numbered)
        if key:
            images = connection.execute(images_query(key)).to_arrow_table()
        else:
            net = connection.execute(net_query(list(shape.names))).to_arrow_table()
            if pc.any(pc.less(net[NET], 0)).as_py():
                raise diverged(source, f"a change deletes a row that no change added ({reason})")
            connection.register("net", net)
            images = connection.execute(copies_query()).to_arrow_table()
    rows = changes.take(_column(images, ROW)).select(shape.names).cast(shape)
    return LocalMirrorOutput(rows, None, reason, incremental=False)


@functools.cache
def _database() -> duckdb.DuckDBPyConnection:
    """This process's in-memory DuckDB database (opening one costs milliseconds; a cursor, nothing)."""
    return duckdb.connect()


def _local_paths(source: MirrorInput) -> tuple[tuple[tuple[str, ...], tuple[str, ...]] | None, str]:
    """The previous data and delete files as local paths, or why the merge cannot be in-process."""
    data, deletes = source.previous.readable()
    paths = []
    for uri in (*data, *deletes):
        if (scheme := storage.scheme_of(uri)) not in storage.LOCAL_SCHEMES:
            return None, f"previous files are not on a local file system ({scheme}://)"
        paths.append(storage.filesystem(uri)[1])
    if source.rewrite and not small_enough(tuple(paths)):
        return None, f"{source.rewrite} (over {MAX_REWRITE_BYTES >> 20} MiB: Spark rewrites it)"
    return (tuple(paths[: len(data)]), tuple(paths[len(data):])), ""


def _changes(source: MirrorInput, columns: FileColumns) -> tuple[pa.Table | None, str]:
    """The run's changes after the previous cut's W, each segment read as the columns at W, or
    why Spark must merge them."""
    segments = []
    for uri in source.capture.files:
        filesystem, path = storage.filesystem(uri)
        segments.append(pq.read_table(path, filesystem=filesystem))
    extra = {field.name: field.type for field in columns.changelog}
    changes = pa.concat_tables([columns.conform(segment, extra) for segment in segments])
    if why := _schema_change(source):
        return None, why
    if source.previous_watermark is not None:
        changes = changes.filter(pc.greater_equal(changes[COMMIT_LSN], source.previous_watermark.value))
    return changes, ""


def _schema_change(source: MirrorInput) -> str:
    """Why the in-process merge cannot take the table's columns or key (empty: it can)."""
    columns = set(source.capture.columns)
    if len({name.lower() for name in columns}) < len(columns):
        return "column names differ only in case"  # DuckDB's names are case-insensitive
    if source.previous_key_columns and tuple(source.previous_key_columns) != tuple(source.capture.key_columns):
        return "the key changed"
    return ""


def _previous_files(connection: duckdb.DuckDBPyConnection, columns: FileColumns, data: tuple[str, ...]) -> None:
    """Create the view ``previous_files`` on ``connection``: the previous data files' rows as the
    columns at W (each under the first of its names a file holds; null where none does), with each
    row's file (:data:`FILE`) and row number in it (:data:`POS`).

    Files of several schemas are read by name (``union_by_name``); files of one schema, the common
    case, without it: DuckDB then pushes a join's filters into the scan (a keyless merge's probe
    took 0.28 s instead of 0.71 s on 10M rows), and comparing their footers costs well under a
    millisecond a file.
    """
    files = "[" + ", ".join(quoted_text(path) for path in data) + "]"
    uniform = len({pq.read_schema(path).remove_metadata() for path in data}) == 1
    scan = (f"read_parquet({files}, filename = '{FILE}', file_row_number = true, hive_partitioning = false, "
            f"union_by_name = {str(not uniform).lower()})")
    present = {column[0] for column in connection.execute(f"SELECT * FROM {scan} LIMIT 0").description}
    selected = []
    for name in columns.names:
        held = [quoted(other) for other in columns.held(name, present)]
        value = "NULL" if not held else held[0] if len(held) == 1 else f"coalesce({', '.join(held)})"
        selected.append(f"{value} AS {quoted(name)}")
    connection.execute(f"CREATE TEMP VIEW previous_files AS SELECT {', '.join(selected)}, {FILE}, {POS} FROM {scan}")


def _deletes(source: MirrorInput, positions: pa.Table, images: pa.Table | None) -> pa.Table | None:
    """Position-delete rows naming the previous data files by their URIs (staging sorts them), with
    the deleted rows' ``images`` (same order) when given."""
    if not len(positions):
        return None
    uris = file_names(source.previous.data)
    paths = pa.array([uris[name] for name in _column(positions, "name").to_pylist()], pa.string())
    return position_deletes(paths, _column(positions, "pos").cast(pa.int64()), images)


def position_deletes(paths: pa.Array, positions: pa.Array, images: pa.Table | None) -> pa.Table:
    """Iceberg position-delete rows: ``paths`` (data file URIs) and ``positions`` (row numbers) and,
    when given, the ``row`` column of the deleted rows' values (``images``, one row each, in the
    mirror's columns at W, each field carrying its Iceberg field id as :data:`FIELD_ID` metadata)."""
    deletes = pa.Table.from_arrays([paths, positions], schema=DELETE_SCHEMA)
    if images is None:
        return deletes
    values = pa.StructArray.from_arrays([_column(images, name) for name in images.column_names],
                                        fields=list(images.schema))
    row = pa.field(DELETE_ROW, values.type, nullable=False, metadata={FIELD_ID: str(DELETE_ROW_FIELD_ID).encode()})
    return deletes.append_column(row, values)


def _column(table: pa.Table, name: str) -> pa.Array:
    return table[name].combine_chunks()
