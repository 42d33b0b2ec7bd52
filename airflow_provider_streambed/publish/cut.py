"""Publishing one run's staged member outputs as the group's next cut, atomically and idempotently.

Steps: check the catalog can commit a group (before any work); return the run's cut if the
ledger has it; check the manifests (every member, one W, W above the last cut); load every
member table (one pointer query); move the staged files into the tables; record the attempt;
plan the expiry of cuts the group's retention lets go; build and write each member's new
metadata (in parallel on remote storage); swap all pointers, record the cut and expire the old
ones in one transaction (:mod:`.commit`); then delete this run's staging, abandoned runs' staging
and the metadata files of dead attempts, and apply the retention to what the commit could not
take (:mod:`airflow_provider_streambed.retention.maintenance`). The caller advances the
replication slot afterwards.

On a REST catalog (:mod:`.rest`) the steps differ after the checks: the member tables are loaded
through the catalog and a cut it holds but the ledger lacks is recorded first; the staged files
are uploaded into the tables; one multi-table commit carries every member's snapshot, tag and
cut mark; the cut is recorded in the ledger after it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Collection, Mapping

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import CommitTableRequest, CreateTableTransaction, Table, Transaction
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from airflow_provider_streambed.catalog import staging_of, warehouse_of
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import (
    CatalogCapabilityError,
    CatalogUnavailableError,
    ExpiryConflictError,
    PublishConflictError,
    PublishError,
    RunSupersededError,
    StagedOutputError,
    UnpublishableRunError,
)
from airflow_provider_streambed.ledger import CutMember, CutRecord, Ledger, RunState, cut_tag
from airflow_provider_streambed.ledger.schema import now
from airflow_provider_streambed.publish.attempts import Attempt, settled, sweep_attempts
from airflow_provider_streambed.publish.build import build_carried, build_member, stage_cut_updates
from airflow_provider_streambed.publish.cleanup import clean_staging
from airflow_provider_streambed.publish.commit import (
    AlreadyPublished,
    BeforeCommit,
    GroupCommit,
    group_commit_for,
    record_cut,
)
from airflow_provider_streambed.publish.draft import (
    CutDraft,
    carried_members,
    check_run,
    check_unchanged,
    run_watermark,
)
from airflow_provider_streambed.publish.iceberg.transaction import MemoTransaction
from airflow_provider_streambed.publish.members import BuiltMember, MemberPlan
from airflow_provider_streambed.publish.rest import (
    TRANSACTIONS_ENDPOINT,
    UNAVAILABLE,
    CutMark,
    carry_tag,
    commit_transactions,
    create_missing_tables,
    load_members,
    reaching,
    reconcile,
    reconcile_before_run,
    supports_transactions,
    table_change,
)
from airflow_provider_streambed.publish.staged import check_staged_output, move_staged_files
from airflow_provider_streambed.publish.tables import current_pointers, parallel, plan_members
from airflow_provider_streambed.retention.plan import plan_expiry
from airflow_provider_streambed.staging import (
    MemberManifest,
    publishing_marker_uri,
    read_json,
    staging_root,
    write_json,
)
from airflow_provider_streambed.staging.members import discard_member_output

logger = logging.getLogger(__name__)


def check_capability(catalog: Catalog, group: RefreshGroup, ledger: Ledger | None = None) -> bool:
    """Whether ``group``'s cuts commit atomically on ``catalog``; ``False`` when the group opted out
    (``per_table``).

    Raises:
        CatalogCapabilityError: the catalog has no group commit and ``group.atomicity`` is ``group``;
            or the group declares a retention on a REST catalog (not supported yet).
        PublishError: the ledger is not in the SQL catalog's database (its rows must commit with the cut).
    """
    if isinstance(catalog, RestCatalog) and group.retention is not None:
        raise CatalogCapabilityError(
            f"group {group.name!r}: catalog {catalog.name!r} is a REST catalog, and cut retention runs on SQL "
            "catalogs only so far: drop the group's retention (nothing expires), or use a SQL catalog"
        )
    if group.atomicity != "group":
        return False
    rest = isinstance(catalog, RestCatalog) and supports_transactions(catalog)
    if not rest and group_commit_for(catalog) is None:
        raise CatalogCapabilityError(
            f"group {group.name!r}: catalog {catalog.name!r} ({type(catalog).__name__}) cannot commit several "
            "tables atomically; use a SQL catalog (SQLite or PostgreSQL), a REST catalog whose server has "
            f"{TRANSACTIONS_ENDPOINT}, or declare atomicity='per_table' (weaker: readers may see a half-published cut)"
        )
    if ledger is not None and isinstance(catalog, SqlCatalog) and _url(ledger.engine) != _url(catalog.engine):
        raise PublishError(f"group {group.name!r}: the ledger must live in the catalog's database for an atomic cut")
    return True


def check_before_run(catalog: Catalog, ledger: Ledger, group: RefreshGroup) -> None:
    """At the start of a run, before it pins W or captures anything: refuse a group its catalog
    cannot publish (:func:`check_capability`, so no capture and refresh is spent on a run whose
    publish must fail) and, on a REST catalog, record a cut it holds but the ledger lacks
    (:func:`~.rest.reconcile_before_run`).

    Raises:
        CatalogCapabilityError, PublishError: see :func:`check_capability`.
        CatalogUnavailableError: the REST catalog did not answer.
    """
    check_capability(catalog, group, ledger)
    reconcile_before_run(catalog, ledger, group)


def _url(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def publish_cut(
    catalog: Catalog,
    ledger: Ledger,
    group: RefreshGroup,
    run_key: str,
    manifests: Mapping[str, MemberManifest],
    *,
    carried: Collection[str] = (),
    staging_retention_hours: float = 24.0,
    before_commit: BeforeCommit | None = None,
) -> CutRecord:
    """Publish the run's staged member outputs as the group's next cut.

    Args:
        catalog: the Iceberg catalog of the member tables (SQL, or REST with the multi-table commit).
        ledger: the run ledger: in a SQL catalog's database for an atomic cut; for a REST catalog,
            the database its ``streambed.ledger-uri`` names.
        group: the group declaration.
        run_key: the run key.
        manifests: the staged output of every member the run computed, all at the run's W.
        carried: the other members: they keep their snapshot of the last cut (tagged with this cut).
        staging_retention_hours: how long staging of pinned (possibly running) runs is kept.
        before_commit: called inside the transaction after the pointer updates (fault injection).

    Returns:
        The cut, also when the run had published it before (then nothing changes), or when a
        concurrent publisher of the run recorded it while this attempt failed.

    Raises:
        CatalogCapabilityError: see :func:`check_capability`.
        PublishConflictError: another writer changed a member table or published meanwhile.
        PublishError: the manifests or the ledger do not allow the publish.
        StagedOutputError: a member's staged output is unusable: a file truncated or lost
            (DamagedOutputError) or a column's type changed beyond a widening (OutputSchemaError);
            its output is discarded for the refresh to compute again. UnpublishableRunError
            (final) when an earlier attempt had moved files already.
    """
    atomic = check_capability(catalog, group, ledger)
    tables = _reconciled_members(catalog, ledger, group, run_key) if isinstance(catalog, RestCatalog) else {}
    existing = ledger.cut_for_run(group.name, run_key)
    last = ledger.last_cut(group.name)
    if existing is None and last is not None and last.run_key == run_key:
        existing = last  # a concurrent publisher of this run committed between the two reads
    if existing is not None:
        logger.info("group=%s cut=%d W=%s: run %s was published before", group.name, existing.cut_id,
                    existing.watermark, run_key)
        _clean_up(catalog, ledger, group, run_key, existing, staging_retention_hours)
        return existing
    pinned = ledger.get_run(group.name, run_key)
    watermark = run_watermark(group, run_key, manifests, carried, pinned.watermark if pinned else None)
    check_run(ledger, group.name, run_key, watermark, last)
    cut_id = 1 if last is None else last.cut_id + 1
    started = time.perf_counter()
    draft = CutDraft(group, run_key, watermark, cut_id, last, manifests,
                     carried_members(group.name, run_key, carried, last))
    root = staging_root(staging_of(catalog), group.name, run_key)
    try:
        record = _publish(catalog, ledger, draft, root, atomic, tables, before_commit)
    except Exception as error:
        if (found := _published_meanwhile(ledger, group.name, run_key)) is None:
            if isinstance(error, StagedOutputError):
                raise _unusable_output(error, root, run_key) from error
            raise
        log = logger.info if isinstance(error, PublishConflictError) else logger.warning
        log("group=%s cut=%d W=%s: a concurrent publisher of run %s won; this attempt failed: %s: %s", group.name,
            found.cut_id, found.watermark, run_key, type(error).__name__, error)
        _clean_up(catalog, ledger, group, run_key, found, staging_retention_hours)
        return found
    logger.info("group=%s cut=%d W=%s: published %d members in %.3f s", group.name, record.cut_id, watermark,
                len(record.members), time.perf_counter() - started)
    _clean_up(catalog, ledger, group, run_key, record, staging_retention_hours)
    return record


def _publish(
    catalog: Catalog, ledger: Ledger, draft: CutDraft, root: str, atomic: bool, tables: Mapping[str, Table],
    before_commit: BeforeCommit | None,
) -> CutRecord:
    """Publish the drafted cut the way the catalog and the group's atomicity call for."""
    if atomic and isinstance(catalog, RestCatalog):
        with reaching(catalog, "retry the run: it first looks in the catalog for a cut this publish committed"):
            return _publish_rest(catalog, ledger, draft, root, tables)
    if atomic:
        commit = group_commit_for(catalog)
        assert isinstance(catalog, SqlCatalog) and commit is not None  # pointers and attempts: its tables
        try:
            return _publish_group(catalog, ledger, draft, root, commit, before_commit)
        except ExpiryConflictError as error:  # a pin landed on a cut this commit expired: plan once more
            logger.info("group=%s: %s", draft.group.name, error)
            return _publish_group(catalog, ledger, draft, root, commit, before_commit)
    return _publish_per_table(catalog, ledger, draft, root, tables)


