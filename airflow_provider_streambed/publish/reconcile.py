"""A REST catalog as the record of its cuts: reaching it, the cut mark on its member tables, and
recording in the ledger a cut the catalog holds but the ledger lacks.

The ledger of a REST catalog is a SQL database of its own (``streambed.ledger-uri``), written
after the catalog commit (:mod:`.rest`). The commit therefore also writes the table property
``streambed.cut`` (group, cut id, run key, W) on every member: when the ledger write is lost (a
crash, or a commit whose answer never came), :func:`reconcile` finds the cut in the catalog and
records it before anything else is published. Readers that pin cuts through the ledger see the
cut once it is recorded; readers of the tables' current snapshots see every member of it at once.
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
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ServerError, ServiceUnavailableError, TooManyRequestsError
from pyiceberg.table import Table
from sqlalchemy.exc import IntegrityError

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import (
    CatalogUnavailableError,
    LedgerError,
    PublishConflictError,
    PublishError,
    UnpublishableRunError,
)
from airflow_provider_streambed.ledger import CutMember, CutRecord, Ledger, RunState, cut_tag
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish.tables import load_members
from airflow_provider_streambed.snapshot_properties import CUT_ID_PROPERTY, GROUP_PROPERTY, RUN_KEY_PROPERTY

logger = logging.getLogger(__name__)

#: Table property every member gets with each cut: which cut it belongs to (JSON).
CUT_PROPERTY = "streambed.cut"
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


def reconcile(
    catalog: RestCatalog, ledger: Ledger, group: RefreshGroup, tables: Mapping[str, Table] | None = None
) -> CutRecord | None:
    """Record in the ledger a cut the catalog committed but the ledger lacks; returns it, if any.

    The multi-table commit applied to every member or to none, so the members' ``streambed.cut``
    marks agree; the cut is the next one in the ledger and is recorded with its run.

    Args:
        tables: the member tables as just loaded (:func:`~.tables.load_members`); loaded here when not given.

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
    members = {}
    for name, table in tables.items():
        if marks[name] != mark:
            continue  # a member added to the group after that cut
        snapshot_id = marked_snapshot(table, name, mark, last)
        members[name] = CutMember(name, ".".join(table.name()), snapshot_id, table.metadata_location)
    return _record_reconciled(ledger, group.name, mark, members)


def marked_snapshot(table: Table, member: str, mark: CutMark, last: CutRecord | None) -> int:
    """The snapshot of ``member`` in the cut its table is marked with: the one the cut's tag names.

    A catalog that keeps no table tags (Nessie versions the whole catalog: it keeps each table's
    current snapshot only and drops the tag updates of a commit) has the cut's snapshot as the
    current one, unless another writer came after: it is taken when its summary names the cut
    (a computed member) or it is the member's snapshot in the ledger's last cut (a carried one).

    Raises:
        PublishError: no tag, and the current snapshot is neither (the table was changed outside streambed).
    """
    tag = cut_tag(mark.group, mark.cut_id)
    if (ref := table.metadata.refs.get(tag)) is not None:
        return ref.snapshot_id
    current = table.current_snapshot()
    if current is not None:
        summary = current.summary.additional_properties if current.summary is not None else {}
        made = (summary.get(GROUP_PROPERTY), summary.get(CUT_ID_PROPERTY), summary.get(RUN_KEY_PROPERTY))
        kept = last.members.get(member) if last is not None else None
        if made == (mark.group, str(mark.cut_id), mark.run_key) or (kept and kept.snapshot_id == current.snapshot_id):
            return current.snapshot_id
    raise PublishError(f"group {mark.group!r}: member {member!r} is marked with cut {mark.cut_id} of run "
                       f"{mark.run_key!r} but lacks its tag {tag!r}, and its current snapshot is not the cut's; it "
                       "was changed outside streambed")


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


def reconciled_members(catalog: RestCatalog, ledger: Ledger, group: RefreshGroup, run_key: str) -> dict[str, Table]:
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
