"""Files written under older schemas of a mirror, read as its columns at W."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_streambed.staging import COMMIT_LSN, TableCapture
from airflow_provider_streambed.staging.file_columns import FileColumns

AT_W = pa.schema([("id", pa.int64()), ("value", pa.int64()), ("w", pa.string())])
COLUMNS = FileColumns(AT_W, {"value": ("v",)})


def test_a_file_of_an_older_schema_reads_as_the_columns_at_w() -> None:
    older = pa.table({"id": pa.array([1, 2], pa.int32()), "v": pa.array([10, 20], pa.int32()),
                      "gone": ["x", "y"]})  # widened id, renamed v, dropped gone, no w yet
    conformed = COLUMNS.conform(older)
    assert conformed.schema == AT_W
    assert conformed.to_pylist() == [{"id": 1, "value": 10, "w": None}, {"id": 2, "value": 20, "w": None}]
    assert COLUMNS.conform(pa.table({"id": [3], "value": [30], "w": ["z"]})).to_pylist() == [
        {"id": 3, "value": 30, "w": "z"}]


def test_bookkeeping_and_marker_columns_follow_their_names() -> None:
    segment = pa.table({"id": [1], "v": [None], COMMIT_LSN: [7], "_toast_v": [True]})
    conformed = COLUMNS.conform(segment, {COMMIT_LSN: pa.int64(), "_toast_value": pa.bool_(), "_toast_w": pa.bool_()})
    assert conformed.to_pylist() == [
        {"id": 1, "value": None, "w": None, COMMIT_LSN: 7, "_toast_value": True, "_toast_w": None}]
    assert COLUMNS.names_of("_toast_value") == ("_toast_value", "_toast_v")
    assert COLUMNS.held("value", ["id", "v"]) == ["v"] and COLUMNS.held("w", ["id", "v"]) == []


def test_a_capture_gives_the_last_segments_columns_and_its_older_names(tmp_path: Path) -> None:
    pq.write_table(pa.table({"id": pa.array([1], pa.int32()), "v": [1]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"id": pa.array([], pa.int64()), "value": pa.array([], pa.int64()),
                             COMMIT_LSN: pa.array([], pa.int64())}), tmp_path / "b.parquet")
    capture = TableCapture("t", "public.t", ("id", "value"), ("id",),
                           ((tmp_path / "a.parquet").as_uri(), (tmp_path / "b.parquet").as_uri()), 1,
                           aliases={"value": ("v",)})
    columns = FileColumns.of(capture)
    assert columns.schema == pa.schema([("id", pa.int64()), ("value", pa.int64())])
    assert columns.aliases == {"value": ("v",)}
    assert columns.changelog == pa.schema([(COMMIT_LSN, pa.int64())])  # the last segment's own columns


def test_a_captures_older_names_survive_its_manifest() -> None:
    capture = TableCapture("t", "public.t", ("id", "value"), ("id",), ("file:///a.parquet",), 1,
                           renamed={"v": "value"}, aliases={"value": ("v", "val")}, reshaped=True)
    assert TableCapture.from_dict(json.loads(json.dumps(dataclasses.asdict(capture)))) == capture
