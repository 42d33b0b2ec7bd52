"""The record of a run's bootstrap copies, ``_capture/bootstrap.json``, which a retried run reuses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from airflow_provider_streambed.capture.copy import COPY_PREFIX
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.staging import join, read_json, write_json

MARKER_NAME = "bootstrap.json"


@dataclass(frozen=True, slots=True)
class BootstrapCopy:
    """The copy of one table: its files (the mirror's columns only), row count, columns and bytes."""

    files: tuple[str, ...]
    rows: int
    columns: tuple[str, ...]
    bytes: int = 0


class BootstrapMarker(NamedTuple):
    """The copies a run recorded: the slot's consistent point (first run only) and copies by member."""

    consistent_point: Lsn | None
    copies: dict[str, BootstrapCopy]


def read_marker(capture_dir: str) -> BootstrapMarker | None:
    """The recorded copies of a run, or ``None`` (also for copies of an older release's format)."""
    data = read_json(join(capture_dir, MARKER_NAME))
    if data is None or any(  # an older release's copies were changelog files: copy again
        not uri.rsplit("/", 1)[-1].startswith(f"{COPY_PREFIX}-") for item in data["tables"].values()
        for uri in item["files"]
    ):
        return None
    point = None if data["consistent_point"] is None else Lsn.parse(data["consistent_point"])
    copies = {
        member: BootstrapCopy(tuple(item["files"]), int(item["rows"]), tuple(item["columns"]), int(item["bytes"]))
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
                         "bytes": copy.bytes}
                for member, copy in copies.items()
            },
        },
    )
