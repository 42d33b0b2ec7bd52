"""Publishing one run's staged member outputs as the group's next cut, atomically and idempotently.

Steps: check the catalog can commit a group (before any work); return the run's cut if the
ledger has it; check the manifests (every member, one W, W above the last cut); load every
member table (one pointer query); move the staged files into the tables; record the attempt;
build and write each member's new metadata (in parallel on remote storage); swap all pointers and record the cut
in one transaction (:mod:`.commit`); then delete this run's staging, abandoned runs' staging
and the metadata files of dead attempts. The caller advances the replication slot afterwards.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import CreateTableTransaction, Transaction
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from airflow_provider_streambed.catalog import warehouse_of
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import (
    CatalogCapabilityError,
    PublishConflictError,
    PublishError,
    RunSupersededError,
)
from airflow_provider_streambed.ledger import CutRecord, Ledger, RunState
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish.attempts import Attempt, abandon, sweep_attempts
from airflow_provider_streambed.publish.cleanup import clean_staging
from airflow_provider_streambed.publish.commit import (
    AlreadyPublished,
    BeforeCommit,
    GroupCommit,
    group_commit_for,
    record_cut,
)
from airflow_provider_streambed.publish.tables import (
    BuiltMember,
    MemberPlan,
    build_member,
    current_pointers,
    cut_tag,
    move_staged_files,
    parallel,
    plan_members,
    stage_cut_updates,
)
from airflow_provider_streambed.staging import MemberManifest

logger = logging.getLogger(__name__)

#: Snapshot summary properties every member snapshot of a cut carries.
GROUP_PROPERTY = "streambed.group"
CUT_ID_PROPERTY = "streambed.cut-id"
WATERMARK_PROPERTY = "streambed.watermark-lsn"
RUN_KEY_PROPERTY = "streambed.run-key"


def check_capability(catalog: Catalog, group: RefreshGroup, ledger: Ledger | None = None) -> GroupCommit | None:
    """The catalog's atomic group commit for ``group``; ``None`` when the group opted out (``per_table``).

    Raises:
        CatalogCapabilityError: the catalog has no group commit and ``group.atomicity`` is ``group``.
        PublishError: the ledger is not in the SQL catalog's database (its rows must commit with the cut).
    """
    if group.atomicity != "group":
        return None
    commit = group_commit_for(catalog)
    if commit is None:
        raise CatalogCapabilityError(
            f"group {group.name!r}: catalog {catalog.name!r} ({type(catalog).__name__}) cannot commit several "
            "tables atomically; use a SQL catalog (SQLite or PostgreSQL) or declare atomicity='per_table' "
            "(weaker: readers may see a half-published cut)"
        )
    if ledger is not None and isinstance(catalog, SqlCatalog) and _url(ledger.engine) != _url(catalog.engine):
        raise PublishError(f"group {group.name!r}: the ledger must live in the catalog's database for an atomic cut")
    return commit


def _url(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def run_watermark(group: RefreshGroup, run_key: str, manifests: Mapping[str, MemberManifest]) -> Lsn:
    """The run's W: the one watermark of all manifests, which must cover exactly the members.

    Raises:
        PublishError: members are missing or unknown, or the manifests disagree on W.
    """
    names = {member.name for member in group.members}
    if missing := sorted(names - set(manifests)):
        raise PublishError(f"group {group.name!r}, run {run_key!r}: no staged output for members {missing}")
    if unknown := sorted(set(manifests) - names):
        raise PublishError(f"group {group.name!r}, run {run_key!r}: staged output of unknown members {unknown}")
    watermarks = {manifest.watermark for manifest in manifests.values()}
    if len(watermarks) != 1:
        found = {name: str(manifest.watermark) for name, manifest in sorted(manifests.items())}
        raise PublishError(f"group {group.name!r}, run {run_key!r}: members were staged at different W: {found}")
    return watermarks.pop()


def check_unchanged(group: str, plans: Mapping[str, MemberPlan], last: CutRecord | None) -> None:
    """Refuse to publish over a member table that another writer changed since the last cut.

    Raises:
        PublishConflictError: a member table's current snapshot is not the one of the last cut.
    """
    for plan in plans.values():
        previous = None if last is None else last.members.get(plan.member)
        current = plan.table.metadata.current_snapshot_id
        if previous is not None and plan.base_location is not None and current != previous.snapshot_id:
            raise PublishConflictError(
                f"group {group!r}, member {plan.member!r}: table {plan.table_name} is at snapshot {current}, "
                f"not at cut {last.cut_id if last else 0}'s snapshot {previous.snapshot_id}: another writer "
                "changed it; nothing was published"
            )


def _check_run(ledger: Ledger, group: str, run_key: str, watermark: Lsn, last: CutRecord | None) -> None:
    """Check the run against the ledger and the group's last cut."""
    run = ledger.get_run(group, run_key)
    if run is not None and run.watermark != watermark:
        raise PublishError(
            f"group {group!r}, run {run_key!r}: staged at W={watermark} but the ledger pinned W={run.watermark}"
        )
    if run is not None and run.state == RunState.SUPERSEDED:
        by = f" by run {run.replaced_by}" if run.replaced_by else ""
        raise RunSupersededError(
            f"group {group!r}, run {run_key!r} (W={watermark}) was superseded{by}; it cannot publish"
        )
    if run is not None and run.state == RunState.UNCHANGED:
        raise PublishError(
            f"group {group!r}, run {run_key!r} (W={watermark}) found nothing new; it has no cut to publish"
        )
    if last is not None and watermark <= last.watermark:
        raise PublishError(
            f"group {group!r}, run {run_key!r}: W={watermark} is not above cut {last.cut_id}'s W={last.watermark}"
        )