def _published_meanwhile(ledger: Ledger, group: str, run_key: str) -> CutRecord | None:
    """The run's cut when a concurrent publisher of the run recorded it while this attempt failed.

    Whatever the attempt's failure (a conflict on the pointers, or its files deleted by the
    winner's sweep of dead attempts mid-build), the run is published then. ``None`` when the
    ledger cannot answer either: the attempt's own error stands.
    """
    try:
        return ledger.cut_for_run(group, run_key)
    except Exception as error:  # the ledger is down too (or broken): the caller re-raises its own error
        logger.warning("group=%s: cannot look run %s up in the ledger after a failed attempt: %s: %s", group, run_key,
                       type(error).__name__, error)
        return None


def _reconciled_members(catalog: RestCatalog, ledger: Ledger, group: RefreshGroup, run_key: str) -> dict[str, Table]:
    """The member tables that exist, after recording a cut the catalog holds but the ledger lacks.

    Raises:
        UnpublishableRunError: that cut is another run's: this run's output was computed on the
            cut before it (a run starting after the reconciliation is planned on it).
    """
    with reaching(catalog):
        tables = load_members(catalog, group.namespace, [member.name for member in group.members])
        found = reconcile(catalog, ledger, group, tables)
    if found is not None and found.run_key != run_key:
        raise UnpublishableRunError(
            f"run {run_key!r} cannot publish: the catalog held cut {found.cut_id} of run {found.run_key!r}, which "
            "the ledger lacked (recorded now); this run's output was computed on the cut before it, so the run is "
            "failed and the group's next run publishes on the new cut"
        )
    return tables


