"""Which column type changes Iceberg reads keeping the field id."""

from __future__ import annotations

import pyarrow as pa

from airflow_provider_streambed.staging.column_changes import promotable


def test_promotions_iceberg_allows() -> None:
    assert promotable(pa.int32(), pa.int64()) and promotable(pa.float32(), pa.float64())
    assert promotable(pa.decimal128(12, 2), pa.decimal128(20, 2)) and promotable(pa.string(), pa.string())


def test_changes_it_does_not() -> None:
    assert not promotable(pa.int64(), pa.int32()) and not promotable(pa.int64(), pa.string())
    assert not promotable(pa.decimal128(12, 2), pa.decimal128(20, 3))  # another scale
    assert not promotable(pa.decimal128(20, 2), pa.decimal128(12, 2))
    assert not promotable(pa.int64(), pa.decimal128(20, 2))
