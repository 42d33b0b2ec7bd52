"""The Spark lines the refresh job and the readers support, 3.5 to 4.3, and what differs between them.

:class:`SparkLine` is read once per session from ``spark.version`` (classic Spark and Spark
Connect alike: Connect reports the server's); the job logs it. Where a line lacks a feature the
job needs, this module says so and what to do:

- PostgreSQL ``time`` (Parquet ``TIME``): Spark reads and writes it from 4.1 on (the job turns
  ``spark.sql.timeType.enabled`` on). Before that Spark cannot touch a ``time`` column at all, so
  a member Spark would compute over one fails *final* (:func:`check_columns`), naming member,
  column, Spark version and fix: no retry on that Spark can succeed. The in-process merge in the
  worker is not Spark's and mirrors such a column on any line.
- A Spark Connect DataFrame is a ``pyspark.sql.DataFrame`` from 4.0 on; on 3.5 it is a class of
  its own (:func:`is_dataframe` knows both).
- Collecting a small result as Arrow (``DataFrame.toArrow``) and making a DataFrame of an Arrow
  table (``createDataFrame(pa.Table)``) are 4.0's; on 3.5 :func:`to_arrow` and :func:`arrow_frame`
  go through Python rows with the same Spark schema (public API; slower, used for small tables).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from airflow_provider_streambed.exceptions import FinalRefreshError

#: The oldest and the newest Spark line the job supports and the suite runs (README's matrix).
SUPPORTED = ((3, 5), (4, 3))
#: The first line that reads and writes Parquet ``TIME`` (PostgreSQL ``time``).
TIME_TYPE_SINCE = (4, 1)
#: Whether this pyspark (the client: the conversion is its own) has ``DataFrame.toArrow`` and
#: ``createDataFrame`` of an Arrow table, both 4.0's.
ARROW_TABLES = hasattr(DataFrame, "toArrow")


@dataclass(frozen=True)
class SparkLine:
    """The Spark a session runs.

    Attributes:
        version: what ``spark.version`` reports (a vendor's suffix kept: ``3.5.1-amzn-0``).
    """

    version: str

    @classmethod
    def of(cls, spark: SparkSession) -> SparkLine:
        """The line ``spark`` runs (one request on Spark Connect)."""
        return cls(spark.version)

    @property
    def release(self) -> tuple[int, int]:
        """``(major, minor)``: ``(3, 5)`` for ``3.5.1-amzn-0``."""
        found = re.match(r"(\d+)\.(\d+)", self.version)
        if found is None:
            raise ValueError(f"not a Spark version: {self.version!r}")
        return int(found[1]), int(found[2])

    @property
    def supported(self) -> bool:
        """Whether the line is in the range the job is tested on (:data:`SUPPORTED`)."""
        return SUPPORTED[0] <= self.release <= SUPPORTED[1]

    @property
    def has_time_type(self) -> bool:
        """Whether this Spark reads and writes ``time`` columns."""
        return self.release >= TIME_TYPE_SINCE

    def describe(self) -> str:
        """One log line: the version and what the job does differently on it."""
        notes = [] if self.supported else [f"outside the tested range {_line(SUPPORTED[0])}-{_line(SUPPORTED[1])}"]
        if not self.has_time_type:
            notes.append("no time type: members Spark computes over a time column fail final")
        return f"Spark {self.version}" + (f" ({'; '.join(notes)})" if notes else "")


def time_columns(schema: pa.Schema) -> list[str]:
    """The columns of ``schema`` that hold a ``time`` (PostgreSQL ``time``: Arrow ``time64``)."""
    return [field.name for field in schema if pa.types.is_time(field.type)]


def check_columns(line: SparkLine, schema: pa.Schema, source: str, fix_table: str) -> None:
    """Refuse, as final, to have ``line`` read columns of ``schema`` it cannot handle.

    Args:
        line: the session's Spark.
        schema: the columns Spark would read (Arrow types, as the changelog or files hold them).
        source: what holds them, for the message (``"mirror 'readings'"``).
        fix_table: the source table whose column type the fix changes (``schema.table``).

    Raises:
        FinalRefreshError: a ``time`` column on a Spark before 4.1.
    """
    if line.has_time_type:
        return
    columns = time_columns(schema)
    if columns:
        column = columns[0]
        raise FinalRefreshError(
            f"column {column!r} of {source} is a PostgreSQL time, which Spark {line.version} cannot read "
            f"(Spark has a time type from {_line(TIME_TYPE_SINCE)} on; columns of the kind here: {columns}). "
            f"Fix: run the group's Spark on {_line(TIME_TYPE_SINCE)} or later, or change the column's type at "
            f"the source (for example ALTER TABLE {fix_table} ALTER COLUMN {column} TYPE text) and resync")


def is_dataframe(value: object) -> bool:
    """Whether ``value`` is a DataFrame, of classic Spark or of Spark Connect."""
    if isinstance(value, DataFrame):
        return True
    try:
        from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame
    except ImportError:  # 3.5 without its connect extra's packages: no Connect DataFrame can exist
        return False
    return isinstance(value, ConnectDataFrame)


def to_arrow(frame: DataFrame) -> pa.Table:
    """``frame``'s rows as an Arrow table (collected: for small results)."""
    if ARROW_TABLES:
        return frame.toArrow()
    rows = [row.asDict(recursive=True) for row in frame.collect()]
    return pa.Table.from_pylist(rows, schema=to_arrow_schema(frame.schema))


def arrow_frame(spark: SparkSession, table: pa.Table) -> DataFrame:
    """A DataFrame of ``table``'s rows, with the Spark types of its Arrow types."""
    if ARROW_TABLES:
        return spark.createDataFrame(table)
    return spark.createDataFrame(table.to_pylist(), schema=from_arrow_schema(table.schema))


def _line(release: tuple[int, int]) -> str:
    return ".".join(map(str, release))