def _check_then_mark(
    plans: Mapping[str, MemberPlan], manifests: Mapping[str, MemberManifest], run_key: str, root: str
) -> None:
    """Check every member's staged output, then record, before the first staged file moves into
    a table, that this run's publish began.

    Raises:
        StagedOutputError: see :func:`check_staged_output`.
    """
    for name, manifest in manifests.items():
        check_staged_output(plans[name], manifest, run_key)
    write_json(publishing_marker_uri(root), {"run_key": run_key, "started_at": now().isoformat()})


def _unusable_output(error: StagedOutputError, root: str, run_key: str) -> PublishError:
    """What a member's unusable staged output makes of the publish (nothing was published).

    Before any attempt moved files into the tables, the member's output is discarded and the
    error is retryable: the refresh step computes the member again. After, the member's inputs
    may have moved (its sources' output, its bootstrap copy), so the run is failed.
    """
    if read_json(publishing_marker_uri(root)) is None:
        discard_member_output(root, error.member)
        return type(error)(f"{error}; nothing was published and the member's staged output was discarded: run the "
                           "refresh step again (clear refresh_group, or retry the run) to compute it", error.member)
    return UnpublishableRunError(
        f"run {run_key!r} cannot publish: {error}; an attempt of this run already moved staged files into the "
        "tables, so the member cannot be computed again under this run: the run is failed and the group's next "
        "run publishes a new cut"
    )


