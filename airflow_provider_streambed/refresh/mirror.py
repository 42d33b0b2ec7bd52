"""Mirror merge: a source table's rows at W from the previous cut's files plus the changelog.

New state = previous cut's rows + changes in ``[W_prev, W)``: the last image per key ordered by
``(_commit_lsn, _seq)`` wins, deletes remove, a truncate removes every earlier row, and
unchanged-TOAST markers take the value of the key's previous image. Rows whose key has no change
are passed through without a sort (an anti join against the changed keys, broadcast by
Spark when they are small), so the cost
of the sort grows with the changes; the output is still a full rewrite of the table's files.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession, Window, WindowSpec
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from airflow_provider_streambed.declarations import Mirror
from airflow_provider_streambed.exceptions import RefreshError
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.refresh.schema import check_mirror_schema
from airflow_provider_streambed.staging import (
    COMMIT_LSN,
    OP,
    OP_DELETE,
    OP_INSERT,
    OP_TRUNCATE,
    SEQ,
    TOAST_MARKER_PREFIX,
    TableCapture,
)

logger = logging.getLogger(__name__)

#: ``_op`` of rows taken from the previous cut (ordered before every change).
OP_PREVIOUS = "P"


@dataclass(frozen=True, slots=True)
class MirrorInput:
    """What one mirror's merge reads.

    Attributes:
        group: the group's name (for messages).
        member: the mirror declaration.
        capture: the run's changelog of the mirrored table.
        previous_files: Parquet files of the mirror in the previous cut (empty before the first).
        previous_key_columns: the mirror's key in the previous cut (empty: not known).
        previous_watermark: the previous cut's W. Changes committed before it are in the previous
            files already: a capture that began before that cut was published replays them, and
            they are dropped (an append-only mirror would otherwise hold them twice).
    """

    group: str
    member: Mirror
    capture: TableCapture
    previous_files: tuple[str, ...] = ()
    previous_key_columns: tuple[str, ...] = ()
    previous_watermark: Lsn | None = None


def merge_mirror(spark: SparkSession, source: MirrorInput) -> DataFrame:
    """The mirror's rows at W, with the source table's columns in source order.

    Raises:
        SchemaChangeError: a column was dropped, changed type, or the key changed.
        RefreshError: the changelog cannot be read or misses declared columns.
    """
    changes = _read_changelog(spark, source)
    previous = spark.read.parquet(*source.previous_files) if source.previous_files else None
    check_mirror_schema(
        f"group {source.group!r}, member {source.member.name!r}, table {source.member.qualified_table!r}",
        previous.schema if previous is not None else None,
        changes.schema,
        source.capture,
        source.previous_key_columns,
    )
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
    truncated_at = _last_truncate(change_rows)
    if truncated_at is not None:
        change_rows = change_rows.where(_after(truncated_at))
        previous = None
        logger.info("member=%s: truncate at (%s, %s) drops the previous rows", source.member.name, *truncated_at)
    change_rows = change_rows.where(F.col(OP) != OP_TRUNCATE)
    previous_rows = _previous_rows(previous, changes.schema, columns, markers) if previous is not None else None
    if source.member.append_only or not source.capture.key_columns:
        appended = change_rows.where(F.col(OP) == OP_INSERT).select(*columns)
        return appended if previous_rows is None else previous_rows.select(*columns).unionByName(appended)
    return _merge_by_key(change_rows, previous_rows, columns, list(source.capture.key_columns), markers)


def _read_changelog(spark: SparkSession, source: MirrorInput) -> DataFrame:
    try:
        return spark.read.option("mergeSchema", "true").parquet(*source.capture.files)
    except Exception as error:  # Spark raises several unrelated classes for unreadable input
        raise RefreshError(
            f"group {source.group!r}, member {source.member.name!r}: cannot read the changelog of "
            f"{source.member.qualified_table!r}: {str(error).splitlines()[0]}"
        ) from error


def _last_truncate(change_rows: DataFrame) -> tuple[int, int] | None:
    row = change_rows.where(F.col(OP) == OP_TRUNCATE).agg(F.max(F.struct(COMMIT_LSN, SEQ)).alias("at")).first()
    if row is None or row["at"] is None:
        return None
    return int(row["at"][0]), int(row["at"][1])


def _after(position: tuple[int, int]) -> Column:
    lsn, seq = position
    return (F.col(COMMIT_LSN) > lsn) | ((F.col(COMMIT_LSN) == lsn) & (F.col(SEQ) > seq))


def _previous_rows(
    previous: DataFrame, changes: StructType, columns: Sequence[str], markers: Sequence[str]
) -> DataFrame:
    """Previous rows shaped like changelog rows; columns added since are null."""
    types: dict[str, DataType] = {field.name: field.dataType for field in changes.fields}
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
) -> DataFrame:
    if previous_rows is None:
        return _last_images(change_rows, columns, key, markers)
    changed_keys = change_rows.select(*key).distinct()
    untouched = previous_rows.join(changed_keys, on=key, how="left_anti").select(*columns)
    touched = previous_rows.join(changed_keys, on=key, how="left_semi")
    return untouched.unionByName(_last_images(touched.unionByName(change_rows), columns, key, markers))


def _last_images(rows: DataFrame, columns: list[str], key: list[str], markers: list[str]) -> DataFrame:
    """The last image of every key (ordered by ``(_commit_lsn, _seq)``), deletes dropped."""
    ordered = Window.partitionBy(*key).orderBy(COMMIT_LSN, SEQ)
    history = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    resolved = [_resolve_toast(name, history) if name in markers else F.col(name) for name in columns]
    staged = rows.select(
        *[value.alias(name) for value, name in zip(resolved, columns, strict=True)],
        F.col(OP),
        F.lead(F.col(OP)).over(ordered).alias("_next_op"),
    )
    return staged.where(F.col("_next_op").isNull() & (F.col(OP) != OP_DELETE)).select(*columns)


def _resolve_toast(name: str, history: WindowSpec) -> Column:
    """The column's value, taken from the latest earlier image when the row marks it unchanged.

    The value is wrapped in a struct so a real null in an earlier image still counts as a value;
    a marker with no earlier image fails the job rather than writing a silent null.
    """
    marker = F.coalesce(F.col(TOAST_MARKER_PREFIX + name), F.lit(False))
    earlier = F.last(F.when(~marker, F.struct(F.col(name).alias("v"))), ignorenulls=True).over(history)
    unresolved = F.raise_error(
        F.lit(f"unchanged-TOAST value of column {name!r} has no earlier image of its key (previous cut or changelog)")
    )
    return F.when(~marker, F.col(name)).when(earlier.isNull(), unresolved).otherwise(earlier["v"])
