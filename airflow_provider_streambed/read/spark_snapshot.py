"""Reading a member snapshot's files in Spark, its Iceberg position deletes applied.

Spark reads plain Parquet lists; an Iceberg snapshot is data files minus the rows its position
delete files name by ``(file_path, pos)``. :class:`SnapshotScan` reads the data files with
Spark's ``_metadata.file_name`` and ``_metadata.row_index`` (the row's position in its file, the
``pos`` of an Iceberg delete) and anti-joins the deletes. A delete names its file by *name*
(Spark reports a file's path in its own URI form, ``file:/w/a%20b/f.parquet`` for
``file:///w/a b/f.parquet``); the names of a member table's files are unique (every Spark write
names its files with its own UUID), and :class:`SnapshotScan` refuses files whose names are not
unique or would be URL-encoded. The join itself is on one ``long`` per row, the file's ordinal in
the scan and the row's position (:func:`row_key`): Spark probes a hash table of longs for far less
than one of (string, long) pairs. Only the rows of files that a delete names are probed.
:meth:`SnapshotScan.deletes_of` turns rows read with their positions into position-delete rows
with the Iceberg field ids, for a new delete file. Files written under older schemas of the
member (a column since dropped, renamed, added or widened) are read as its columns at W when the
scan is given them (:class:`~airflow_provider_streambed.staging.file_columns.FileColumns`): Spark
reads the files with those columns and every older name of each, as its type at W, and takes
each column under the name its file holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructField, StructType

from airflow_provider_streambed import storage
from airflow_provider_streambed.exceptions import RefreshError
from airflow_provider_streambed.staging import (
    DELETE_FIELD_IDS,
    DELETE_FILE_PATH,
    DELETE_POS,
    DELETE_ROW,
    SnapshotFiles,
)
from airflow_provider_streambed.staging.file_columns import FileColumns
from airflow_provider_streambed.staging.file_names import file_names
from airflow_provider_streambed.staging.iceberg_fields import DELETE_ROW_FIELD_ID

#: Spark 4.2 reads Parquet ``TIME`` columns (PostgreSQL ``time``) only with this setting on.
TIME_TYPE_CONF = "spark.sql.timeType.enabled"
#: Columns :meth:`SnapshotScan.rows` adds with ``positions=True``: the row's file name and position.
ROW_FILE, ROW_POS = "_row_file", "_row_pos"
#: The column a scan with deletes joins on: :func:`row_key`.
ROW_KEY = "_row_key"
#: The column a deleted row's values (:func:`deleted_row`) travel under until :func:`with_field_ids`
#: names it ``row`` (a name of the streambed's own: a table may have a column named ``row``).
DELETED_ROW = "__streambed_deleted_row"
#: The Spark field metadata key its Parquet writer takes a field id from.
FIELD_ID_KEY = "parquet.field.id"
#: The columns of a position-delete file a scan reads (not the deleted rows some files carry).
DELETE_READ_SCHEMA = f"{DELETE_FILE_PATH} string, {DELETE_POS} long"
#: A row's position takes the low bits of :data:`ROW_KEY`; its file's ordinal the bits above.
POSITION_BITS = 40


def with_field_ids(frame: DataFrame) -> DataFrame:
    """``(file_path, pos)`` rows, and their ``row`` when ``frame`` carries one (:data:`DELETED_ROW`),
    with the Iceberg field ids Spark writes into the Parquet schema."""
    carried = [F.col(DELETED_ROW).alias(DELETE_ROW, metadata={FIELD_ID_KEY: DELETE_ROW_FIELD_ID})
               ] if DELETED_ROW in frame.columns else []
    return frame.select(*[
        F.col(name).cast("string" if name == DELETE_FILE_PATH else "long").alias(
            name, metadata={FIELD_ID_KEY: field_id}
        )
        for name, field_id in DELETE_FIELD_IDS.items()
    ], *carried)


def deleted_row(columns: list[str], field_ids: Mapping[str, int]) -> Column:
    """A position delete's ``row``: the ``columns`` of a deleted row, each with its Iceberg field id."""
    return F.struct(*[F.col(name).alias(name, metadata={FIELD_ID_KEY: field_ids[name]}) for name in columns])


