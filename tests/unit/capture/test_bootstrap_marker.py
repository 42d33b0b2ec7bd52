"""The record of a run's bootstrap copies: what a retry reuses, and what it copies again."""

from __future__ import annotations

import json
from pathlib import Path

from airflow_provider_streambed.capture.bootstrap_marker import MARKER_NAME, BootstrapCopy, read_marker, write_marker
from airflow_provider_streambed.capture.copy_snapshot import CopySnapshot
from airflow_provider_streambed.lsn import Lsn


def copy(tmp_path: Path, member: str, snapshot: CopySnapshot | None = None) -> BootstrapCopy:
    return BootstrapCopy(((tmp_path / member / "copy-0.parquet").as_uri(),), 3, ("id",), 100, snapshot)


def test_added_copies_are_recorded_with_their_snapshot_and_read_back(tmp_path: Path) -> None:
    added = {"b": copy(tmp_path, "b", CopySnapshot.parse("4294967299:4294967310:4294967301"))}
    write_marker(tmp_path.as_uri(), None, added)
    assert read_marker(tmp_path.as_uri()) == (None, added)
    first = {"a": copy(tmp_path, "a")}  # at the slot's consistent point: no snapshot to filter by
    write_marker(tmp_path.as_uri(), Lsn.parse("0/16B3748"), first)
    assert read_marker(tmp_path.as_uri()) == (Lsn.parse("0/16B3748"), first)


def test_an_older_releases_record_of_added_copies_without_a_snapshot_is_copied_again(tmp_path: Path) -> None:
    write_marker(tmp_path.as_uri(), None, {"b": copy(tmp_path, "b", CopySnapshot(7, 9))})
    path = tmp_path / MARKER_NAME
    data = json.loads(path.read_text())
    del data["tables"]["b"]["snapshot"]
    path.write_text(json.dumps(data))
    assert read_marker(tmp_path.as_uri()) is None
    data["consistent_point"] = "0/10"  # a first run's copies need none
    path.write_text(json.dumps(data))
    marker = read_marker(tmp_path.as_uri())
    assert marker is not None and marker.copies["b"].snapshot is None