def _publish_group(
    catalog: SqlCatalog, ledger: Ledger, draft: CutDraft, root: str, commit: GroupCommit,
    before_commit: BeforeCommit | None,
) -> CutRecord:
    """Atomic publish: every member pointer and the ledger rows in one catalog commit (staged at ``root``)."""
    group, run_key, manifests = draft.group, draft.run_key, draft.manifests
    warehouse = warehouse_of(catalog)
    pointers = current_pointers(catalog, group.namespace, draft.members)
    plans = plan_members(catalog, group.namespace, draft.members, manifests, pointers, run_key)
    check_unchanged(group.name, plans, draft.last)
    _check_then_mark(plans, manifests, run_key, root)
    files = {name: move_staged_files(plans[name], manifests[name], run_key) for name in manifests}
    attempt = Attempt.start(warehouse, group.name, run_key, group.namespace, plans.values())
    tag = cut_tag(group.name, draft.cut_id)
    expiry = plan_expiry(ledger, group, now(), adding=1, within={plan.table_name for plan in plans.values()})

    def build(plan: MemberPlan) -> BuiltMember:
        if (kept := draft.carried.get(plan.member)) is not None:
            return build_carried(plan, kept.snapshot_id, tag, expiry)
        return build_member(plan, files[plan.member], draft.snapshot_properties(plan.member), tag,
                            attempt.commit_uuid, expiry)

    try:
        with settled(catalog, ledger, warehouse, attempt):
            built = parallel(build, plans.values(), warehouse)
            return commit(ledger, group.name, run_key, draft.watermark, draft.cut_id,
                          {member.plan.member: member for member in built}, before_commit, expiry.cut_ids)
    except AlreadyPublished as found:
        return found.record
    except IntegrityError as error:
        raise PublishConflictError(
            f"group {group.name!r}, run {run_key!r}: another publisher recorded this run or W={draft.watermark} "
            "meanwhile; nothing was published"
        ) from error


