"""Incremental derived members in Spark: a member's previous output and its sources' changes at W.

The changes are read in the driver's process (:mod:`.sources`) and handed to Spark as
DataFrames. A source that gives no changes (:func:`.sources.whole_reason`) has the member
computed whole, and :func:`incremental_basis` says why (so does a full refresh,
:data:`.sources.INCREMENTAL_CONF`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from airflow_provider_streambed.compat.spark import arrow_frame
from airflow_provider_streambed.read.spark_snapshot import SnapshotScan
from airflow_provider_streambed.refresh.derived.sources import SourceState, basis_reason, removed_rows
from airflow_provider_streambed.staging import JobSpec, SnapshotFiles


@dataclass(frozen=True, slots=True)
class Changes:
    """The rows a source lost and gained between the previous cut and W, as multisets: the
    source at W is its rows in the previous cut less ``removed`` plus ``added``. Not necessarily
    net: a row updated to the same values is in both. ``any_removed`` (``any_added``) is false
    when the run is known to have removed (added) no row: no delete file (no new data file), so
    a query over that side can be skipped."""

    removed: DataFrame
    added: DataFrame
    any_removed: bool = True
    any_added: bool = True


def source_changes(spark: SparkSession, source: SourceState, names: list[str] | None = None) -> Changes:
    """The source's rows removed and added this run, with its columns ``names`` (default: all; the
    source must give changes: see :func:`.sources.whole_reason`)."""
    staged = source.staged
    added = (SnapshotScan(spark, SnapshotFiles(staged.files, staged.delete_files), source.columns).rows(names)
             if staged is not None and staged.files else None)
    rows = removed_rows(source.previous, staged.delete_files, source.columns, names) if staged is not None else None
    removed = None if rows is None else arrow_frame(spark, rows)
    like = added if added is not None else removed
    if like is None:
        like = SnapshotScan(spark, source.previous, source.columns).rows(names)
    if removed is not None:  # read by pyarrow: Spark's types of the columns, as its read of the files gives them
        removed = removed.select(*[F.col(field.name).cast(field.dataType) for field in like.schema.fields])
    empty = like.limit(0)
    return Changes(empty if removed is None else removed, empty if added is None else added,
                   removed is not None, added is not None)


def incremental_basis(
    spark: SparkSession, spec: JobSpec, member: str, sources: Mapping[str, SourceState],
    read: Mapping[str, list[str]] | None = None,
) -> tuple[DataFrame, dict[str, Changes]] | str:
    """Member ``member``'s output in the previous cut and its sources' changes (with the columns
    ``read`` names per source, default all), or why the member must be computed whole this run."""
    if (reason := basis_reason(spark.conf, spec, member, sources)) is not None:
        return reason
    changes = {name: source_changes(spark, source, None if read is None else read[name])
               for name, source in sources.items()}
    return SnapshotScan(spark, spec.previous_snapshot(member)).rows(), changes
