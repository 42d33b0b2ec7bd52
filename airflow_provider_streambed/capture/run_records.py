"""What one capture run is given and what it returns: :class:`CaptureSettings` and :class:`CaptureResult`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_provider_streambed.capture.bootstrap import CopyOptions
from airflow_provider_streambed.capture.holdback import HoldbackReport
from airflow_provider_streambed.capture.slot import DEFAULT_RETAINED_WARN_BYTES
from airflow_provider_streambed.capture.waits import DEFAULT_TIMEOUT_SECONDS
from airflow_provider_streambed.ledger.runs import DagRunRef
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.staging import CaptureManifest


@dataclass(frozen=True, slots=True)
class CaptureSettings:
    """How one capture runs (every field has a default).

    Attributes:
        explicit_watermark: pin this W instead of the current WAL position (checked).
        holdback_warn_seconds: report transactions open longer than this at pin time.
        flush_timeout_seconds: how long to wait for the WAL flush up to W.
        wal_retention_warn_bytes: warn when the group's slot retains more WAL than this.
        dag_run: the Airflow DAG run behind the run, recorded with its pin.
        copy: how bootstrap copies run (parallelism, progress).
        slot_create_timeout_seconds: how long creating the slot (first run), the publication DDL
            and the copy of added members may wait for other sessions' transactions and locks;
            they log whom they wait for every 15 s, then fail with ``CaptureError`` naming them.
        resync: re-synchronise a group whose slot was lost or dropped: drop the slot if it is
            still there, create a new one and copy every table at its consistent point, as on
            the first run; the cut of this run replaces every member whole, and the group's
            older cuts stay readable. A retry of the run reuses its copies.
        resync_members: mirrors to copy again in this run's cut (a resync of those members only):
            each is copied at a snapshot consistent with W, as a member added to the group is,
            and published whole; the other members keep merging.
    """

    explicit_watermark: Lsn | None = None
    holdback_warn_seconds: float = 60.0
    flush_timeout_seconds: float = 30.0
    wal_retention_warn_bytes: int = DEFAULT_RETAINED_WARN_BYTES
    dag_run: DagRunRef | None = None
    copy: CopyOptions = field(default_factory=CopyOptions)
    slot_create_timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    resync: bool = False
    resync_members: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CaptureResult:
    """What the capture step of a run produced."""

    watermark: Lsn
    manifest_uri: str
    manifest: CaptureManifest
    holdback: HoldbackReport
    bootstrap: bool

    def summary(self) -> dict[str, Any]:
        """Small JSON-able facts for XCom: W as text and counts (no URIs of files, no secrets)."""
        return {
            "group": self.manifest.group,
            "run_key": self.manifest.run_key,
            "watermark_lsn": str(self.watermark),
            "watermark": str(self.watermark),  # the key of earlier releases, kept for one release
            "start": str(self.manifest.start),
            "transactions": self.manifest.transactions,
            "changes": sum(table.changes for table in self.manifest.tables),
            "copied_rows": sum(table.copied_rows for table in self.manifest.tables),
            "tables": len(self.manifest.tables),
            "bootstrap": self.bootstrap,
            **self.holdback.summary(),
        }
