"""Applying a group's retention: expire the due cuts, then collect the files nothing needs.

Runs after every publish (:func:`apply_retention_after_publish`: the publish commit already
expired what it could, so this usually finds nothing to expire, and file collection runs at most
every half ``delete_files_after``), from ``streambed cuts expire`` and from
:class:`~airflow_provider_streambed.operators.retention.ExpireCutsOperator`.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog

from airflow_provider_streambed.catalog import warehouse_of
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import DeclarationError
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.ledger.schema import now as utc_now
from airflow_provider_streambed.publish.attempts import sweep_attempts
from airflow_provider_streambed.retention.expiry import ExpiryResult, expire_cuts
from airflow_provider_streambed.retention.gc import GcResult, collect_garbage, gc_due

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetentionReport:
    """What applying the retention did: the expiry, and the file collection (``None``: not due)."""

    expiry: ExpiryResult
    gc: GcResult | None

    def summary(self) -> dict[str, object]:
        """JSON-ready figures (for XCom and ``--json``)."""
        gc = self.gc or GcResult()  # not due: nothing collected
        return {
            "expired_cuts": list(self.expiry.cut_ids),
            "removed_snapshots": self.expiry.snapshots,
            "deleted_files": len(gc.deleted),
            "pending_files": gc.pending,
            "files_collected": self.gc is not None,
        }


def apply_retention(
    catalog: SqlCatalog,
    ledger: Ledger,
    group: RefreshGroup,
    *,
    dry_run: bool = False,
    after_publish: bool = False,
    now: dt.datetime | None = None,
) -> RetentionReport:
    """Expire ``group``'s due cuts and delete its garbage files.

    Args:
        catalog: the SQL catalog of the member tables (the ledger lives in its database).
        ledger: the run ledger.
        group: the declaration; its ``retention`` decides.
        dry_run: report what would go; change nothing.
        after_publish: skip the file collection when one ran within half ``delete_files_after``.
        now: the time the retention is judged at (tests).

    Raises:
        DeclarationError: the group declares no retention.
        PublishConflictError: see :func:`~airflow_provider_streambed.retention.expiry.expire_cuts`.
    """
    if group.retention is None:
        raise DeclarationError(f"group {group.name!r} declares no retention "
                               "(RefreshGroup(..., retention=CutRetention(...)))")
    now = now or utc_now()
    warehouse = warehouse_of(catalog)
    expiry = expire_cuts(catalog, ledger, group, dry_run=dry_run, now=now)
    if not dry_run:  # after the expiry: an attempt a crash left is dead once this expiry moved its tables
        sweep_attempts(catalog, ledger, warehouse, group.name)
    grace = group.retention.delete_files_after
    if after_publish and not gc_due(warehouse, group.name, grace, now):
        return RetentionReport(expiry, None)
    gc = collect_garbage(catalog, ledger, group.name, grace, dry_run=dry_run, now=now,
                         expiring=expiry.plan if dry_run else None)
    return RetentionReport(expiry, gc)


def apply_retention_after_publish(catalog: Catalog, ledger: Ledger, group: RefreshGroup) -> None:
    """Right after a publish of ``group``: :func:`apply_retention` (``after_publish``) when the group
    declares a retention and the catalog is a SQL catalog; nothing otherwise. Failures are logged,
    never raised: the cut is published, and the next publish applies the retention again."""
    if group.retention is None or not isinstance(catalog, SqlCatalog):
        return
    try:
        apply_retention(catalog, ledger, group, after_publish=True)
    except Exception as error:  # the cut stands; the next publish applies the retention again
        logger.warning("group=%s: retention after publish failed: %s", group.name, error)
