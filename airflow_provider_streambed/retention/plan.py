"""Which cuts of a group expire now, and what expiring them removes from each member table.

A cut is due when it is not among the newest ``keep_last``, was published before
``now - keep_newer_than`` and is not pinned (:func:`due_cuts`, pure). :func:`plan_expiry` reads
the due cuts' members from the ledger and lists, per member table, the cuts' tags and the
snapshots no kept cut uses (an :class:`~airflow_provider_streambed.publish.expiry.ExpiryPlan`, which
the commit stages: :func:`~airflow_provider_streambed.publish.expiry.stage_retention`).

Retention also bounds each member table's metadata log: a table that does not set
``write.metadata.previous-versions-max`` gets it set to ``keep_last`` by the next commit, so
the metadata files kept for the log grow with the retention, not with Iceberg's default of 100.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence

from airflow_provider_streambed.declarations import CutRetention, RefreshGroup
from airflow_provider_streambed.ledger import CutHead, Ledger, cut_tag
from airflow_provider_streambed.ledger.schema import now as utc_now
from airflow_provider_streambed.publish.expiry import ExpiryPlan, ExpiryPlanner, TableExpiry

#: At most this many cuts expire in one commit, so one run's expiry work stays bounded; a
#: backlog (retention just turned on) shrinks by this much per publish or ``cuts expire``.
MAX_CUTS_PER_COMMIT = 100


def due_cuts(
    heads: Sequence[CutHead], retention: CutRetention, now: dt.datetime, *, adding: int = 0,
    limit: int = MAX_CUTS_PER_COMMIT,
) -> tuple[int, ...]:
    """The ids of the cuts that expire at ``now``, oldest first, at most ``limit``.

    Args:
        heads: every cut of the group, oldest first.
        retention: the group's retention.
        now: the time the expiry is judged at.
        adding: cuts about to be published in the same commit (they count among the newest).
        limit: the most cuts to expire at once.
    """
    older = heads[: max(0, len(heads) + adding - retention.keep_last)]
    cutoff = now - retention.keep_newer_than
    return tuple(head.cut_id for head in older if not head.pinned and head.published_at < cutoff)[:limit]


def plan_expiry(
    ledger: Ledger, group: RefreshGroup, now: dt.datetime, *, adding: int = 0, within: Collection[str] | None = None
) -> ExpiryPlan:
    """The expiry due at ``now`` for ``group`` (empty without a retention).

    Args:
        ledger: the run ledger.
        group: the group declaration (its ``retention``).
        now: the time the expiry is judged at.
        adding: cuts published in the same commit (see :func:`due_cuts`).
        within: when given, only cuts whose member tables are all among these identifiers.
    """
    if group.retention is None:
        return ExpiryPlan(group.name)
    idle = ExpiryPlan(group.name, previous_versions=group.retention.keep_last)
    due = due_cuts(ledger.cut_heads(group.name), group.retention, now, adding=adding)
    cuts = ledger.cuts_by_id(group.name, due)
    if within is not None:
        cuts = {cut_id: cut for cut_id, cut in cuts.items()
                if all(member.table_identifier in within for member in cut.members.values())}
    if not cuts:
        return idle
    tags: dict[str, list[str]] = {}
    snapshots: dict[str, set[int]] = {}
    for cut_id, cut in sorted(cuts.items()):
        for member in cut.members.values():
            tags.setdefault(member.table_identifier, []).append(cut_tag(group.name, cut_id))
            snapshots.setdefault(member.table_identifier, set()).add(member.snapshot_id)
    used = ledger.snapshots_in_use(group.name, snapshots, excluding=cuts)
    tables = {
        table: TableExpiry(tuple(tags[table]), tuple(sorted(snapshots[table] - used.get(table, set()))))
        for table in tags
    }
    return ExpiryPlan(group.name, tuple(sorted(cuts)), tables, idle.previous_versions)


def publish_expiry(ledger: Ledger, group: RefreshGroup) -> ExpiryPlanner | None:
    """What a publish of ``group`` expires in its own commit (``None`` without a retention): the
    cuts due when the publish plans, counting its own cut, whose member tables are all the
    publish's; for :func:`~airflow_provider_streambed.publish.cut.publish_cut`'s ``expire``."""
    if group.retention is None:
        return None
    return lambda tables: plan_expiry(ledger, group, utc_now(), adding=1, within=tables)
