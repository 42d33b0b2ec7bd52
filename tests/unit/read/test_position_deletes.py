"""Position-delete rows as each data file's positions (:func:`.position_deletes.positions_by_file`)."""

from __future__ import annotations

import random

import pyarrow as pa

from airflow_provider_streambed.read.position_deletes import positions_by_file
from airflow_provider_streambed.staging.iceberg_fields import DELETE_FILE_PATH, DELETE_POS


def test_each_file_gets_its_positions_sorted_and_distinct_whatever_the_order_and_chunks() -> None:
    rng = random.Random(7)
    pairs = [(f"s3://b/f{rng.randrange(5)}.parquet", rng.randrange(1000)) for _ in range(3000)]
    chunks = [pa.table({DELETE_FILE_PATH: [path for path, _ in part], DELETE_POS: pa.array([pos for _, pos in part],
                                                                                           pa.int64())})
              for part in (pairs[:1234], pairs[1234:])]
    found = positions_by_file(pa.concat_tables(chunks))
    expected = {path: sorted({pos for other, pos in pairs if other == path}) for path, _ in pairs}
    assert {path: positions.to_pylist() for path, positions in found.items()} == expected
    assert all(positions.type == pa.int64() for positions in found.values())
