"""The REST catalog's group commit: every member's changes in one ``POST /v1/{prefix}/transactions/commit``.

The Iceberg REST spec's multi-table commit applies every table's updates or none: each table's
requirements (``assert-table-uuid``, ``assert-ref-snapshot-id`` on ``main``) are checked by the
server, so a writer that changed any member since it was loaded makes the whole cut fail (409).

The ledger of a REST catalog is a SQL database of its own (``streambed.ledger-uri``), written
after the catalog commit. The commit therefore also writes the table property ``streambed.cut``
(group, cut id, run key, W) on every member: when the ledger write is lost (a crash, or a
commit whose answer never came), :func:`reconcile` finds the cut in the catalog and records it
before anything else is published. Readers that pin cuts through the ledger see the cut once it
is recorded; readers of the tables' current snapshots see every member of it at once.

pyiceberg 0.12 has no client call for the endpoint. This module is the one place that uses the
``RestCatalog``'s private signed session (``_session``) and supported-endpoint set
(``_supported_endpoints``), and a transaction's staged ``_updates`` and ``_requirements``;
``tests/unit/publish/test_rest_capability.py`` checks them against pyiceberg.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import DEFAULT_ENDPOINTS, VIEW_ENDPOINTS, Endpoint, RestCatalog
from pyiceberg.exceptions import NoSuchTableError, ServerError, ServiceUnavailableError, TooManyRequestsError
from pyiceberg.table import CommitTableRequest, Namespace, Table, TableIdentifier, Transaction
from pyiceberg.table.update import AssertRefSnapshotId, AssertTableUUID, TableRequirement
from pyiceberg.table.update.snapshot import ManageSnapshots
from sqlalchemy.exc import IntegrityError

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import (
    CatalogUnavailableError,
    LedgerError,
    PublishConflictError,
    PublishError,
)
from airflow_provider_streambed.ledger import CutMember, CutRecord, Ledger, RunState, cut_tag
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish.tables import new_table_schema, parallel
from airflow_provider_streambed.staging import MemberManifest

logger = logging.getLogger(__name__)

#: The multi-table commit of the Iceberg REST spec.
TRANSACTIONS_ENDPOINT = Endpoint.from_string("POST /v1/{prefix}/transactions/commit")
#: Table property every member gets with each cut: which cut it belongs to (JSON).
CUT_PROPERTY = "streambed.cut"
#: Status codes a server answers for an endpoint it does not have.
ABSENT = (404, 405, 501)
#: Status codes after which the commit may or may not have applied (the spec's CommitStateUnknown).
UNKNOWN = (500, 502, 503, 504)


def supports_transactions(catalog: RestCatalog) -> bool:
    """Whether the server has the multi-table commit.

    From the ``endpoints`` list of ``GET /v1/config`` when the server sends one; else (SeaweedFS
    sends none) by posting an empty commit, which such a server accepts (204) and others refuse
    as unknown (404, 405 or 501). pyiceberg keeps its defaults when no list came, so a list of
    default endpoints only is probed too.

    Raises:
        CatalogUnavailableError: the probe had no answer, or one that says neither.
    """
    endpoints = catalog._supported_endpoints
    if TRANSACTIONS_ENDPOINT in endpoints:
        return True
    if not endpoints <= set(DEFAULT_ENDPOINTS) | set(VIEW_ENDPOINTS):  # the server listed its endpoints
        return False
    with reaching(catalog):
        response = _post_commit(catalog, [])
    if response.status_code in ABSENT:
        return False
    if response.ok:
        return True
    raise CatalogUnavailableError(f"catalog {catalog.name!r}: {describe(catalog)} answered {response.status_code} to "
                                  "an empty multi-table commit")


#: What a REST catalog that is down or overloaded raises: no answer, or pyiceberg's 5xx and 429 errors.
UNAVAILABLE = (requests.RequestException, ServerError, ServiceUnavailableError, TooManyRequestsError)


def describe(catalog: Catalog) -> str:
    """The catalog's server for messages: its URI without credentials, query or fragment."""
    parts = urlsplit(str(catalog.properties.get("uri", "")))
    host = f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
    return f"the REST catalog at {parts.scheme}://{host}{parts.path}"


@contextmanager
def reaching(catalog: Catalog, outcome: str = "nothing was published, retry the run") -> Iterator[None]:
    """Turn a REST catalog that does not answer, or answers that it cannot now (5xx, 429), into
    :class:`CatalogUnavailableError` (retryable); ``outcome`` says what that left and what to do."""
    try:
        yield
    except UNAVAILABLE as error:
        raise CatalogUnavailableError(f"catalog {catalog.name!r}: {describe(catalog)} cannot be reached or cannot "
                                      f"answer now ({type(error).__name__}); {outcome}") from error


def _post_commit(catalog: RestCatalog, changes: list[CommitTableRequest]) -> requests.Response:
    body = '{"table-changes": [' + ",".join(change.model_dump_json() for change in changes) + "]}"
    return catalog._session.post(catalog.url("transactions/commit", prefixed=True), data=body.encode(),
                                 headers={"Content-Type": "application/json"})


