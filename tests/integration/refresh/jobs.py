"""Helpers that stage a run's capture manifest and job spec the way the engine steps do."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.staging import (
    CAPTURE_DIR,
    CaptureManifest,
    JobSpec,
    MemberManifest,
    TableCapture,
    capture_manifest_uri,
    staging_root,
    write_json,
)


def capture_dir(warehouse: Path, group: RefreshGroup, run_key: str, member: str) -> Path:
    """Where the capture step puts a member's changelog segments (a local path)."""
    return warehouse / "_streambed" / group.name / run_key / CAPTURE_DIR / member


def stage_spec(
    warehouse: Path,
    group: RefreshGroup,
    run_key: str,
    watermark: Lsn,
    captures: Sequence[TableCapture],
    previous: Mapping[str, MemberManifest] | None = None,
    prev_watermark: Lsn | None = None,
    cut_number: int = 1,
) -> JobSpec:
    """Write the run's capture manifest and return its job spec on top of ``previous`` outputs.

    ``previous`` stands in for the previous published cut: each mirror's files and key.
    """
    root = staging_root(warehouse.as_uri(), group.name, run_key)
    manifest = CaptureManifest(group.name, run_key, watermark, prev_watermark or Lsn(0), 0, tuple(captures))
    write_json(capture_manifest_uri(root), manifest.to_dict())
    mirrors = {mirror.name for mirror in group.mirrors}
    previous = {name: found for name, found in (previous or {}).items() if name in mirrors}
    return JobSpec(
        group=group.to_dict(),
        run_key=run_key,
        watermark=watermark,
        prev_watermark=prev_watermark,
        cut_number=cut_number,
        staging_root=root,
        capture_manifest=capture_manifest_uri(root),
        previous_files={name: found.files for name, found in previous.items()},
        previous_key_columns={name: found.key_columns for name, found in previous.items()},
    )


def read_staged(manifest: MemberManifest) -> pa.Table:
    """A member's staged output as one Arrow table."""
    return pa.concat_tables([pq.read_table(uri.removeprefix("file://")) for uri in manifest.files])


def sorted_rows(table: pa.Table, key: Sequence[str]) -> list[dict[str, Any]]:
    """The table's rows sorted by ``key``."""
    return sorted(table.to_pylist(), key=lambda row: tuple(row[name] for name in key))
