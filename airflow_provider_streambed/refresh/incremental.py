"""Incremental derived members: a member's previous output and its sources' changes at W.

Inside the Spark job a source's changes of this run are the facts the change feed reads from
published snapshots (:mod:`airflow_provider_streambed.feed.snapshots`), taken from the source's
staged output instead: an incremental output's new data files are the rows added (less the rows
its own deletes remove), its position deletes name the rows removed from the previous snapshot's
files (only those files are read). A carried source changed nothing. A source written whole this
run (its first cut, a compaction, a resync) or whose columns changed gives no such facts: the
member is then computed whole, and :func:`incremental_basis` says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from airflow_provider_streambed.spark_snapshot import ROW_FILE, ROW_POS, SnapshotScan
from airflow_provider_streambed.staging import DELETE_FILE_PATH, DELETE_POS, JobSpec, MemberManifest, SnapshotFiles
from airflow_provider_streambed.staging.file_columns import FileColumns
from airflow_provider_streambed.staging.file_names import file_names


@dataclass(frozen=True, slots=True)
class Changes:
    """The rows a source lost and gained between the previous cut and W, as multisets: the
    source at W is its rows in the previous cut less ``removed`` plus ``added``. Not necessarily
    net: a row updated to the same values is in both."""

    removed: DataFrame
    added: DataFrame


@dataclass(frozen=True, slots=True)
class SourceState:
    """What the job knows of one source of a derived member at W.

    Attributes:
        previous: the files of its snapshot in the previous cut.
        staged: its output staged for W (``None``: carried over, unchanged).
        columns: its columns at W when its files may hold older schemas (a mirror).
        reshaped: its columns changed this run (a mirror whose source table's columns changed).
    """

    previous: SnapshotFiles
    staged: MemberManifest | None
    columns: FileColumns | None = None
    reshaped: bool = False

    @property
    def files(self) -> SnapshotFiles:
        """The source's files at W."""
        return self.previous if self.staged is None else self.previous.then(self.staged)


def whole_reason(name: str, source: SourceState) -> str | None:
    """Why source ``name`` gives no changes for this run, or ``None`` when it does."""
    if source.reshaped:
        return f"its source {name!r} changed its columns"
    if not source.previous.data:
        return f"its source {name!r} has no files in the previous cut"
    if source.staged is not None and not source.staged.incremental:
        return f"its source {name!r} was written whole ({source.staged.reason or 'a whole write'})"
    return None


def source_changes(spark: SparkSession, source: SourceState) -> Changes:
    """The source's rows removed and added this run (the source must give changes: see :func:`whole_reason`)."""
    before = SnapshotScan(spark, source.previous, source.columns)
    staged = source.staged
    empty = before.rows().limit(0)
    if staged is None:
        return Changes(empty, empty)
    added = (SnapshotScan(spark, SnapshotFiles(staged.files, staged.delete_files), source.columns).rows()
             if staged.files else empty)
    return Changes(_removed(spark, source.previous, staged, source.columns) if staged.delete_files else empty, added)


def _removed(spark: SparkSession, previous: SnapshotFiles, staged: MemberManifest,
             columns: FileColumns | None) -> DataFrame:
    """The rows of ``previous`` at the positions ``staged``'s delete files name, read from the
    files they name only."""
    positions = spark.read.parquet(*staged.delete_files).select(
        F.substring_index(F.col(DELETE_FILE_PATH), "/", -1).alias(ROW_FILE), F.col(DELETE_POS).alias(ROW_POS))
    named = {row[0] for row in positions.select(ROW_FILE).distinct().collect()}
    files = tuple(uri for name, uri in file_names(previous.data).items() if name in named)
    if not files:
        return SnapshotScan(spark, previous, columns).rows().limit(0)
    scan = SnapshotScan(spark, SnapshotFiles(files, previous.deletes, previous.copies), columns)
    return scan.rows(positions=True).join(positions, [ROW_FILE, ROW_POS], "left_semi").drop(ROW_FILE, ROW_POS)


def incremental_basis(
    spark: SparkSession, spec: JobSpec, member: str, sources: Mapping[str, SourceState]
) -> tuple[DataFrame, dict[str, Changes]] | str:
    """Member ``member``'s output in the previous cut and its sources' changes, or why the member
    must be computed whole this run."""
    if member not in spec.incremental:
        return "no previous output of its definition (its first cut, or its definition changed)"
    previous = spec.previous_snapshot(member)
    if not previous.data:
        return "its snapshot in the previous cut has no files"
    for name, source in sources.items():
        if (reason := whole_reason(name, source)) is not None:
            return reason
    changes = {name: source_changes(spark, source) for name, source in sources.items()}
    return SnapshotScan(spark, previous).rows(), changes
