"""The per-table strategy (``atomicity='per_table'``): each member committed on its own through
pyiceberg, then the cut recorded; readers may see a half-published cut."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.table import CreateTableTransaction, Table, Transaction

from airflow_provider_streambed.ledger import CutRecord, Ledger, cut_tag
from airflow_provider_streambed.publish.build import stage_cut_updates
from airflow_provider_streambed.publish.draft import CutDraft, check_unchanged
from airflow_provider_streambed.publish.members import BuiltMember
from airflow_provider_streambed.publish.record import record_cut
from airflow_provider_streambed.publish.rest import create_missing_tables
from airflow_provider_streambed.publish.staged import check_then_mark, move_staged_files
from airflow_provider_streambed.publish.tables import load_members, plan_members

logger = logging.getLogger(__name__)


def publish_per_table(
    catalog: Catalog, ledger: Ledger, draft: CutDraft, root: str, loaded: Mapping[str, Table]
) -> CutRecord:
    """Weaker publish: each member committed on its own through pyiceberg, then the cut recorded.
    ``loaded``: a REST catalog's member tables, as loaded for the reconciliation."""
    group, run_key, manifests = draft.group, draft.run_key, draft.manifests
    logger.warning("group=%s: atomicity=per_table, readers may see a half-published cut", group.name)
    if isinstance(catalog, RestCatalog):  # a REST server creates the tables; pyiceberg cannot stage them
        loaded = create_missing_tables(catalog, group.namespace, manifests, loaded)
    else:
        loaded = load_members(catalog, group.namespace, draft.members)
    pointers = {name: table.metadata_location for name, table in loaded.items()}
    plans = plan_members(catalog, group.namespace, draft.members, manifests, pointers, run_key)
    check_unchanged(group.name, plans, draft.last)
    check_then_mark(plans, manifests, run_key, root)
    tag = cut_tag(group.name, draft.cut_id)
    built = {}
    for plan in plans.values():
        if (kept := draft.carried.get(plan.member)) is not None:
            plan.table.manage_snapshots().create_tag(kept.snapshot_id, tag).commit()
            location = catalog.load_table(plan.identifier).metadata_location
            built[plan.member] = BuiltMember(plan, kept.snapshot_id, location)
            continue
        files = move_staged_files(plan, manifests[plan.member], run_key)
        if plan.base_location is None:
            transaction: Transaction = CreateTableTransaction(plan.table)  # type: ignore[arg-type]  # a StagedTable
        else:
            transaction = plan.table.transaction()
        snapshot_id = stage_cut_updates(transaction, files, draft.snapshot_properties(plan.member), tag, None)
        built[plan.member] = BuiltMember(plan, snapshot_id, transaction.commit_transaction().metadata_location)
    with ledger.begin() as connection:
        members = {name: member.cut_member() for name, member in built.items()}
        return record_cut(ledger, connection, group.name, run_key, draft.watermark, draft.cut_id, members)