def publish_cut(
    catalog: Catalog,
    ledger: Ledger,
    group: RefreshGroup,
    run_key: str,
    manifests: Mapping[str, MemberManifest],
    *,
    staging_retention_hours: float = 24.0,
    before_commit: BeforeCommit | None = None,
) -> CutRecord:
    """Publish the run's staged member outputs as the group's next cut.

    Args:
        catalog: the Iceberg catalog of the member tables.
        ledger: the run ledger, in the catalog's database for an atomic cut.
        group: the group declaration.
        run_key: the run key.
        manifests: every member's staged output, all at the run's W.
        staging_retention_hours: how long staging of pinned (possibly running) runs is kept.
        before_commit: called inside the transaction after the pointer updates (fault injection).

    Returns:
        The cut, also when the run had published it before (then nothing changes).

    Raises:
        CatalogCapabilityError: see :func:`check_capability`.
        PublishConflictError: another writer changed a member table or published meanwhile.
        PublishError: the manifests or the ledger do not allow the publish.
    """
    commit = check_capability(catalog, group, ledger)
    existing = ledger.cut_for_run(group.name, run_key)
    last = ledger.last_cut(group.name)
    if existing is None and last is not None and last.run_key == run_key:
        existing = last  # a concurrent publisher of this run committed between the two reads
    if existing is not None:
        logger.info("group=%s cut=%d W=%s: run %s was published before", group.name, existing.cut_id,
                    existing.watermark, run_key)
        _clean_up(catalog, ledger, group.name, run_key, existing, staging_retention_hours)
        return existing
    watermark = run_watermark(group, run_key, manifests)
    _check_run(ledger, group.name, run_key, watermark, last)
    cut_id = 1 if last is None else last.cut_id + 1
    started = time.perf_counter()
    properties = {
        GROUP_PROPERTY: group.name,
        CUT_ID_PROPERTY: str(cut_id),
        WATERMARK_PROPERTY: str(watermark),
        RUN_KEY_PROPERTY: run_key,
    }
    draft = _Draft(group, run_key, watermark, cut_id, last, manifests, properties)
    try:
        if commit is not None:
            assert isinstance(catalog, SqlCatalog)  # pointers and attempts are read from its tables (REST: issue 16)
            record = _publish_group(catalog, ledger, draft, commit, before_commit)
        else:
            record = _publish_per_table(catalog, ledger, draft)
    except PublishConflictError:
        if (found := ledger.cut_for_run(group.name, run_key)) is None:
            raise
        logger.info("group=%s cut=%d W=%s: a concurrent publisher of run %s won", group.name, found.cut_id,
                    watermark, run_key)
        record = found
    logger.info("group=%s cut=%d W=%s: published %d members in %.3f s", group.name, record.cut_id, watermark,
                len(record.members), time.perf_counter() - started)
    _clean_up(catalog, ledger, group.name, run_key, record, staging_retention_hours)
    return record


