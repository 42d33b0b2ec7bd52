"""Mirror merge in this process with DuckDB: the common incremental case, without a Spark job.

The merge is :mod:`.spark_merge`'s, with the same result: the last image of each changed key ordered by
``(_commit_lsn, _seq)``, deletes dropped, and position deletes of the changed keys' rows in the
previous snapshot's files. Spark pays about ten jobs for it, whatever the change: on a warm
``local[2]`` session a refresh of one key costs a quarter of a plain read and write of a
10M-row table (``benchmarks/bench_merge_on_read.py``). Here DuckDB finds the previous rows of the
changed keys (their file name and row number, reading the key columns only) and ranks the
changes (:mod:`.merge_lookups`); the new images are the changelog's own rows, taken by pyarrow,
so their values and types are exactly the changelog's (as a bootstrap copy's are). A keyless
mirror is merged as a multiset, as :mod:`.spark_merge` does: DuckDB counts each distinct changed
row's inserts minus deletes, and picks that many previous live rows equal to each removed row
(compared on every column, the whole row being the only identity, after a scan narrowed by one
column: :mod:`.keyless_probe`).

When the capture carries every change's old row (``REPLICA IDENTITY FULL``) and the table's
columns did not change this run
(:attr:`~airflow_provider_streambed.staging.TableCapture.deleted_row_ids`), and the mirror is not
rewritten whole, the position deletes carry the deleted rows' values, with the table's field ids,
in Iceberg's optional ``row`` column (:mod:`.position_delete_rows`): each is its key's first
change in the run, a delete of the row the previous cut holds. The change feed then reads
removed rows from there, not from the older data files.

Columns dropped, renamed, added or widened since the previous cut merge here too: the previous
files and the changelog segments are read as the columns at W
(:class:`~airflow_provider_streambed.staging.file_columns.FileColumns`), and the output has them.

:func:`merge_in_process` reads the previous files where they are, on a local disk or on S3
(DuckDB's httpfs, pyarrow's S3 filesystem: only the key columns of the files and the rows it
needs travel); it returns ``None`` (and logs why) and Spark merges:

- a compaction (``rewrite``) of previous files over :data:`~.rewrite.MAX_REWRITE_BYTES`:
  the mirror is written whole (a smaller mirror's compaction is written whole here,
  :mod:`.rewrite`, and so is the mirror after a truncate among the changes, or over an
  empty previous snapshot, such as the first cut of a table copied empty: the changes, after the
  last truncate, merged on nothing);
- the key changed, or column names that differ only in case (DuckDB's names do not);
- unchanged-TOAST values with no previous row (after a truncate in the same run, or on an empty
  mirror: their values are unknown);
- more than :data:`MAX_CHANGES` changes (the changelog is read whole into memory);
- files on another object store than S3, or any failure of the in-process merge (logged as a
  warning).

The Spark job turns it off with ``spark.streambed.mirror.inProcessMerge=false`` (every mirror is
then merged by Spark).
"""

from __future__ import annotations

import logging

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_provider_streambed import storage
from airflow_provider_streambed.refresh.mirrors.merge_input import MirrorInput
from airflow_provider_streambed.refresh.mirrors.merge_lookups import column_array, locate, locate_rows, merge_on_nothing
from airflow_provider_streambed.refresh.mirrors.merge_output import LocalMirrorOutput
from airflow_provider_streambed.refresh.mirrors.merge_queries import ROW
from airflow_provider_streambed.refresh.mirrors.position_delete_rows import identified, position_deletes
from airflow_provider_streambed.refresh.mirrors.rewrite import MAX_REWRITE_BYTES, rewrite_whole, small_enough
from airflow_provider_streambed.staging import (
    COMMIT_LSN,
    OP,
    OP_INSERT,
    OP_TRUNCATE,
    TOAST_MARKER_PREFIX,
)
from airflow_provider_streambed.staging.file_columns import FileColumns
from airflow_provider_streambed.staging.file_names import file_names

logger = logging.getLogger(__name__)

#: The Spark setting that turns the in-process merge off (``false``); on by default.
IN_PROCESS_MERGE_CONF = "spark.streambed.mirror.inProcessMerge"
#: Object stores whose files the in-process merge reads in place (DuckDB's httpfs, pyarrow's S3).
READ_IN_PLACE = ("s3",)
#: Changelogs of more changes than this are merged by Spark: the in-process merge reads the run's
#: changelog of the table whole (all columns) into memory.
MAX_CHANGES = 1_000_000


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
    paths, why = _readable_paths(source)
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
        return merge_on_nothing(source, after, shape, "truncated" if len(truncates) else "first cut"), ""
    if source.capture.keyless and not source.member.append_only:
        images, positions = locate_rows(source, changes, columns, *paths)
        rows, removed = changes.take(images), None
    elif source.member.append_only or not source.capture.key_columns:
        inserted = changes.filter(pc.equal(changes[OP], OP_INSERT)).select(shape.names).cast(shape)
        merged = LocalMirrorOutput(inserted, None, "append-only")
        return (rewrite_whole(*paths, columns, merged, source.rewrite) if source.rewrite else merged), ""
    else:
        markers = _marked(source, changes)
        imaged = source.capture.deleted_row_ids is not None and not markers and not source.rewrite
        images, positions, unchanged = locate(changes, list(source.capture.key_columns), columns, *paths, markers,
                                              imaged=imaged)
        rows = _with_unchanged_values(changes.take(images), markers, unchanged)
        removed = _old_images(source, changes, positions, shape) if imaged and len(positions) else None
    merged = LocalMirrorOutput(rows.select(shape.names).cast(shape), _deletes(source, positions, removed),
                               "merge-on-read")
    return (rewrite_whole(*paths, columns, merged, source.rewrite) if source.rewrite else merged), ""


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
    return changes.take(column_array(positions, ROW)).select(shape.names).cast(identified(shape, ids))


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


def _readable_paths(source: MirrorInput) -> tuple[tuple[tuple[str, ...], tuple[str, ...]] | None, str]:
    """The previous data and delete files as DuckDB and pyarrow read them (a local path, an ``s3://``
    URI), or why the merge cannot be in-process."""
    data, deletes = source.previous.readable()
    paths = []
    for uri in (*data, *deletes):
        if storage.is_local(uri):
            paths.append(storage.filesystem(uri)[1])
        elif storage.scheme_of(uri) in READ_IN_PLACE:
            paths.append(uri)
        else:
            return None, f"previous files on {storage.scheme_of(uri)}:// are read by Spark only"
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


def _deletes(source: MirrorInput, positions: pa.Table, images: pa.Table | None) -> pa.Table | None:
    """Position-delete rows naming the previous data files by their URIs (staging sorts them), with
    the deleted rows' ``images`` (same order) when given."""
    if not len(positions):
        return None
    uris = file_names(source.previous.data)
    paths = pa.array([uris[name] for name in column_array(positions, "name").to_pylist()], pa.string())
    return position_deletes(paths, column_array(positions, "pos").cast(pa.int64()), images)