class SnapshotScan:
    """The live rows of a snapshot's files (deletes applied), optionally with their positions.

    Args:
        spark: the session; :data:`TIME_TYPE_CONF` is turned on in it (a ``time`` column needs it).
        files: the snapshot's data and delete files; at least one data file.
        columns: the member's columns at W, when its files may hold older schemas (default: the
            files share one schema, read as it is).
    """

    def __init__(self, spark: SparkSession, files: SnapshotFiles, columns: FileColumns | None = None) -> None:
        if not files.data:
            raise RefreshError("a snapshot scan needs at least one data file")
        spark.conf.set(TIME_TYPE_CONF, "true")
        self.spark = spark
        self.files = files
        self._names = file_names(files.data) if files.deletes else {}
        self._data, self._deletes = files.readable()  # local copies of files Spark cannot reach
        # Where Spark reads the files in place on an object store, their sizes and the deletes'
        # file names are not read from here (no credentials): every file is probed, found by name.
        self._local = all(storage.is_local(uri) for uri in (*self._data, *self._deletes))
        self._sizes = _sizes(self._data) if files.deletes and self._local else None
        self._probed = (_named_files(self._deletes) if self._local else set(self._names)) & set(self._names)
        self._columns = columns
        self._frame = read_as(spark.read, columns).parquet(*self._data)

    @property
    def columns(self) -> list[str]:
        """The data columns."""
        return self._columns.names if self._columns is not None else self._frame.columns

    def data_bytes(self) -> int:
        """The size of the data files (one metadata request per file)."""
        return sum(self._sizes if self._sizes is not None else _sizes(self._data))

    def rows(self, columns: list[str] | None = None, positions: bool = False) -> DataFrame:
        """Live rows (``columns``, default all), with ``_row_file`` and ``_row_pos`` when ``positions``."""
        names = columns if columns is not None else self.columns
        selected: list[str | Column] = [self._column(name) for name in names]
        if positions:
            selected += [F.col("_metadata.file_name").alias(ROW_FILE), F.col("_metadata.row_index").alias(ROW_POS)]
        if not self._probed:  # no deletes, or none that names a file of the scan
            return self._frame.select(*selected)
        data_names = list(self._names)
        frame = self._frame.select(*selected, row_key(data_names, self._sizes, self._probed).alias(ROW_KEY))
        named = F.substring_index(F.col(DELETE_FILE_PATH), "/", -1)
        ordinal = _first_match([(named == name, at) for at, name in enumerate(data_names) if name in self._probed])
        deleted = self.spark.read.schema(DELETE_READ_SCHEMA).parquet(*self._deletes).select(
            (F.shiftleft(ordinal, POSITION_BITS) + F.col(DELETE_POS)).alias(ROW_KEY)).where(F.col(ROW_KEY).isNotNull())
        return frame.join(deleted, ROW_KEY, "left_anti").drop(ROW_KEY)

    def _column(self, name: str) -> Column:
        return held_column(self._columns, name)

    def deletes_of(self, rows: DataFrame) -> DataFrame:
        """Position-delete rows (``file_path``, ``pos``, with field ids) for ``rows`` read with
        positions, with their ``row`` when ``rows`` carries one (:data:`DELETED_ROW`)."""
        names = self._names or file_names(self.files.data)
        schema = f"{ROW_FILE} string NOT NULL, {DELETE_FILE_PATH} string NOT NULL"  # file_path is required
        paths = self.spark.createDataFrame(list(names.items()), schema)
        carried = [DELETED_ROW] if DELETED_ROW in rows.columns else []
        located = rows.select(ROW_FILE, ROW_POS, *carried).join(F.broadcast(paths), ROW_FILE)
        return with_field_ids(located.select(DELETE_FILE_PATH, F.col(ROW_POS).alias(DELETE_POS), *carried))


def row_key(names: list[str], sizes: tuple[int, ...] | None, probed: set[str]) -> Column:
    """Each row's file ordinal (its index in ``names``) shifted past :data:`POSITION_BITS`, plus
    its position: one ``long`` per row of the files named in ``probed``, NULL for the other files'
    rows (no delete names them: a join skips a NULL key). ``sizes``: the files' sizes in bytes,
    when known.

    Spark keeps a file's size and name in ``_metadata`` as per-file constants; the ordinal is
    found by size, a ``long`` compare, where no other file in the scan has the same size, and by
    name where one has or the sizes are not known. Larger files are tried first: they hold most rows.
    """
    shared = {size for size, count in Counter(sizes).items() if count > 1} if sizes is not None else set()
    probed_at = [at for at, name in enumerate(names) if name in probed]
    tests = []
    for index in sorted(probed_at, key=lambda at: -sizes[at]) if sizes is not None else probed_at:
        if sizes is None or sizes[index] in shared:
            test = F.col("_metadata.file_name") == names[index]
        else:
            test = F.col("_metadata.file_size") == sizes[index]
        tests.append((test, index))
    return F.shiftleft(_first_match(tests), POSITION_BITS) + F.col("_metadata.row_index")


def _first_match(tests: list[tuple[Column, int]]) -> Column:
    """The ``long`` paired with the first true test (NULL when none is); at least one test."""
    (first, value), *others = tests
    matched = F.when(first, value)
    for test, other in others:
        matched = matched.when(test, other)
    return matched.cast("long")


def _named_files(deletes: tuple[str, ...]) -> set[str]:
    """The names of the files position-delete files name (read from their ``file_path`` dictionaries)."""
    names: set[str] = set()
    for uri in deletes:
        filesystem, path = storage.filesystem(uri)
        with filesystem.open_input_file(path) as source:
            column = pq.read_table(source, columns=[DELETE_FILE_PATH], read_dictionary=[DELETE_FILE_PATH]).column(0)
        names.update(named.rsplit("/", 1)[-1] for chunk in column.chunks for named in chunk.dictionary.to_pylist())
    return names


def _sizes(uris: tuple[str, ...]) -> tuple[int, ...]:
    """The sizes in bytes of files (one metadata request per file)."""
    filesystem, _ = storage.filesystem(uris[0])
    return tuple(info.size or 0 for info in filesystem.get_file_info([storage.filesystem(uri)[1] for uri in uris]))


def read_as(reader: DataFrameReader, columns: FileColumns | None, extra: StructType | None = None) -> DataFrameReader:
    """``reader`` set to read Parquet files as ``columns`` (each column and its older names, as
    its type at W) and the ``extra`` fields; unchanged without ``columns``. Take each column with
    :meth:`FileColumns.names_of` and ``coalesce``: a file holds one of the names at most."""
    if columns is None:
        return reader
    fields = list(from_arrow_schema(columns.schema).fields) + list(extra.fields if extra is not None else ())
    read = [StructField(other, target.dataType) for target in fields for other in columns.names_of(target.name)]
    return reader.schema(StructType(read))


def held_column(columns: FileColumns | None, name: str) -> Column:
    """Column ``name`` of files read with :func:`read_as`, under whichever of its names a file holds."""
    if columns is None or len(names := columns.names_of(name)) == 1:
        return F.col(name)
    return F.coalesce(*[F.col(other) for other in names]).alias(name)
