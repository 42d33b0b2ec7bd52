"""A retry reuses a member's staged output only for the same W and the same declaration."""

from __future__ import annotations

from pathlib import Path

from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.staging import MemberManifest, member_manifest_uri, staged_manifest, write_json


def test_staged_output_is_reused_for_the_same_w_and_definition(tmp_path: Path) -> None:
    root = tmp_path.as_uri()
    manifest = MemberManifest("totals", Lsn(100), ("f.parquet",), 3, definition="abc")
    write_json(member_manifest_uri(root, "totals"), manifest.to_dict())
    assert staged_manifest(root, "totals", Lsn(100)) == manifest
    assert staged_manifest(root, "totals", Lsn(100), "abc") == manifest
    assert staged_manifest(root, "totals", Lsn(100), "edited") is None  # computed from another declaration
    assert staged_manifest(root, "totals", Lsn(200), "abc") is None
    assert staged_manifest(root, "other", Lsn(100)) is None
