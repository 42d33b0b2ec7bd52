"""Publishing one run's staged member outputs as the group's next cut, atomically and idempotently.

Steps: check the catalog can commit a group (before any work); return the run's cut if the
ledger has it; check the manifests (every member, one W, W above the last cut); then the
strategy the catalog and the group's atomicity call for: on a SQL catalog (:mod:`.sql`) load
every member table (one pointer query); move the staged files into the tables; record the
attempt; plan the expiry of cuts the group's retention lets go; build and write each member's
new metadata (in parallel on remote storage); swap all pointers, record the cut and expire the
old ones in one transaction. Per table (:mod:`.per_table`), each member commits on its own. Then
delete this run's staging, abandoned runs' staging and the metadata files of dead attempts.

Which cuts expire is the retention's policy: its caller hands publish a planner (``expire``). The
caller then applies the group's retention to what the commit could not take
(:func:`airflow_provider_streambed.retention.maintenance.apply_retention_after_publish`, which
also sweeps dead attempts after its expiry) and advances the replication slot.

On a REST catalog (:mod:`.rest`) the steps differ after the checks: the member tables are loaded
through the catalog and a cut it holds but the ledger lacks is recorded first; the staged files
are uploaded into the tables; one multi-table commit carries every member's snapshot, tag and
cut mark; the cut is recorded in the ledger after it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from sqlalchemy import Engine

from airflow_provider_streambed.catalog import staging_of, warehouse_of
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import (
    CatalogCapabilityError,
    ExpiryConflictError,
    PublishConflictError,
    PublishError,
    StagedOutputError,
    UnpublishableRunError,
)
from airflow_provider_streambed.ledger import CutRecord, Ledger
from airflow_provider_streambed.publish.attempts import sweep_attempts
from airflow_provider_streambed.publish.cleanup import clean_staging
from airflow_provider_streambed.publish.draft import CutDraft, carried_members, check_run, run_watermark
from airflow_provider_streambed.publish.expiry import ExpiryPlanner
from airflow_provider_streambed.publish.per_table import publish_per_table
from airflow_provider_streambed.publish.reconcile import reaching, reconcile_before_run, reconciled_members
from airflow_provider_streambed.publish.rest import TRANSACTIONS_ENDPOINT, publish_rest, supports_transactions
from airflow_provider_streambed.publish.sql import BeforeCommit, group_commit_for, publish_group
from airflow_provider_streambed.staging import MemberManifest, publishing_marker_uri, read_json, staging_root
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
    (:func:`~.reconcile.reconcile_before_run`).

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
    expire: ExpiryPlanner | None = None,
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
        expire: plans the expiry of cuts the group's retention lets go, folded into the commit of a
            SQL catalog (:func:`airflow_provider_streambed.retention.plan.publish_expiry`); ``None``:
            nothing expires. The caller applies the rest of the retention after the publish.

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
    tables = reconciled_members(catalog, ledger, group, run_key) if isinstance(catalog, RestCatalog) else {}
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
        record = _publish(catalog, ledger, draft, root, atomic, tables, before_commit, expire)
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
    before_commit: BeforeCommit | None, expire: ExpiryPlanner | None,
) -> CutRecord:
    """Publish the drafted cut the way the catalog and the group's atomicity call for."""
    if atomic and isinstance(catalog, RestCatalog):
        with reaching(catalog, "retry the run: it first looks in the catalog for a cut this publish committed"):
            return publish_rest(catalog, ledger, draft, root, tables)
    if atomic:
        commit = group_commit_for(catalog)
        assert isinstance(catalog, SqlCatalog) and commit is not None  # pointers and attempts: its tables
        try:
            return publish_group(catalog, ledger, draft, root, commit, before_commit, expire)
        except ExpiryConflictError as error:  # a pin landed on a cut this commit expired: plan once more
            logger.info("group=%s: %s", draft.group.name, error)
            return publish_group(catalog, ledger, draft, root, commit, before_commit, expire)
    return publish_per_table(catalog, ledger, draft, root, tables)


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


def _clean_up(
    catalog: Catalog, ledger: Ledger, group: RefreshGroup, run_key: str, record: CutRecord, retention: float
) -> None:
    """Delete staging and orphaned metadata; failures are logged, never raised (the cut is published).

    With a retention declared, the caller's retention after the publish sweeps dead attempts, after
    its expiry (which may kill more).
    """
    try:
        if isinstance(catalog, SqlCatalog) and group.retention is None:
            sweep_attempts(catalog, ledger, warehouse_of(catalog), group.name)
        locations = [member.table_location for member in record.members.values()]
        clean_staging(ledger, staging_of(catalog), group.name, run_key, locations, retention, catalog.properties)
    except Exception as error:  # the cut stands; the next publish sweeps again
        logger.warning("group=%s: cleanup after publish failed: %s", group.name, error)
