"""The REST catalog's strategy: every member's changes in one ``POST /v1/{prefix}/transactions/commit``.

The Iceberg REST spec's multi-table commit applies every table's updates or none: each table's
requirements (``assert-table-uuid``, ``assert-ref-snapshot-id`` on ``main``) are checked by the
server, so a writer that changed any member since it was loaded makes the whole cut fail (409).
The commit also marks every member with the cut (:class:`~.reconcile.CutMark`); the cut is
recorded in the ledger after it, and a lost ledger write is recorded from the catalog by the next
publish or run (:func:`~.reconcile.reconcile`).

pyiceberg 0.12 has no client call for the endpoint: the request is built from each member
transaction's staged updates and requirements (:mod:`.iceberg.transaction`) and posted on the
catalog's own signed session (:mod:`.iceberg.rest`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

import requests
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import DEFAULT_ENDPOINTS, VIEW_ENDPOINTS, Endpoint, RestCatalog
from pyiceberg.table import CommitTableRequest, Namespace, Table, TableIdentifier, Transaction
from pyiceberg.table.update import AssertRefSnapshotId, AssertTableUUID, TableRequirement
from pyiceberg.table.update.snapshot import ManageSnapshots

from airflow_provider_streambed.exceptions import (
    CatalogUnavailableError,
    PublishConflictError,
    PublishError,
    RunSupersededError,
)
from airflow_provider_streambed.ledger import CutMember, CutRecord, Ledger, RunState, cut_tag
from airflow_provider_streambed.publish.build import stage_cut_updates
from airflow_provider_streambed.publish.draft import CutDraft, check_unchanged
from airflow_provider_streambed.publish.iceberg.rest import post_json, supported_endpoints
from airflow_provider_streambed.publish.iceberg.transaction import (
    MemoTransaction,
    staged_requirements,
    staged_updates,
    transaction_table,
)
from airflow_provider_streambed.publish.members import MemberPlan
from airflow_provider_streambed.publish.reconcile import (
    CUT_PROPERTY,
    UNAVAILABLE,
    CutMark,
    describe,
    reaching,
    reconcile,
)
from airflow_provider_streambed.publish.record import record_cut
from airflow_provider_streambed.publish.staged import check_then_mark, move_staged_files
from airflow_provider_streambed.publish.tables import load_members, new_table_schema, parallel
from airflow_provider_streambed.staging import MemberManifest

logger = logging.getLogger(__name__)

#: The multi-table commit of the Iceberg REST spec.
TRANSACTIONS_ENDPOINT = Endpoint.from_string("POST /v1/{prefix}/transactions/commit")
#: Status codes a server answers for an endpoint it does not have.
ABSENT = (404, 405, 501)
#: The status code of a server that has the endpoint and refuses an empty commit (Nessie 0.99).
INVALID = 400
#: Status codes after which the commit may or may not have applied (the spec's CommitStateUnknown).
UNKNOWN = (500, 502, 503, 504)


def supports_transactions(catalog: RestCatalog) -> bool:
    """Whether the server has the multi-table commit.

    From the ``endpoints`` list of ``GET /v1/config`` when the server sends one; else (SeaweedFS
    and Nessie 0.99 send none) by posting an empty commit, which such a server accepts (SeaweedFS:
    204) or refuses as invalid (Nessie: 400, "Invalid table changes: empty"), and others refuse as
    unknown (404, 405 or 501). pyiceberg keeps its defaults when no list came, so a list of
    default endpoints only is probed too.

    Raises:
        CatalogUnavailableError: the probe had no answer, or one that says neither.
    """
    endpoints = supported_endpoints(catalog)
    if TRANSACTIONS_ENDPOINT in endpoints:
        return True
    if not endpoints <= set(DEFAULT_ENDPOINTS) | set(VIEW_ENDPOINTS):  # the server listed its endpoints
        return False
    with reaching(catalog):
        response = _post_commit(catalog, [])
    if response.status_code in ABSENT:
        return False
    if response.ok or response.status_code == INVALID:
        return True
    raise CatalogUnavailableError(f"catalog {catalog.name!r}: {describe(catalog)} answered {response.status_code} to "
                                  "an empty multi-table commit")


def _post_commit(catalog: RestCatalog, changes: list[CommitTableRequest]) -> requests.Response:
    body = '{"table-changes": [' + ",".join(change.model_dump_json() for change in changes) + "]}"
    return post_json(catalog, "transactions/commit", body.encode())


def create_missing_tables(catalog: Catalog, namespace: str, manifests: Mapping[str, MemberManifest],
                          present: Mapping[str, Table]) -> dict[str, Table]:
    """Create, empty, the tables of members published for the first time (schema from the staged
    output). A REST server does not take table creations inside a multi-table commit, so a new
    member's table exists, with no snapshot, before the cut that fills it.

    Raises:
        PublishError, DamagedOutputError: see :func:`~.tables.new_table_schema`.
    """
    tables = dict(present)
    missing = [name for name in manifests if name not in tables]
    if missing:
        catalog.create_namespace_if_not_exists(namespace)
    for name in missing:
        schema = new_table_schema(manifests[name], f"{namespace}.{name}", properties=catalog.properties)
        tables[name] = catalog.create_table((namespace, name), schema=schema)
    return tables


def carry_tag(transaction: Transaction, snapshot_id: int, tag: str) -> None:
    """Stage the cut's tag on a carried member's kept snapshot."""
    with ManageSnapshots(transaction) as manage:
        manage.create_tag(snapshot_id, tag)


def table_change(transaction: Transaction, mark: CutMark) -> CommitTableRequest:
    """The transaction's updates (with the cut mark) and its requirements, plus the table's UUID and
    its ``main`` snapshot as loaded: any concurrent change of the table fails the whole commit."""
    transaction.set_properties({CUT_PROPERTY: mark.to_json()})
    table = transaction_table(transaction)
    requirements: list[TableRequirement] = [AssertTableUUID(uuid=table.metadata.table_uuid)]
    requirements += [r for r in staged_requirements(transaction) if not isinstance(r, AssertTableUUID)]
    if not any(isinstance(r, AssertRefSnapshotId) and r.ref == "main" for r in requirements):
        current = table.metadata.current_snapshot_id
        requirements.append(AssertRefSnapshotId.model_validate({"ref": "main", "snapshot-id": current}))
    namespace, name = table.name()[-2:]
    return CommitTableRequest(identifier=TableIdentifier(namespace=Namespace([namespace]), name=name),
                              requirements=tuple(requirements), updates=staged_updates(transaction))


def commit_transactions(catalog: RestCatalog, group: str, changes: list[CommitTableRequest]) -> bool:
    """Post the multi-table commit; ``True`` when it applied, ``False`` when the outcome is unknown
    (no answer, or a 5xx): the caller reconciles from the catalog.

    Raises:
        PublishConflictError: 409, a requirement failed: nothing applied.
        PublishError: another refusal (400, 401, 403, 404...): nothing applied.
    """
    try:
        response = _post_commit(catalog, changes)
    except requests.RequestException as error:
        logger.warning("group=%s: the multi-table commit got no answer (%s): reconciling", group, type(error).__name__)
        return False
    if response.ok:
        return True
    if response.status_code in UNKNOWN:
        logger.warning("group=%s: the multi-table commit answered %d: reconciling", group, response.status_code)
        return False
    detail = _error_message(response)
    if response.status_code == 409:
        raise PublishConflictError(f"group {group!r}: a member table was changed by another writer since this cut "
                                   f"was built ({detail}); nothing was published")
    raise PublishError(f"group {group!r}: {describe(catalog)} refused the multi-table commit "
                       f"({response.status_code}: {detail}); nothing was published")


def _error_message(response: requests.Response) -> str:
    try:
        return str(response.json()["error"]["message"])[:300]
    except (ValueError, KeyError, TypeError):
        return response.text[:300]


def publish_rest(
    catalog: RestCatalog, ledger: Ledger, draft: CutDraft, root: str, loaded: Mapping[str, Table]
) -> CutRecord:
    """Atomic publish through a REST catalog: staged files uploaded into the tables, then every
    member's snapshot, tag and cut mark in one multi-table commit, then the cut recorded in the
    ledger (a lost ledger write is reconciled by the next publish: :mod:`.reconcile`). ``loaded``: the
    member tables that exist, as loaded for the reconciliation."""
    group, run_key, manifests = draft.group, draft.run_key, draft.manifests
    tables = create_missing_tables(catalog, group.namespace, manifests, loaded)
    plans = {name: MemberPlan(name, (group.namespace, name), tables[name], tables[name].metadata_location, "")
             for name in draft.members}
    check_unchanged(group.name, plans, draft.last)
    check_then_mark(plans, manifests, run_key, root)
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
