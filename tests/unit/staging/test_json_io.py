"""The small JSON records of a run: atomic writes, and reads that meet a concurrent deletion."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyarrow import fs

from airflow_provider_streambed.staging import json_io
from airflow_provider_streambed.staging.json_io import read_json, write_json


def test_a_record_round_trips_and_a_missing_one_is_none(tmp_path: Path) -> None:
    uri = (tmp_path / "a" / "record.json").as_uri()
    assert read_json(uri) is None
    write_json(uri, {"run_key": "r1", "n": 2})
    assert read_json(uri) == {"run_key": "r1", "n": 2}
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["record.json"]  # no temporary left


def test_a_record_deleted_between_look_up_and_read_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = (tmp_path / "record.json").as_uri()
    write_json(uri, {"attempt_id": "x"})
    local, path = fs.FileSystem.from_uri(uri)

    class DeletedAfterLookUp:
        """The local file system, with the record deleted by someone else right after it is looked up."""

        def get_file_info(self, target: str) -> fs.FileInfo:
            info = local.get_file_info(target)
            local.delete_file(target)
            return info

        def open_input_stream(self, target: str) -> fs.NativeFile:
            return local.open_input_stream(target)

    monkeypatch.setattr(json_io.storage, "filesystem", lambda _: (DeletedAfterLookUp(), path))
    assert read_json(uri) is None
