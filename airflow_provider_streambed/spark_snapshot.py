"""Reading a member snapshot's files in Spark, its Iceberg position deletes applied.

Spark reads plain Parquet lists; an Iceberg snapshot is data files minus the rows its position
delete files name by ``(file_path, pos)``. :class:`SnapshotScan` reads the data files with
Spark's ``_metadata.file_name`` and ``_metadata.row_index`` (the row's position in its file, the
``pos`` of an Iceberg delete) and anti-joins the deletes. It joins by file *name* because
Spark reports a file's path in its own URI form (``file:/w/a%20b/f.parquet`` for
``file:///w/a b/f.parquet``); the names of a member table's files are unique (every Spark write
names its files with its own UUID), and :class:`SnapshotScan` refuses files whose names are not
unique or would be URL-encoded. :meth:`SnapshotScan.deletes_of` turns rows read with their
positions into position-delete rows with the Iceberg field ids, for a new delete file.
"""

from __future__ import annotations

from pyarrow import fs
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from airflow_provider_streambed.exceptions import RefreshError
from airflow_provider_streambed.staging import DELETE_FIELD_IDS, DELETE_FILE_PATH, DELETE_POS, SnapshotFiles
from airflow_provider_streambed.staging.file_names import file_names

#: Spark 4.2 reads Parquet ``TIME`` columns (PostgreSQL ``time``) only with this setting on.
TIME_TYPE_CONF = "spark.sql.timeType.enabled"
#: Columns :meth:`SnapshotScan.rows` adds with ``positions=True``: the row's file name and position.
ROW_FILE, ROW_POS = "_row_file", "_row_pos"


def with_field_ids(frame: DataFrame) -> DataFrame:
    """``(file_path, pos)`` rows with the Iceberg field ids Spark writes into the Parquet schema."""
    return frame.select(*[
        F.col(name).cast("string" if name == DELETE_FILE_PATH else "long").alias(
            name, metadata={"parquet.field.id": field_id}
        )
        for name, field_id in DELETE_FIELD_IDS.items()
    ])


class SnapshotScan:
    """The live rows of a snapshot's files (deletes applied), optionally with their positions.

    Args:
        spark: the session; :data:`TIME_TYPE_CONF` is turned on in it (a ``time`` column needs it).
        files: the snapshot's data and delete files; at least one data file.
    """

    def __init__(self, spark: SparkSession, files: SnapshotFiles) -> None:
        if not files.data:
            raise RefreshError("a snapshot scan needs at least one data file")
        spark.conf.set(TIME_TYPE_CONF, "true")
        self.spark = spark
        self.files = files
        self._names = file_names(files.data) if files.deletes else {}
        self._data, self._deletes = files.readable()  # local copies of files Spark cannot reach
        self._frame = spark.read.parquet(*self._data)  # a snapshot's files share one schema (see mirror.py)

    @property
    def columns(self) -> list[str]:
        """The data columns."""
        return self._frame.columns

    def data_bytes(self) -> int:
        """The size of the data files (one metadata request per file)."""
        filesystem, _ = fs.FileSystem.from_uri(self._data[0])
        paths = [fs.FileSystem.from_uri(uri)[1] for uri in self._data]
        return sum(info.size or 0 for info in filesystem.get_file_info(paths))

    def rows(self, columns: list[str] | None = None, positions: bool = False) -> DataFrame:
        """Live rows (``columns``, default all), with ``_row_file`` and ``_row_pos`` when ``positions``."""
        selected: list[str | Column] = list(columns if columns is not None else self._frame.columns)
        if positions or self.files.deletes:
            selected += [F.col("_metadata.file_name").alias(ROW_FILE), F.col("_metadata.row_index").alias(ROW_POS)]
        frame = self._frame.select(*selected)
        if self.files.deletes:
            deleted = self.spark.read.parquet(*self._deletes).select(
                F.substring_index(F.col(DELETE_FILE_PATH), "/", -1).alias(ROW_FILE), F.col(DELETE_POS).alias(ROW_POS)
            )
            frame = frame.join(deleted, [ROW_FILE, ROW_POS], "left_anti")
            if not positions:
                frame = frame.drop(ROW_FILE, ROW_POS)
        return frame

    def deletes_of(self, rows: DataFrame) -> DataFrame:
        """Position-delete rows (``file_path``, ``pos``, with field ids) for ``rows`` read with positions."""
        names = self._names or file_names(self.files.data)
        schema = f"{ROW_FILE} string NOT NULL, {DELETE_FILE_PATH} string NOT NULL"  # file_path is required
        paths = self.spark.createDataFrame(list(names.items()), schema)
        located = rows.select(ROW_FILE, ROW_POS).join(F.broadcast(paths), ROW_FILE)
        return with_field_ids(located.select(DELETE_FILE_PATH, F.col(ROW_POS).alias(DELETE_POS)))
