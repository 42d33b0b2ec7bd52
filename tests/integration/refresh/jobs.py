"""Helpers that stage a run's capture manifest and job spec the way the engine steps do."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.staging import (
    CAPTURE_DIR,
    CaptureManifest,
    JobSpec,
    MemberManifest,
    SnapshotFiles,
    TableCapture,
    capture_manifest_uri,
    staging_root,
    write_json,
)


def capture_dir(warehouse: Path, group: RefreshGroup, run_key: str, member: str) -> Path:
    """Where the capture step puts a member's changelog segments (a local path)."""
    return warehouse / "_streambed" / group.name / run_key / CAPTURE_DIR / member


@dataclass(frozen=True)
class Published:
    """Stands in for a member's snapshot in the previous cut: its files and key."""

    files: SnapshotFiles
    key_columns: tuple[str, ...] = ()


def advance(previous: Mapping[str, Published] | None, staged: Mapping[str, MemberManifest]) -> dict[str, Published]:
    """The members' snapshots once ``staged`` is published on top of ``previous`` (files stay where staged)."""
    state = dict(previous or {})
    for name, manifest in staged.items():
        before = state[name].files if name in state else SnapshotFiles()
        state[name] = Published(before.then(manifest), manifest.key_columns)
    return state


def read_files(files: SnapshotFiles) -> pa.Table:
    """A snapshot's live rows read with pyarrow: data files less the rows its position deletes name."""
    deleted: dict[str, set[int]] = {}
    for uri in files.deletes:
        for row in pq.read_table(uri.removeprefix("file://")).to_pylist():
            deleted.setdefault(row["file_path"], set()).add(row["pos"])
    tables = []
    for uri in files.data:
        table = pq.read_table(uri.removeprefix("file://"))
        gone = pa.array(sorted(deleted.pop(uri, set())), pa.int64())
        tables.append(table.filter(pc.invert(pc.is_in(pa.array(range(table.num_rows)), gone))))
    assert not deleted, f"deletes name files outside the snapshot: {sorted(deleted)}"
    return pa.concat_tables(tables, promote_options="default")


def stage_spec(
    warehouse: Path,
    group: RefreshGroup,
    run_key: str,
    watermark: Lsn,
    captures: Sequence[TableCapture],
    previous: Mapping[str, Published] | None = None,
    prev_watermark: Lsn | None = None,
    cut_number: int = 1,
) -> JobSpec:
    """Write the run's capture manifest and return its job spec on top of ``previous`` snapshots.

    ``previous`` (from :func:`advance`) stands in for the previous published cut: each mirror's files and key.
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
        previous_files={name: found.files.data for name, found in previous.items()},
        previous_deletes={name: found.files.deletes for name, found in previous.items() if found.files.deletes},
        previous_key_columns={name: found.key_columns for name, found in previous.items()},
        previous_snapshots={name: 1000 + cut_number - 1 for name in previous},  # stand-ins for the cut's snapshots
    )


def read_staged(manifest: MemberManifest) -> pa.Table:
    """A member's staged output as one Arrow table."""
    return pa.concat_tables([pq.read_table(uri.removeprefix("file://")) for uri in manifest.files])


def sorted_rows(table: pa.Table, key: Sequence[str]) -> list[dict[str, Any]]:
    """The table's rows sorted by ``key``."""
    return sorted(table.to_pylist(), key=lambda row: tuple(row[name] for name in key))
