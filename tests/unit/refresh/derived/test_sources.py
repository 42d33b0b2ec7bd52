"""A derived member's source changes read in the worker: rows from the staged deletes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_streambed.exceptions import is_final
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.refresh.derived.sources import SourceState, changed_rows
from airflow_provider_streambed.refresh.mirrors.position_delete_rows import position_deletes
from airflow_provider_streambed.staging import SnapshotFiles
from airflow_provider_streambed.staging.member_manifest import MemberManifest


def _source(tmp_path: Path, named: str) -> SourceState:
    """A source whose previous cut holds one data file of two rows, and whose staged deletes carry
    the deleted row of position 0 of the data file ``named``."""
    data, deletes = tmp_path / "data.parquet", tmp_path / "deletes.parquet"
    pq.write_table(pa.table({"id": [1, 2], "v": ["a", "b"]}), data)
    images = pa.table({"id": [1], "v": ["a"]})
    pq.write_table(position_deletes(pa.array([f"file://{tmp_path / named}"]), pa.array([0]), images), deletes)
    staged = MemberManifest("t", Lsn(2), (), 0, ("id",), incremental=True, delete_files=(f"file://{deletes}",),
                            deleted_rows=1)
    return SourceState(SnapshotFiles((f"file://{data}",)), staged, key=("id",))


def test_removed_rows_come_from_the_rows_the_deletes_carry(tmp_path: Path) -> None:
    removed, added = changed_rows(_source(tmp_path, "data.parquet"))
    assert removed is not None and removed.to_pylist() == [{"id": 1, "v": "a"}]
    assert added is None


def test_deletes_carrying_rows_of_a_file_the_previous_cut_lacks_fail_as_final(tmp_path: Path) -> None:
    stray = r"data files the previous snapshot does not list: \['other.parquet'\]"
    with pytest.raises(Exception, match=stray) as failed:
        changed_rows(_source(tmp_path, "other.parquet"))
    assert is_final(failed.value)  # the staged mirror stays as it is on a retry
