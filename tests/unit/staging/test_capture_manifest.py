"""A table's capture record through its JSON form, and one written by an older release."""

from __future__ import annotations

import dataclasses
import json

from airflow_provider_streambed.staging import TableCapture


def test_a_capture_record_round_trips_through_json_with_its_old_rows_and_field_ids() -> None:
    capture = TableCapture("t", "public.t", ("id", "v"), ("id",), ("file:///c.parquet",), 4, old_images=True,
                           field_ids={"id": 1, "v": 2}, aliases={"v": ("w",)})
    assert TableCapture.from_dict(json.loads(json.dumps(dataclasses.asdict(capture)))) == capture


def test_an_older_capture_record_has_no_old_rows_and_no_field_ids() -> None:
    older = {"member": "t", "source_table": "public.t", "columns": ["id"], "key_columns": ["id"],
             "files": ["file:///c.parquet"], "changes": 1, "bootstrap": False}
    capture = TableCapture.from_dict(older)
    assert (capture.old_images, dict(capture.field_ids)) == (False, {})
