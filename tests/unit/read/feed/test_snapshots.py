"""Reading a data file's rows at positions for the feed (:func:`.feed.snapshots._rows_at`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record

from airflow_provider_streambed.read.feed.snapshots import _rows_at


def test_rows_at_positions_say_whether_they_took_every_row_group(tmp_path: Path) -> None:
    path = tmp_path / "data.parquet"
    pq.write_table(pa.table({"id": pa.array(range(30), pa.int64())}), path, row_group_size=10)
    data_file = DataFile.from_args(content=DataFileContent.DATA, file_path=path.as_uri(),
                                   file_format=FileFormat.PARQUET, partition=Record(), record_count=30,
                                   file_size_in_bytes=path.stat().st_size)
    data_file.spec_id = 0  # not a field of the entry: pyiceberg sets it apart
    io = PyArrowFileIO()
    for positions, every in (([1, 12, 29], True), ([11, 12], False), ([0, 15], False)):
        extract, whole = _rows_at(io, data_file, np.array(positions), tmp_path)
        assert whole is every, positions
        assert pq.read_table(extract.file_path.removeprefix("file://"))["id"].to_pylist() == positions
