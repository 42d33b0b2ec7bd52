"""Iceberg position-delete rows as pyarrow tables: their schema, and the field ids their rows carry."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from airflow_provider_streambed.staging.iceberg_fields import (
    DELETE_FIELD_IDS,
    DELETE_FILE_PATH,
    DELETE_POS,
    DELETE_ROW,
    DELETE_ROW_FIELD_ID,
    FIELD_ID,
)

#: Position-delete rows as Iceberg names them, with their reserved field ids.
DELETE_SCHEMA = pa.schema([
    pa.field(DELETE_FILE_PATH, pa.string(), nullable=False,
             metadata={FIELD_ID: str(DELETE_FIELD_IDS[DELETE_FILE_PATH]).encode()}),
    pa.field(DELETE_POS, pa.int64(), nullable=False, metadata={FIELD_ID: str(DELETE_FIELD_IDS[DELETE_POS]).encode()}),
])


def identified(shape: pa.Schema, ids: Mapping[str, int]) -> pa.Schema:
    """``shape`` with each field's Iceberg field id (``ids``, by name) as its :data:`FIELD_ID` metadata."""
    return pa.schema([field.with_metadata({FIELD_ID: str(ids[field.name]).encode()}) for field in shape])


def position_deletes(paths: pa.Array, positions: pa.Array, images: pa.Table | None) -> pa.Table:
    """Iceberg position-delete rows: ``paths`` (data file URIs) and ``positions`` (row numbers) and,
    when given, the ``row`` column of the deleted rows' values (``images``, one row each, in the
    mirror's columns at W, each field carrying its Iceberg field id as :data:`FIELD_ID` metadata)."""
    deletes = pa.Table.from_arrays([paths, positions], schema=DELETE_SCHEMA)
    if images is None:
        return deletes
    values = pa.StructArray.from_arrays([images[name].combine_chunks() for name in images.column_names],
                                        fields=list(images.schema))
    row = pa.field(DELETE_ROW, values.type, nullable=False, metadata={FIELD_ID: str(DELETE_ROW_FIELD_ID).encode()})
    return deletes.append_column(row, values)
