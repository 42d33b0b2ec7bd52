"""A small derived output is collected and staged from the worker, with the columns, types and
nullability a Spark write gives (:func:`.members.collected`, real Spark, local[2])."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.refresh.derived import members
from airflow_provider_streambed.refresh.derived.members import collected
from airflow_provider_streambed.staging import SnapshotFiles, stage_member_output

#: One column of each type a member's result commonly has; ``n`` is not nullable.
QUERY = """SELECT g, COUNT(*) AS n, SUM(d) AS s, AVG(d) AS a, MAX(t) AS t, MIN(day) AS day, MAX(text) AS text,
    SUM(i) AS si, AVG(i) AS ai, MAX(b) AS b, MAX(f) AS f, MAX(local) AS local
FROM (SELECT id % 3 AS g, CAST(id AS DECIMAL(12, 2)) AS d, TIMESTAMP '2024-01-01 00:00:00' + make_interval(0, 0, 0, 0,
      0, 0, id) AS t, DATE '2024-01-01' AS day, CAST(id AS STRING) AS text, CAST(id AS INT) AS i,
      CAST(CAST(id AS STRING) AS BINARY) AS b, CAST(id AS FLOAT) AS f, TIMESTAMP_NTZ '2024-01-01 00:00:00' AS local
      FROM range(10))
GROUP BY g"""


def _previous(tmp_path: Path, rows: int) -> SnapshotFiles:
    """A previous output of ``rows`` rows."""
    path = tmp_path / f"previous-{rows}.parquet"
    pq.write_table(pa.table({"id": range(rows)}), path)
    return SnapshotFiles((path.as_uri(),))


def _staged_schema(frame: DataFrame | pa.Table, root: Path) -> pa.Schema:
    manifest = stage_member_output(frame, root.as_uri(), "m", Lsn(2))
    assert len(manifest.files) == 1
    return pq.read_schema(manifest.files[0].removeprefix("file://"))


def test_a_small_output_is_collected_and_staged_as_a_spark_write_stages_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    frame = spark.sql(QUERY)
    table = collected(frame, _previous(tmp_path, 3))
    assert isinstance(table, pa.Table) and table.num_rows == 3
    written = _staged_schema(frame.coalesce(1), tmp_path / "spark")
    assert not written.field("n").nullable
    assert _staged_schema(table, tmp_path / "collected").remove_metadata() == written.remove_metadata()


def test_a_large_or_first_output_is_left_to_a_spark_write(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(members, "MAX_COLLECTED_ROWS", 2)
    frame = spark.sql(QUERY)
    assert collected(frame, SnapshotFiles(())) is frame  # a first output: its size is not known
    unreadable = SnapshotFiles(((tmp_path / "gone.parquet").as_uri(),))  # as on a store without credentials here
    assert collected(frame, unreadable) is frame
    assert collected(frame, _previous(tmp_path, 3)) is frame  # its previous output was larger
    assert collected(frame, _previous(tmp_path, 2)) is frame  # it is larger itself
    assert isinstance(collected(frame.where("g < 2"), _previous(tmp_path, 2)), pa.Table)