def _publish_rest(
    catalog: RestCatalog, ledger: Ledger, draft: CutDraft, root: str, loaded: Mapping[str, Table]
) -> CutRecord:
    """Atomic publish through a REST catalog: staged files uploaded into the tables, then every
    member's snapshot, tag and cut mark in one multi-table commit, then the cut recorded in the
    ledger (:mod:`.rest`; a lost ledger write is reconciled by the next publish). ``loaded``: the
    member tables that exist, as loaded for the reconciliation."""
    group, run_key, manifests = draft.group, draft.run_key, draft.manifests
    tables = create_missing_tables(catalog, group.namespace, manifests, loaded)
    plans = {name: MemberPlan(name, (group.namespace, name), tables[name], tables[name].metadata_location, "")
             for name in draft.members}
    check_unchanged(group.name, plans, draft.last)
    _check_then_mark(plans, manifests, run_key, root)
    remote = plans[next(iter(plans))].table.metadata.location
    files = parallel(lambda name: move_staged_files(plans[name], manifests[name], run_key), list(manifests), remote)
    moved = dict(zip(manifests, files, strict=True))
    tag, mark = cut_tag(group.name, draft.cut_id), CutMark(group.name, draft.cut_id, run_key, draft.watermark)
    commit_uuid = uuid.uuid4()

    def build(plan: MemberPlan) -> tuple[CommitTableRequest, int]:
        """The member's part of the commit, and its snapshot in the cut."""
        transaction = MemoTransaction(plan.table)
        if (kept := draft.carried.get(plan.member)) is not None:
            carry_tag(transaction, kept.snapshot_id, tag)
            return table_change(transaction, mark), kept.snapshot_id
        snapshot_id = stage_cut_updates(transaction, moved[plan.member], draft.snapshot_properties(plan.member), tag,
                                        commit_uuid)
        return table_change(transaction, mark), snapshot_id

    built = dict(zip(plans, parallel(build, plans.values(), remote), strict=True))
    run = ledger.get_run(group.name, run_key)
    if run is not None and run.state != RunState.PINNED:  # superseded (by hand) while it was built
        raise RunSupersededError(f"group {group.name!r}, run {run_key!r} is {run.state.value}, no longer pinned; "
                                 "nothing was published")
    if not commit_transactions(catalog, group.name, [change for change, _ in built.values()]):
        if (record := reconcile(catalog, ledger, group)) is None or record.run_key != run_key:
            raise PublishError(f"group {group.name!r}, run {run_key!r}: the multi-table commit's outcome is unknown "
                               "and the catalog does not hold this cut (yet): retry the run, which looks again first")
        return record
    try:
        committed = load_members(catalog, group.namespace, list(plans))
    except UNAVAILABLE as error:
        raise CatalogUnavailableError(
            f"group {group.name!r}, run {run_key!r}: the cut was committed to the catalog, which then stopped "
            f"answering ({type(error).__name__}) before the cut was recorded; retry the run: it records the cut"
        ) from error
    members = {name: CutMember(name, plan.table_name, built[name][1], committed[name].metadata_location)
               for name, plan in plans.items()}
    with ledger.begin() as connection:  # a concurrent reconciliation of the cut fails it: see publish_cut
        if ledger.set_run_state(group.name, run_key, RunState.PINNED, connection, only_from=RunState.SUPERSEDED):
            logger.warning("group=%s: run %s was superseded while its multi-table commit was in flight; the commit "
                           "applied, so the run published its cut", group.name, run_key)
        return record_cut(ledger, connection, group.name, run_key, draft.watermark, draft.cut_id, members)


def _publish_per_table(
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
    _check_then_mark(plans, manifests, run_key, root)
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


def _clean_up(
    catalog: Catalog, ledger: Ledger, group: RefreshGroup, run_key: str, record: CutRecord, retention: float
) -> None:
    """Delete staging and orphaned metadata, apply the group's retention; failures are logged, never
    raised (the cut is published)."""
    try:
        if isinstance(catalog, SqlCatalog) and group.retention is None:  # apply_retention sweeps after its expiry
            sweep_attempts(catalog, ledger, warehouse_of(catalog), group.name)
        locations = [member.table_location for member in record.members.values()]
        clean_staging(ledger, staging_of(catalog), group.name, run_key, locations, retention, catalog.properties)
        if group.retention is not None and isinstance(catalog, SqlCatalog):
            from airflow_provider_streambed.retention.maintenance import apply_retention  # it imports this package

            apply_retention(catalog, ledger, group, after_publish=True)
    except Exception as error:  # the cut stands; the next publish sweeps again
        logger.warning("group=%s: cleanup after publish failed: %s", group.name, error)
