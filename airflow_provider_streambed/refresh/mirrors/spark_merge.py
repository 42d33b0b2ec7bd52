"""Mirror merge: a source table's rows at W from the previous cut's snapshot plus the changelog.

New state = previous cut's rows + changes in ``[W_prev, W)``: the last image per key ordered by
``(_commit_lsn, _seq)`` wins, deletes remove, a truncate removes every earlier row, and
unchanged-TOAST markers take the value of the key's previous image.

The output is merge-on-read (:class:`~.merge_output.MirrorOutput` ``incremental``): new data files hold only the
last images of changed keys, and position deletes remove the previous rows of those keys from
the files that hold them; every other file of the previous snapshot stays as it is. Finding
those rows reads only the key columns (plus unchanged-TOAST columns, when the changelog has
such markers) and Spark's file name and row index of the previous files. The mirror is written
whole instead on its first cut, after a truncate, and when the plan asks for it (compaction).
The previous files and the changelog segments are read as the columns at W, whatever schema each
was written under (:class:`~airflow_provider_streambed.staging.file_columns.FileColumns`).

A keyless mirror is merged as a multiset (:mod:`.spark_multiset`).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Mapping, Sequence
from functools import reduce
from operator import and_
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame, SparkSession, Window, WindowSpec
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import DataType, DateType, DecimalType, IntegralType, StringType, StructType

from airflow_provider_streambed.exceptions import RefreshError
from airflow_provider_streambed.read.spark_snapshot import DELETED_ROW, SnapshotScan, deleted_row, held_column, read_as
from airflow_provider_streambed.refresh.mirrors.merge_input import MirrorInput
from airflow_provider_streambed.refresh.mirrors.merge_output import MirrorOutput
from airflow_provider_streambed.refresh.mirrors.spark_multiset import multiset, net_rows
from airflow_provider_streambed.refresh.plan.keys import check_mirror_key
from airflow_provider_streambed.refresh.spark.checks import final_check
from airflow_provider_streambed.staging import (
    COMMIT_LSN,
    OP,
    OP_DELETE,
    OP_INSERT,
    OP_TRUNCATE,
    SEQ,
    TOAST_MARKER_PREFIX,
)
from airflow_provider_streambed.staging.file_columns import FileColumns

logger = logging.getLogger(__name__)

#: ``_op`` of rows taken from the previous cut (ordered before every change).
OP_PREVIOUS = "P"
#: Changelogs of up to this many rows have their changed keys broadcast to the joins against the
#: previous rows (no shuffle of the table), unless broadcasts are turned off; larger ones are shuffled.
BROADCAST_CHANGES = 250_000
BROADCAST_THRESHOLD = "spark.sql.autoBroadcastJoinThreshold"  # -1 (broadcasts off) is respected
#: First key columns whose range prunes the previous files: types whose values come back from
#: Spark to Python and go back as literals unchanged (timestamps would shift by the driver's zone).
RANGED_TYPES = (IntegralType, StringType, DecimalType, DateType)
#: Prefix of the column holding a marked column's earlier image while the last images are picked.
EARLIER_PREFIX = "__earlier_"
#: File size a mirror written whole over its previous files aims at (Spark's default split size).
TARGET_FILE_BYTES = 128 * 1024 * 1024


def merge_mirror(spark: SparkSession, source: MirrorInput) -> MirrorOutput:
    """The mirror's rows at W (whole or as changes to the previous snapshot), in source column order.

    Raises:
        SchemaChangeError: the key changed.
        RefreshError: the changelog cannot be read.
    """
    file_columns = FileColumns.of(source.capture)
    changes = _read_changelog(spark, source, file_columns)
    previous = SnapshotScan(spark, source.previous, file_columns) if source.previous.data else None
    check_mirror_key(source.group, source.capture, source.previous_key_columns)
    columns = list(source.capture.columns)
    markers = [name for name in columns if TOAST_MARKER_PREFIX + name in changes.columns]
    change_rows = changes.select(
        *columns,
        F.col(COMMIT_LSN).cast("long").alias(COMMIT_LSN),
        F.col(SEQ).cast("long").alias(SEQ),
        OP,
        *[F.col(TOAST_MARKER_PREFIX + name).cast("boolean") for name in markers],
    )
    if previous is not None and source.previous_watermark is not None:
        change_rows = change_rows.where(F.col(COMMIT_LSN) >= source.previous_watermark.value)
    key = [] if source.member.append_only else list(source.capture.key_columns)
    facts = _change_facts(change_rows, key)
    truncated_at = facts.truncated_at
    if truncated_at is not None:
        change_rows = change_rows.where(_after(truncated_at))
        previous = None
        logger.info("member=%s: truncate at (%s, %s) drops the previous rows", source.member.name, *truncated_at)
    change_rows = change_rows.where(F.col(OP) != OP_TRUNCATE)
    reason = _rewrite_reason(source, truncated_at is not None)
    few = source.capture.changes <= BROADCAST_CHANGES and spark.conf.get(BROADCAST_THRESHOLD) != "-1"
    keyless = source.capture.keyless and not source.member.append_only
    if keyless and previous is not None and not reason:
        return MirrorOutput(*net_rows(source, previous, change_rows, columns, few), True, "merge-on-read")
    if previous is not None and not reason:
        return _incremental(previous, change_rows, columns, key, markers, facts, few, source.capture.deleted_row_ids)
    whole = _previous_rows(previous.rows(), changes.schema, columns, markers) if previous is not None else None
    if keyless:
        rows = multiset(change_rows if whole is None else whole.unionByName(change_rows), columns)
    elif not key:
        appended = change_rows.where(F.col(OP) == OP_INSERT).select(*columns)
        rows = appended if whole is None else whole.select(*columns).unionByName(appended)
    else:
        rows = _merge_by_key(change_rows, whole, columns, key, markers, few)
    if previous is not None:  # a compaction: as many files as the size needs, not one per previous file
        rows = rows.coalesce(max(1, math.ceil(previous.data_bytes() / TARGET_FILE_BYTES)))
    return MirrorOutput(rows, None, False, reason)


def _rewrite_reason(source: MirrorInput, truncated: bool) -> str:
    """Why the mirror is written whole this run (empty: it is not)."""
    if not source.previous.data:
        return "first cut"
    if truncated:
        return "truncated"
    return source.rewrite


def _incremental(
    previous: SnapshotScan,
    change_rows: DataFrame,
    columns: list[str],
    key: list[str],
    markers: list[str],
    facts: _ChangeFacts,
    few: bool,
    field_ids: Mapping[str, int] | None,
) -> MirrorOutput:
    """New images of the changed keys, and position deletes of their previous rows.

    The previous rows are read only in the range of the changed keys' first key column (Parquet
    skips files and row groups outside it), and only their key and unchanged-TOAST columns. With
    ``field_ids`` (:attr:`~airflow_provider_streambed.staging.TableCapture.deleted_row_ids`) the
    deletes carry the deleted rows (:func:`_with_old_rows`).
    """
    if not key:
        return MirrorOutput(change_rows.where(F.col(OP) == OP_INSERT).select(*columns), None, True, "append-only")
    candidates = previous.rows([*key, *markers], positions=True)
    if facts.ranged:
        first = F.col(key[0])
        in_range = first.between(_bound(facts.low), _bound(facts.high)) if facts.low is not None else F.lit(False)
        candidates = candidates.where(in_range)
    touched = _key_join(candidates, change_rows, key, "left_semi", few)
    if markers:  # unchanged-TOAST values come from the previous rows of their keys
        earlier = _previous_rows(touched, change_rows.schema, columns, markers)
        images = _last_images(earlier.unionByName(change_rows), columns, key, markers)
    else:
        images = _last_images(change_rows, columns, key, markers)
    if field_ids is not None:
        touched = _with_old_rows(touched, change_rows, columns, key, field_ids)
    return MirrorOutput(images, previous.deletes_of(touched), True, "merge-on-read")


def _with_old_rows(touched: DataFrame, change_rows: DataFrame, columns: list[str], key: list[str],
                   field_ids: Mapping[str, int]) -> DataFrame:
    """The previous rows to delete (``touched``), each with its deleted row (:data:`DELETED_ROW`):
    its key's first change in the run, a delete of the whole old row (the capture's old images).
    Another first change fails the job (the capture's old images did not hold, which no retry
    mends); the in-process merge writes deletes without rows instead.

    The first changes are joined as Spark plans it (never forced to a broadcast: they carry whole
    rows)."""
    order, first_op = "__streambed_order", "__streambed_first_op"
    changed = {name: f"__streambed_changed_{name}" for name in key}
    firsts = change_rows.withColumn(order, F.row_number().over(Window.partitionBy(*key).orderBy(COMMIT_LSN, SEQ)))
    firsts = firsts.where(F.col(order) == 1).select(
        *[F.col(name).alias(alias) for name, alias in changed.items()], F.col(OP).alias(first_op),
        deleted_row(columns, field_ids).alias(DELETED_ROW))
    joined = touched.join(firsts, reduce(and_, [touched[name] == firsts[alias] for name, alias in changed.items()]))
    checked = F.when(F.col(first_op) == OP_DELETE, F.col(DELETED_ROW)).otherwise(final_check(
        "a changed key's first change in the run is not a delete of its whole old row, as the capture's old images "
        "promise: a bug; resync the member (streambed resync) to copy it again"))
    return joined.select(*touched.columns, checked.alias(DELETED_ROW))


def _bound(value: Any) -> Column:
    """A key range's bound as a literal. A date goes as its ISO text: PySpark would pass it through
    ``java.sql.Date``, which shifts dates before the Gregorian reform (1582) by days and refuses
    years below 1000 (PostgreSQL's ``-infinity`` is captured as 0001-01-01)."""
    plain_date = isinstance(value, dt.date) and not isinstance(value, dt.datetime)
    return F.lit(value.isoformat()).cast("date") if plain_date else F.lit(value)


def _read_changelog(spark: SparkSession, source: MirrorInput, columns: FileColumns) -> DataFrame:
    """The changelog segments, each read as the columns at W and the last segment's bookkeeping
    and marker columns (a segment from before an ``ALTER TABLE`` holds older ones)."""
    try:
        extra = from_arrow_schema(columns.changelog)
        frame = read_as(spark.read, columns, extra).parquet(*source.capture.files)
        return frame.select(*[held_column(columns, name) for name in [*columns.names, *extra.fieldNames()]])
    except Exception as error:  # Spark raises several unrelated classes for unreadable input
        raise RefreshError(
            f"group {source.group!r}, member {source.member.name!r}: cannot read the changelog of "
            f"{source.member.qualified_table!r}: {str(error).splitlines()[0]}"
        ) from error


class _ChangeFacts(NamedTuple):
    """What one pass over the changelog tells: the last truncate, and the first key column's range
    (``ranged``: known; ``low`` is ``None`` when there is no change)."""

    truncated_at: tuple[int, int] | None
    ranged: bool
    low: Any
    high: Any


def _change_facts(change_rows: DataFrame, key: Sequence[str]) -> _ChangeFacts:
    """The position ``(_commit_lsn, _seq)`` of the last truncate, the least and greatest value of
    ``key[0]`` among the changes (``None`` without a key or changes)."""
    aggregates = [F.max(F.when(F.col(OP) == OP_TRUNCATE, F.struct(COMMIT_LSN, SEQ))).alias("at")]
    ranged = bool(key) and isinstance(change_rows.schema[key[0]].dataType, RANGED_TYPES)
    if ranged:
        aggregates += [F.min(key[0]).alias("low"), F.max(key[0]).alias("high")]
    row = change_rows.agg(*aggregates).first()
    at = None if row is None else row["at"]
    low, high = (row["low"], row["high"]) if ranged and row is not None else (None, None)
    return _ChangeFacts(None if at is None else (int(at[0]), int(at[1])), ranged, low, high)


def _after(position: tuple[int, int]) -> Column:
    lsn, seq = position
    return (F.col(COMMIT_LSN) > lsn) | ((F.col(COMMIT_LSN) == lsn) & (F.col(SEQ) > seq))


def _previous_rows(
    previous: DataFrame, changes: StructType, columns: Sequence[str], markers: Sequence[str]
) -> DataFrame:
    """Previous rows shaped like changelog rows; columns added since (or not read) are null."""
    types: dict[str, DataType] = {column.name: column.dataType for column in changes.fields}
    present = set(previous.columns)
    return previous.select(
        *[F.col(name) if name in present else F.lit(None).cast(types[name]).alias(name) for name in columns],
        F.lit(-1).cast("long").alias(COMMIT_LSN),
        F.lit(0).cast("long").alias(SEQ),
        F.lit(OP_PREVIOUS).alias(OP),
        *[F.lit(False).alias(TOAST_MARKER_PREFIX + name) for name in markers],
    )


def _merge_by_key(
    change_rows: DataFrame,
    previous_rows: DataFrame | None,
    columns: list[str],
    key: list[str],
    markers: list[str],
    few: bool,
) -> DataFrame:
    """Previous rows of unchanged keys, plus the last images of the changed keys.

    A changed key's previous row is read (a second pass over the previous rows) only when an
    unchanged-TOAST marker may need its value; otherwise its last change decides alone.
    """
    if previous_rows is None:
        return _last_images(change_rows, columns, key, markers)
    untouched = _key_join(previous_rows, change_rows, key, "left_anti", few).select(*columns)
    if markers:
        change_rows = _key_join(previous_rows, change_rows, key, "left_semi", few).unionByName(change_rows)
    return untouched.unionByName(_last_images(change_rows, columns, key, markers))


def _key_join(rows: DataFrame, change_rows: DataFrame, key: list[str], how: str, few: bool) -> DataFrame:
    """``rows`` whose key is (``left_semi``) or is not (``left_anti``) among the changed keys.

    Keys compare with plain equality: a key (a primary key or a replica identity index) has no
    null. With ``few`` changes the keys are broadcast (no shuffle of ``rows``).
    """
    changed = change_rows.select(*[F.col(name).alias(f"_changed_{name}") for name in key])
    if not few:  # a semi or anti join needs no distinct keys; it only shrinks what a shuffle moves
        changed = changed.distinct()
    condition = reduce(and_, [rows[name] == changed[f"_changed_{name}"] for name in key])
    return rows.join(F.broadcast(changed) if few else changed, condition, how)


def _last_images(rows: DataFrame, columns: list[str], key: list[str], markers: list[str]) -> DataFrame:
    """The last image of every key (ordered by ``(_commit_lsn, _seq)``), deletes dropped.

    Unchanged-TOAST values are resolved on the last images only: a marked row that a later change
    of its key replaces needs no value, even one no earlier image holds.
    """
    ordered = Window.partitionBy(*key).orderBy(COMMIT_LSN, SEQ)
    history = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    staged = rows.select(
        *columns,
        *[_marker(name).alias(TOAST_MARKER_PREFIX + name) for name in markers],
        *[_earlier_image(name, history).alias(EARLIER_PREFIX + name) for name in markers],
        F.col(OP),
        F.lead(F.col(OP)).over(ordered).alias("_next_op"),
    )
    last = staged.where(F.col("_next_op").isNull() & (F.col(OP) != OP_DELETE))
    return last.select(*[_resolve_toast(name).alias(name) if name in markers else F.col(name) for name in columns])


def _marker(name: str) -> Column:
    return F.coalesce(F.col(TOAST_MARKER_PREFIX + name), F.lit(False))


def _earlier_image(name: str, history: WindowSpec) -> Column:
    """The column's value in the key's latest unmarked row up to this one, wrapped in a struct (so a
    real null still counts as a value) with whether that row is a delete."""
    image = F.struct(F.col(name).alias("v"), (F.col(OP) == OP_DELETE).alias("deleted"))
    return F.last(F.when(~_marker(name), image), ignorenulls=True).over(history)


def _resolve_toast(name: str) -> Column:
    """The column's value, taken from the earlier image when the row marks it unchanged.

    A marker with no earlier image fails the job rather than writing a silent null. A delete of the
    key is no image: after it, the marked row is another row moved onto the key (its value is that
    row's, which the changelog does not name), so it fails too.
    """
    earlier = F.col(EARLIER_PREFIX + name)
    unresolved = final_check(f"unchanged-TOAST value of column {name!r} has no earlier image of its key (previous "
                             "cut or changelog); resync the member (streambed resync) to copy it again")
    resolved = F.when(earlier.isNull() | earlier["deleted"], unresolved).otherwise(earlier["v"])
    return F.when(~F.col(TOAST_MARKER_PREFIX + name), F.col(name)).otherwise(resolved)