@dataclass(frozen=True, slots=True)
class CutMark:
    """The ``streambed.cut`` property: the cut a member table's current metadata belongs to."""

    group: str
    cut_id: int
    run_key: str
    watermark: Lsn

    def to_json(self) -> str:
        """The property's value."""
        return json.dumps({"group": self.group, "cut-id": self.cut_id, "run-key": self.run_key,
                           "watermark": str(self.watermark)}, sort_keys=True)

    @classmethod
    def of(cls, table: Table) -> CutMark | None:
        """The mark on ``table``'s current metadata, if any."""
        if (value := table.metadata.properties.get(CUT_PROPERTY)) is None:
            return None
        data = json.loads(value)
        return cls(data["group"], int(data["cut-id"]), data["run-key"], Lsn.parse(data["watermark"]))


def load_members(catalog: Catalog, namespace: str, members: list[str]) -> dict[str, Table]:
    """The member tables that exist (loaded in parallel: one request each)."""
    def load(name: str) -> Table | None:
        try:
            return catalog.load_table((namespace, name))
        except NoSuchTableError:
            return None

    loaded = parallel(load, members, str(catalog.properties.get("uri", "")))
    return {name: table for name, table in zip(members, loaded, strict=True) if table is not None}


def reconcile(
    catalog: RestCatalog, ledger: Ledger, group: RefreshGroup, tables: Mapping[str, Table] | None = None
) -> CutRecord | None:
    """Record in the ledger a cut the catalog committed but the ledger lacks; returns it, if any.

    The multi-table commit applied to every member or to none, so the members' ``streambed.cut``
    marks agree; the cut is the next one in the ledger and is recorded with its run.

    Args:
        tables: the member tables as just loaded (:func:`load_members`); loaded here when not given.

    Raises:
        PublishError: the members' marks disagree (a member was written outside streambed).
    """
    last = ledger.last_cut(group.name)
    if tables is None:
        tables = load_members(catalog, group.namespace, [member.name for member in group.members])
    marks = {name: CutMark.of(table) for name, table in tables.items()}
    newest = max((mark.cut_id for mark in marks.values() if mark is not None), default=0)
    following = (last.cut_id if last is not None else 0) + 1
    if newest < following:
        return None
    found = {mark for mark in marks.values() if mark is not None and mark.cut_id == newest}
    mark = found.pop()
    if found or newest != following or mark.group != group.name:
        raise PublishError(
            f"group {group.name!r}: the member tables are marked with cut {newest} ({sorted(map(str, marks.values()))})"
            f", but the ledger's next cut is {following}: the ledger and the catalog disagree (a ledger restored "
            "from an older backup, or tables written outside streambed); nothing was published"
        )
    tag = cut_tag(group.name, mark.cut_id)
    members = {}
    for name, table in tables.items():
        if marks[name] != mark:
            continue  # a member added to the group after that cut
        if (ref := table.metadata.refs.get(tag)) is None:
            raise PublishError(f"group {group.name!r}: member {name!r} is marked with cut {mark.cut_id} of run "
                               f"{mark.run_key!r} but lacks its tag {tag!r}; it was changed outside streambed")
        members[name] = CutMember(name, ".".join(table.name()), ref.snapshot_id, table.metadata_location)
    return _record_reconciled(ledger, group.name, mark, members)


def _record_reconciled(ledger: Ledger, group: str, mark: CutMark, members: dict[str, CutMember]) -> CutRecord:
    """Record the cut the catalog holds, unless a concurrent publish or reconciliation did first
    (then recording it fails, and the cut it recorded is returned)."""
    try:
        with ledger.begin() as connection:
            if ledger.get_run(group, mark.run_key, connection) is not None:  # published, whatever it said
                ledger.set_run_state(group, mark.run_key, RunState.PINNED, connection)
            record = ledger.record_cut(connection, group, mark.run_key, mark.watermark, members)
            ledger.mark_published(connection, group, mark.run_key, mark.watermark, record.cut_id)
    except (LedgerError, PublishConflictError, IntegrityError):  # recorded concurrently
        if (recorded := ledger.cut_for_run(group, mark.run_key)) is not None:
            return recorded
        raise
    logger.warning("group=%s cut=%d W=%s: run %s committed this cut to the catalog without recording it; "
                   "recorded it now", group, record.cut_id, record.watermark, mark.run_key)
    return record


def reconcile_before_run(catalog: Catalog, ledger: Ledger, group: RefreshGroup) -> CutRecord | None:
    """At the start of a run: on a REST catalog, :func:`reconcile`, so that the run is planned on
    the cut the catalog holds (a capture and refresh planned on an older cut would compute their
    changes against the wrong base); nothing on other catalogs."""
    if not isinstance(catalog, RestCatalog):
        return None
    with reaching(catalog):
        return reconcile(catalog, ledger, group)


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
    table = transaction._table
    requirements: list[TableRequirement] = [AssertTableUUID(uuid=table.metadata.table_uuid)]
    requirements += [r for r in transaction._requirements if not isinstance(r, AssertTableUUID)]
    if not any(isinstance(r, AssertRefSnapshotId) and r.ref == "main" for r in requirements):
        current = table.metadata.current_snapshot_id
        requirements.append(AssertRefSnapshotId.model_validate({"ref": "main", "snapshot-id": current}))
    namespace, name = table.name()[-2:]
    return CommitTableRequest(identifier=TableIdentifier(namespace=Namespace([namespace]), name=name),
                              requirements=tuple(requirements), updates=transaction._updates)


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
