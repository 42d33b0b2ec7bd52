"""Iceberg's names in staged Parquet files: the position-delete columns and the field-id metadata key."""

from __future__ import annotations

#: Columns of an Iceberg position-delete file, and their reserved field ids. :data:`DELETE_FIELD_IDS`
#: names the two every delete file has; the optional ``row`` holds each deleted row's values: the
#: merges write it when the capture gives them (:attr:`.capture_manifest.TableCapture.deleted_row_ids`), and
#: the change feed reads removed rows from it.
DELETE_FILE_PATH, DELETE_POS, DELETE_ROW = "file_path", "pos", "row"
DELETE_FIELD_IDS = {DELETE_FILE_PATH: 2147483546, DELETE_POS: 2147483545}
DELETE_ROW_FIELD_ID = 2147483544
#: The Arrow field metadata key under which Parquet files keep a column's (Iceberg) field id.
FIELD_ID = b"PARQUET:field_id"
