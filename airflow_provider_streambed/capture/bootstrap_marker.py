"""The record of a run's bootstrap copies, ``_capture/bootstrap.json``, which a retried run reuses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from airflow_provider_streambed.capture.copy import COPY_PREFIX
from airflow_provider_streambed.capture.copy_snapshot import CopySnapshot
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.staging import join, read_json, write_json

MARKER_NAME = "bootstrap.json"


@dataclass(frozen=True, slots=True)
class BootstrapCopy:
    """The copy of one table: its files (the mirror's columns only), row count, columns and bytes,
    and for a member added to a group with cuts the snapshot whose transactions extraction drops
    for it (``None`` for a copy at the slot's consistent point: nothing to drop)."""

    files: tuple[str, ...]
    rows: int
    columns: tuple[str, ...]
    bytes: int = 0
    snapshot: CopySnapshot | None = None


class BootstrapMarker(NamedTuple):
    """The copies a run recorded: the slot's consistent point (first run only) and copies by member."""

    consistent_point: Lsn | None
    copies: dict[str, BootstrapCopy]


def _older_release(data: dict[str, Any]) -> bool:
    """Whether a record is of an older release's format: copies as changelog files, or added
    members' copies without their snapshot (reused, no filter would drop what they hold)."""
    tables = data["tables"].values()
    return any(
        not uri.rsplit("/", 1)[-1].startswith(f"{COPY_PREFIX}-") for item in tables for uri in item["files"]
    ) or (data["consistent_point"] is None and any(item.get("snapshot") is None for item in tables))


def read_marker(capture_dir: str) -> BootstrapMarker | None:
    """The recorded copies of a run, or ``None`` (also for an older release's record: copy again)."""
    data = read_json(join(capture_dir, MARKER_NAME))
    if data is None or _older_release(data):
        return None
    point = None if data["consistent_point"] is None else Lsn.parse(data["consistent_point"])
    copies = {
        member: BootstrapCopy(
            tuple(item["files"]), int(item["rows"]), tuple(item["columns"]), int(item["bytes"]),
            None if item.get("snapshot") is None else CopySnapshot.parse(item["snapshot"]),
        )
        for member, item in data["tables"].items()
    }
    return BootstrapMarker(point, copies)


def write_marker(capture_dir: str, consistent_point: Lsn | None, copies: dict[str, BootstrapCopy]) -> None:
    """Record the copies of a run (written after every copy is complete)."""
    write_json(
        join(capture_dir, MARKER_NAME),
        {
            "consistent_point": None if consistent_point is None else str(consistent_point),
            "tables": {
                member: {"files": list(copy.files), "rows": copy.rows, "columns": list(copy.columns),
                         "bytes": copy.bytes, "snapshot": None if copy.snapshot is None else str(copy.snapshot)}
                for member, copy in copies.items()
            },
        },
    )