@dataclass(frozen=True)
class _Draft:
    """The cut a run is about to publish: its number, W, snapshot properties and staged outputs."""

    group: RefreshGroup
    run_key: str
    watermark: Lsn
    cut_id: int
    last: CutRecord | None
    manifests: Mapping[str, MemberManifest]
    properties: dict[str, str]


def _publish_group(
    catalog: SqlCatalog, ledger: Ledger, draft: _Draft, commit: GroupCommit, before_commit: BeforeCommit | None
) -> CutRecord:
    """Atomic publish: every member pointer and the ledger rows in one catalog commit."""
    group, run_key, manifests = draft.group, draft.run_key, draft.manifests
    warehouse = warehouse_of(catalog)
    plans = plan_members(catalog, group.namespace, manifests, current_pointers(catalog, group.namespace, manifests))
    check_unchanged(group.name, plans, draft.last)
    files = {name: move_staged_files(plans[name], manifests[name].files, run_key) for name in plans}
    attempt = Attempt.start(warehouse, group.name, run_key, group.namespace, plans.values())
    tag = cut_tag(group.name, draft.cut_id)
    try:
        built = parallel(
            lambda p: build_member(p, files[p.member], draft.properties, tag, attempt.commit_uuid), plans.values(),
            warehouse,
        )
        record = commit(ledger, group.name, run_key, draft.watermark, draft.cut_id,
                        {member.plan.member: member for member in built}, before_commit)
    except AlreadyPublished as found:
        abandon(catalog, warehouse, attempt)
        return found.record
    except IntegrityError as error:
        abandon(catalog, warehouse, attempt)
        raise PublishConflictError(
            f"group {group.name!r}, run {run_key!r}: another publisher recorded this run or W={draft.watermark} "
            "meanwhile; nothing was published"
        ) from error
    except BaseException:
        abandon(catalog, warehouse, attempt)
        raise
    attempt.forget(warehouse)
    return record


def _publish_per_table(catalog: Catalog, ledger: Ledger, draft: _Draft) -> CutRecord:
    """Weaker publish: each member committed on its own through pyiceberg, then the cut recorded."""
    group, run_key, manifests = draft.group, draft.run_key, draft.manifests
    logger.warning("group=%s: atomicity=per_table, readers may see a half-published cut", group.name)
    pointers = {}
    for name in manifests:
        try:
            pointers[name] = catalog.load_table((group.namespace, name)).metadata_location
        except NoSuchTableError:
            continue
    plans = plan_members(catalog, group.namespace, manifests, pointers)
    check_unchanged(group.name, plans, draft.last)
    tag = cut_tag(group.name, draft.cut_id)
    built = {}
    for plan in plans.values():
        files = move_staged_files(plan, manifests[plan.member].files, run_key)
        if plan.base_location is None:
            transaction: Transaction = CreateTableTransaction(plan.table)  # type: ignore[arg-type]  # a StagedTable
        else:
            transaction = plan.table.transaction()
        snapshot_id = stage_cut_updates(transaction, files, draft.properties, tag, None)
        built[plan.member] = BuiltMember(plan, snapshot_id, transaction.commit_transaction().metadata_location)
    with ledger.begin() as connection:
        return record_cut(ledger, connection, group.name, run_key, draft.watermark, draft.cut_id, built)


def _clean_up(catalog: Catalog, ledger: Ledger, group: str, run_key: str, record: CutRecord, retention: float) -> None:
    """Delete staging and orphaned metadata; failures are logged, never raised (the cut is published)."""
    warehouse = warehouse_of(catalog)
    try:
        if isinstance(catalog, SqlCatalog):
            sweep_attempts(catalog, warehouse, group)
        # <table>/metadata/<file>.metadata.json -> <table>
        locations = [member.metadata_location.rsplit("/", 2)[0] for member in record.members.values()]
        clean_staging(ledger, warehouse, group, run_key, locations, retention)
    except Exception as error:  # the cut stands; the next publish sweeps again
        logger.warning("group=%s: cleanup after publish failed: %s", group, error)
