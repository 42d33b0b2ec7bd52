"""Expiring a group's due cuts on their own (``streambed cuts expire``, the expiry operator, and
after a publish for what its commit could not take): one atomic commit, like publish.

The member tables of the due cuts get a metadata file each without the cuts' tags and unused
snapshots (:func:`~airflow_provider_streambed.publish.build.build_expiry`), recorded first as a
publish attempt so that a crash leaves nothing behind that the next sweep does not delete; then
every pointer moves and the cuts leave the ledger in one transaction of the catalog database.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from pyiceberg.catalog.sql import SqlCatalog

from airflow_provider_streambed.catalog import warehouse_of
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import LedgerError, PublishConflictError
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.ledger.schema import now as utc_now
from airflow_provider_streambed.publish.attempts import Attempt, settled
from airflow_provider_streambed.publish.build import build_expiry
from airflow_provider_streambed.publish.expiry import ExpiryPlan
from airflow_provider_streambed.publish.iceberg.pointers import current_pointers
from airflow_provider_streambed.publish.members import MemberPlan
from airflow_provider_streambed.publish.sql import swap_pointers
from airflow_provider_streambed.publish.tables import parallel, plan_members
from airflow_provider_streambed.retention.plan import plan_expiry

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ExpiryResult:
    """What an expiry did (or, in a dry run, would do).

    Attributes:
        plan: what was (would be) expired.
        tables: how many member tables lost tags or snapshots.
        snapshots: how many snapshots no kept cut uses were (would be) removed, at most: one a
            remaining tag or branch still names (a carried member's) is kept.
    """

    plan: ExpiryPlan
    tables: int = 0
    snapshots: int = 0

    @property
    def cut_ids(self) -> tuple[int, ...]:
        """The cuts that expired (would expire)."""
        return self.plan.cut_ids


def expire_cuts(
    catalog: SqlCatalog, ledger: Ledger, group: RefreshGroup, *, dry_run: bool = False, now: dt.datetime | None = None
) -> ExpiryResult:
    """Expire the cuts of ``group`` that its retention lets go (at most ``MAX_CUTS_PER_COMMIT``).

    Only cuts whose member tables are all in the group's namespace expire here (a cut from before
    a namespace change stays, with a warning). A table dropped since is skipped.

    Raises:
        PublishConflictError: a member table moved, or a cut was pinned, meanwhile (nothing expired;
            the next expiry plans again).
    """
    namespace = group.namespace
    plan = plan_expiry(ledger, group, now or utc_now())
    tables = [table for table in plan.tables if table.split(".", 1)[0] == namespace]
    if len(tables) < len(plan.tables):
        logger.warning("group=%s: cuts with tables outside namespace %s are kept", group.name, namespace)
        plan = plan_expiry(ledger, group, now or utc_now(), within=tables)
        tables = list(plan.tables)
    result = ExpiryResult(plan, len(tables), sum(len(t.snapshot_ids) for t in plan.tables.values()))
    if not plan or dry_run:
        return result
    names = [table.split(".", 1)[1] for table in tables]
    pointers = current_pointers(catalog, namespace, names)
    plans = plan_members(catalog, namespace, [name for name in names if name in pointers], {}, pointers)
    _commit(catalog, ledger, plan, list(plans.values()))
    logger.info("group=%s: expired cuts %s (%d tables)", group.name, list(plan.cut_ids), len(plans))
    return result


def _commit(catalog: SqlCatalog, ledger: Ledger, plan: ExpiryPlan, plans: list[MemberPlan]) -> None:
    """Write each table's metadata without the expired tags and snapshots, then swap every pointer
    and move the cuts to the ledger's tombstones in one transaction."""
    warehouse = warehouse_of(catalog)
    if not plans:  # every table of the cuts was dropped: only the ledger changes
        with ledger.begin() as connection:
            ledger.expire_cuts(connection, plan.group, plan.cut_ids)
        return
    namespace = plans[0].identifier[0]
    attempt = Attempt.start(warehouse, plan.group, f"expire-{plan.cut_ids[0]}-{plan.cut_ids[-1]}", namespace, plans,
                            expires=plan.cut_ids)
    try:
        with settled(catalog, ledger, warehouse, attempt):
            parallel(lambda member: build_expiry(member, plan), plans, warehouse)
            with ledger.begin() as connection:
                swap_pointers(catalog, connection, plan.group, plans)
                ledger.expire_cuts(connection, plan.group, plan.cut_ids)
    except (PublishConflictError, LedgerError) as error:
        raise PublishConflictError(
            f"group {plan.group!r}: the expiry of cuts {list(plan.cut_ids)} lost to a concurrent change ({error}); "
            "nothing expired, the next expiry plans again"
        ) from error
