"""Derived members: Spark SQL and PySpark functions over other members of the same run.

Both read their sources at W: the run's staged outputs (on top of the previous cut's snapshot
for a merge-on-read mirror) or, for a source carried over, its previous snapshot; so a derived
member sees exactly the same W as the mirrors it reads, also when a retry skipped those mirrors.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from airflow_provider_streambed.compat.spark import is_dataframe, to_arrow
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import MemberQueryError, RefreshError
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.member_declarations import PythonMember, SqlMember
from airflow_provider_streambed.read.spark_snapshot import SnapshotScan
from airflow_provider_streambed.refresh.derived.incremental import Changes
from airflow_provider_streambed.refresh.derived.query_shape import analyzed_plan
from airflow_provider_streambed.staging import SnapshotFiles
from airflow_provider_streambed.staging.file_columns import FileColumns
from airflow_provider_streambed.staging.members import MAX_COLLECTED_ROWS, row_count

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CutContext:
    """What a PythonMember's function knows about the cut it computes.

    Attributes:
        group: the group declaration.
        watermark: W of this run.
        prev_watermark: W of the previous cut (``None`` before the first).
        cut_number: the number the cut will get if published.
        previous: an incremental member's output in the previous cut, when it may update it
            (``None``: compute the output whole from ``inputs``).
        changes: with ``previous``, per source name the rows it lost and gained since the
            previous cut (:class:`~airflow_provider_streambed.refresh.derived.incremental.Changes`).
    """

    group: RefreshGroup
    watermark: Lsn
    prev_watermark: Lsn | None
    cut_number: int
    previous: DataFrame | None = None
    changes: Mapping[str, Changes] = field(default_factory=dict)


def read_sources(
    spark: SparkSession, files: Mapping[str, SnapshotFiles], columns: Mapping[str, FileColumns] | None = None
) -> dict[str, DataFrame]:
    """The sources' rows at W (member name -> its files at W) as DataFrames of ``spark``; a mirror's
    files read as its ``columns`` at W (by member name: its files may hold older schemas)."""
    return {name: SnapshotScan(spark, snapshot, (columns or {}).get(name)).rows() for name, snapshot in files.items()}


@contextmanager
def bound_query(
    spark: SparkSession, group: RefreshGroup, member: SqlMember, frames: Mapping[str, DataFrame]
) -> Iterator[DataFrame]:
    """The member's query over ``frames`` (its sources' rows, :func:`read_sources`) bound as
    temporary views of their names, until the block ends.

    Only the declared sources are visible as tables: the views exist while the block computes
    (and stages) this member, and are dropped after it, also on Spark Connect (which has no
    ``newSession``).

    Raises:
        MemberQueryError: (final) the query does not bind: it names a table that is not one of
            the member's sources, or a column they do not have.
    """
    for name, frame in frames.items():
        frame.createOrReplaceTempView(name)
    try:
        yield _run_query(spark, group, member)
    finally:
        for name in frames:
            spark.catalog.dropTempView(name)


def detached(frame: DataFrame) -> DataFrame:
    """``frame``, made in a :func:`bound_query` block, usable after the block: as it is on a classic
    session, which resolved the views when it made it; computed now and held on Spark Connect, whose
    query reads its views when it runs."""
    return frame if analyzed_plan(frame) is not None else frame.localCheckpoint()


def collected(frame: DataFrame, previous: SnapshotFiles) -> DataFrame | pa.Table:
    """A member's output ``frame`` to stage: collected as an Arrow table when its ``previous``
    output and ``frame`` have at most :data:`MAX_COLLECTED_ROWS` rows, else as it is (staged by a
    Spark write, which computes it again if it was collected and found larger), as it is also
    when this process cannot read the previous output's footers (a store only Spark has the
    credentials of). Both stage the same columns, types and nullability."""
    try:
        if not previous.data or row_count(previous.data) > MAX_COLLECTED_ROWS:
            return frame
    except OSError as error:
        logger.debug("the previous output's size is not known here (%s): its output is written by Spark", error)
        return frame
    table = to_arrow(frame.limit(MAX_COLLECTED_ROWS + 1))
    return frame if table.num_rows > MAX_COLLECTED_ROWS else table


def _run_query(spark: SparkSession, group: RefreshGroup, member: SqlMember) -> DataFrame:
    try:
        return spark.sql(member.query)
    except AnalysisException as error:
        where = f"group {group.name!r}, member {member.name!r}"
        relation = _missing_relation(error)
        if relation is None:
            raise MemberQueryError(f"{where}: its query does not bind to its sources (did a source's columns "
                                   f"change?); fix the query: {first_lines(error)}") from error
        known = {m.name.lower() for m in group.members}
        reason = (
            "is a member of the group but not among the member's sources (add it to sources)"
            if relation.lower() in known
            else "is not a member of the group (SQL members read only members of their group)"
        )
        raise MemberQueryError(f"{where}: query reads table {relation!r}, which {reason}") from error


def _missing_relation(error: AnalysisException) -> str | None:
    condition = error.getCondition()
    if condition not in ("TABLE_OR_VIEW_NOT_FOUND", "TABLE_OR_VIEW_NOT_FOUND.WITH_SUGGESTION"):
        return None
    relation = (error.getMessageParameters() or {}).get("relationName", "")
    return relation.replace("`", "") or None


def compute_python_member(
    spark: SparkSession,
    group: RefreshGroup,
    member: PythonMember,
    source_files: Mapping[str, SnapshotFiles],
    cut: CutContext,
    columns: Mapping[str, FileColumns] | None = None,
) -> DataFrame:
    """Call the member's ``module:function(spark, inputs, cut)`` and check it returns a DataFrame.

    Raises:
        RefreshError: the function cannot be imported or returns something else.
    """
    where = f"group {group.name!r}, member {member.name!r}"
    function = load_callable(member.callable_path, where)
    result = function(spark, read_sources(spark, source_files, columns), cut)
    if not is_dataframe(result):
        raise RefreshError(
            f"{where}: {member.callable_path} returned {type(result).__name__}, expected a pyspark DataFrame"
        )
    return result


def load_callable(path: str, where: str) -> Callable[..., Any]:
    """Import ``package.module:function``.

    Raises:
        RefreshError: the module or function cannot be imported, or it is not callable.
    """
    module_name, _, attribute = path.partition(":")
    try:
        function = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise RefreshError(f"{where}: cannot import {path!r}: {error}") from error
    if not callable(function):
        raise RefreshError(f"{where}: {path!r} is not callable")
    return function


class Failure(NamedTuple):
    """Why a member failed: its error's first lines, and whether the error is final (no retry of
    the run can compute the member)."""

    message: str
    final: bool


def first_lines(error: BaseException, limit: int = 3) -> str:
    """The first meaningful lines of an error (Spark's JVM stack traces and blank lines dropped)."""
    lines = []
    for raw in str(error).splitlines():
        line = raw.strip()
        if line.startswith(("at ", "JVM stacktrace", "Traceback", "...")) or line.startswith('File "'):
            break
        if line:
            lines.append(line)
        if len(lines) == limit:
            break
    return f"{type(error).__name__}: {' | '.join(lines) or repr(error)}"
