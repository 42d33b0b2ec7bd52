"""A retry reuses a member's staged output only for the same W and the same declaration."""

from __future__ import annotations

from pathlib import Path

from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.staging import (
    MemberManifest,
    member_manifest_uri,
    publishing_marker_uri,
    staged_manifest,
    write_json,
)
from airflow_provider_streambed.staging.members import damage, file_sizes


def test_staged_output_is_reused_for_the_same_w_and_definition(tmp_path: Path) -> None:
    root = tmp_path.as_uri()
    manifest = MemberManifest("totals", Lsn(100), ("f.parquet",), 3, definition="abc")
    write_json(member_manifest_uri(root, "totals"), manifest.to_dict())
    assert staged_manifest(root, "totals", Lsn(100)) == manifest
    assert staged_manifest(root, "totals", Lsn(100), "abc") == manifest
    assert staged_manifest(root, "totals", Lsn(100), "edited") is None  # computed from another declaration
    assert staged_manifest(root, "totals", Lsn(200), "abc") is None
    assert staged_manifest(root, "other", Lsn(100)) is None


def test_a_truncated_or_lost_file_is_damage_unless_a_publish_moved_it(tmp_path: Path) -> None:
    root = tmp_path.as_uri()
    files = [tmp_path / "totals" / "data" / name for name in ("a.parquet", "b.parquet")]
    for path in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"PAR1" + b"x" * 20 + b"PAR1")
    uris = tuple(path.as_uri() for path in files)
    manifest = MemberManifest("totals", Lsn(100), uris, 3, sizes=file_sizes(uris))
    assert manifest.sizes == {uri: 28 for uri in uris}
    assert MemberManifest.from_dict(manifest.to_dict()) == manifest
    write_json(member_manifest_uri(root, "totals"), manifest.to_dict())
    assert damage(root, manifest) is None and staged_manifest(root, "totals", Lsn(100)) == manifest

    files[1].unlink()
    assert damage(root, manifest) == f"staged file {uris[1]} is missing"
    assert staged_manifest(root, "totals", Lsn(100)) is None
    write_json(publishing_marker_uri(root), {})
    assert damage(root, manifest) is None  # moved into the table by the publish that started

    with open(files[0], "r+b") as stream:
        stream.truncate(10)
    assert damage(root, manifest) == f"staged file {uris[0]} has 10 bytes, not the 28 staged (truncated?)"
    older = MemberManifest("totals", Lsn(100), uris, 3)  # staged by a release that recorded no sizes
    assert damage(root, older) is None
