"""A member's files at W: the previous snapshot's plus an incremental output, or a whole output."""

from __future__ import annotations

from dataclasses import replace

from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.staging import JobSpec, MemberManifest, SnapshotFiles

PREVIOUS = SnapshotFiles(("a.parquet", "b.parquet"), ("d1.parquet",))


def test_an_incremental_output_adds_its_data_and_delete_files() -> None:
    staged = MemberManifest("t", Lsn(5), ("c.parquet",), 3, ("id",), incremental=True,
                            delete_files=("d2.parquet",), deleted_rows=2, reason="merge-on-read", base_snapshot_id=7)
    assert PREVIOUS.then(staged) == SnapshotFiles(("a.parquet", "b.parquet", "c.parquet"),
                                                  ("d1.parquet", "d2.parquet"))
    assert MemberManifest.from_dict(staged.to_dict()) == staged


def test_a_whole_output_replaces_every_file() -> None:
    staged = MemberManifest("t", Lsn(5), ("c.parquet",), 3, reason="compaction: 70 files (threshold 64)")
    assert PREVIOUS.then(staged) == SnapshotFiles(("c.parquet",))
    assert MemberManifest.from_dict(staged.to_dict()) == staged


def test_manifests_of_older_releases_read_as_whole_outputs() -> None:
    old = {"member": "t", "watermark": "0/5", "files": ["c.parquet"], "row_count": 3}
    manifest = MemberManifest.from_dict(old)
    assert (manifest.incremental, manifest.delete_files, manifest.deleted_rows) == (False, (), 0)


def test_a_staged_incremental_output_serves_only_a_spec_on_its_base() -> None:
    spec = JobSpec({"members": []}, "r", Lsn(5), Lsn(3), 2, "file:///s", "file:///s/m.json",
                   previous_snapshots={"t": 7})
    incremental = MemberManifest("t", Lsn(5), ("c.parquet",), 3, incremental=True, base_snapshot_id=7)
    assert spec.fits(incremental) and spec.fits(MemberManifest("t", Lsn(5), ("c.parquet",), 3))
    assert not spec.fits(replace(incremental, base_snapshot_id=6))  # computed on another cut: computed again
    assert spec.fits(replace(incremental, base_snapshot_id=None))  # staged by an older release
    assert JobSpec.from_dict(spec.to_dict()) == spec
