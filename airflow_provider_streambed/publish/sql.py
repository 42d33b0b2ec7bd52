"""The SQL catalog's strategy: every member's pointer and the cut's ledger rows in one database transaction.

:func:`publish_group` loads the member tables, moves the staged files in, builds every member's
next metadata file (with the removals of cuts that expire in the same commit), then commits.

pyiceberg's ``SqlCatalog.commit_table`` swaps one table's pointer per transaction. A cut needs
all of them at once, so this module moves the ``iceberg_tables`` rows itself (Iceberg's JDBC
catalog layout, :mod:`.iceberg.pointers`), each with compare-and-swap on the previous metadata
location, inserts the rows of tables created by this cut, and records the cut in the ledger, in
one transaction of the catalog database. Cuts that expire with this publish leave the ledger in
the same transaction (their tags and snapshots are gone from the members' new metadata). Any
failure rolls everything back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from airflow_provider_streambed.catalog import warehouse_of
from airflow_provider_streambed.exceptions import ExpiryConflictError, LedgerError, PublishConflictError
from airflow_provider_streambed.ledger import CutRecord, Ledger, cut_tag
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish.attempts import Attempt, abandon, settled
from airflow_provider_streambed.publish.build import build_carried, build_member
from airflow_provider_streambed.publish.draft import CutDraft, check_unchanged
from airflow_provider_streambed.publish.expiry import ExpiryPlanner
from airflow_provider_streambed.publish.iceberg.pointers import (
    PointerSwap,
    current_pointers,
    insert_pointer,
    swap_pointers_if_unmoved,
)
from airflow_provider_streambed.publish.members import BuiltMember, MemberPlan
from airflow_provider_streambed.publish.record import record_cut
from airflow_provider_streambed.publish.staged import check_then_mark, move_staged_files
from airflow_provider_streambed.publish.tables import parallel, plan_members

logger = logging.getLogger(__name__)

#: Called inside the publish transaction after the pointer updates, before the commit (tests).
BeforeCommit = Callable[[Connection], None]


@dataclass(frozen=True, slots=True)
class CommitOutcome:
    """What a group commit did.

    Attributes:
        record: the run's cut: the one this commit recorded, or the one the ledger held already.
        committed: whether this commit recorded it; ``False`` when the run was in the ledger
            already (a concurrent publisher of the run won): nothing changed.
    """

    record: CutRecord
    committed: bool


class GroupCommit(Protocol):
    """Makes every member's new metadata current and records the cut: all of it, or nothing.

    One interface for every catalog that can commit several tables atomically; :func:`group_commit_for`
    finds the implementation (today: the SQL catalog's database transaction, :func:`commit_group`).
    """

    def __call__(
        self,
        ledger: Ledger,
        group: str,
        run_key: str,
        watermark: Lsn,
        cut_id: int,
        built: Mapping[str, BuiltMember],
        before_commit: BeforeCommit | None = None,
        expired: Collection[int] = (),
    ) -> CommitOutcome:
        """Commit the cut, and the expiry of the cuts ``expired``; or find the run's cut in the
        ledger already (then nothing changes).

        Raises:
            ExpiryConflictError: a cut in ``expired`` was pinned meanwhile (nothing changed).
            PublishConflictError: a member table or the group's cut sequence moved meanwhile.
        """


def group_commit_for(catalog: Catalog) -> GroupCommit | None:
    """The catalog's atomic multi-table commit, or ``None`` when it has none."""
    if isinstance(catalog, SqlCatalog):
        return partial(commit_group, catalog)
    return None


def swap_pointers(catalog: SqlCatalog, connection: Connection, group: str, plans: Iterable[MemberPlan]) -> None:
    """Move every member's pointer (or insert it on first use) inside ``connection``'s transaction.

    The compare-and-swap updates go to the database as one batch (one compiled statement, one
    driver call), in table-name order so that concurrent publishers lock rows in the same order.

    Raises:
        PublishConflictError: a pointer moved since its table was read, or a table was created by
            another writer meanwhile; names the table.
    """
    moves, swaps = [], []
    for plan in sorted(plans, key=lambda plan: plan.identifier):
        if plan.base_location is not None:
            moves.append(plan)
            swaps.append(PointerSwap(plan.identifier, plan.base_location, plan.new_location))
            continue
        try:
            insert_pointer(catalog, connection, plan.identifier, plan.new_location)
        except IntegrityError as error:
            raise PublishConflictError(
                f"group {group!r}, member {plan.member!r}: table {plan.table_name} was created by another writer "
                "while this cut was built; nothing was published"
            ) from error
    if not moves:
        return
    if swap_pointers_if_unmoved(catalog, connection, swaps) != len(moves):
        _raise_moved(catalog, connection, group, moves)


def _raise_moved(catalog: SqlCatalog, connection: Connection, group: str, moves: list[MemberPlan]) -> None:
    """Name the first member whose compare-and-swap matched no row (rows the batch did swap show the new file)."""
    current = {
        (namespace, name): location
        for namespace in {plan.identifier[0] for plan in moves}
        for name, location in current_pointers(
            catalog, namespace, [plan.identifier[1] for plan in moves if plan.identifier[0] == namespace], connection
        ).items()
    }
    moved = next((plan for plan in moves if current.get(plan.identifier) != plan.new_location), moves[0])
    raise PublishConflictError(
        f"group {group!r}, member {moved.member!r}: table {moved.table_name} was changed by another writer "
        "since this cut was built; nothing was published"
    )


def commit_group(
    catalog: SqlCatalog,
    ledger: Ledger,
    group: str,
    run_key: str,
    watermark: Lsn,
    cut_id: int,
    built: Mapping[str, BuiltMember],
    before_commit: BeforeCommit | None = None,
    expired: Collection[int] = (),
) -> CommitOutcome:
    """The SQL catalog's :class:`GroupCommit`: every pointer swap, the cut's rows and the expiry of
    the cuts ``expired`` in one transaction, unless the run is in the ledger already.

    Raises:
        PublishConflictError: a member table or the group's cut sequence moved meanwhile.
    """
    with ledger.begin() as connection:
        existing = ledger.cut_for_run(group, run_key, connection)
        if existing is not None:
            return CommitOutcome(existing, committed=False)
        swap_pointers(catalog, connection, group, [member.plan for member in built.values()])
        if before_commit is not None:
            before_commit(connection)
        record = record_cut(ledger, connection, group, run_key, watermark, cut_id,
                        {name: member.cut_member() for name, member in built.items()})
        try:
            ledger.expire_cuts(connection, group, expired)
        except LedgerError as error:
            raise ExpiryConflictError(f"{error}; nothing was published either, a retry plans again") from error
    return CommitOutcome(record, committed=True)


def publish_group(
    catalog: SqlCatalog, ledger: Ledger, draft: CutDraft, root: str, commit: GroupCommit,
    before_commit: BeforeCommit | None, expire: ExpiryPlanner | None,
) -> CutRecord:
    """Atomic publish: every member pointer and the ledger rows in one catalog commit (staged at ``root``),
    with the expiry ``expire`` plans for the member tables (``None``: nothing expires)."""
    group, run_key, manifests = draft.group, draft.run_key, draft.manifests
    warehouse = warehouse_of(catalog)
    pointers = current_pointers(catalog, group.namespace, draft.members)
    plans = plan_members(catalog, group.namespace, draft.members, manifests, pointers, run_key)
    check_unchanged(group.name, plans, draft.last)
    check_then_mark(plans, manifests, run_key, root)
    files = {name: move_staged_files(plans[name], manifests[name], run_key) for name in manifests}
    attempt = Attempt.start(warehouse, group.name, run_key, group.namespace, plans.values())
    tag = cut_tag(group.name, draft.cut_id)
    expiry = None if expire is None else expire({plan.table_name for plan in plans.values()})

    def build(plan: MemberPlan) -> BuiltMember:
        if (kept := draft.carried.get(plan.member)) is not None:
            return build_carried(plan, kept.snapshot_id, tag, expiry)
        return build_member(plan, files[plan.member], draft.snapshot_properties(plan.member), tag,
                            attempt.commit_uuid, expiry)

    try:
        with settled(catalog, ledger, warehouse, attempt):
            built = parallel(build, plans.values(), warehouse)
            outcome = commit(ledger, group.name, run_key, draft.watermark, draft.cut_id,
                             {member.plan.member: member for member in built}, before_commit,
                             expiry.cut_ids if expiry is not None else ())
            if not outcome.committed:  # a concurrent publisher of the run won: this attempt's files are dead
                abandon(catalog, ledger, warehouse, attempt)
        return outcome.record
    except IntegrityError as error:
        raise PublishConflictError(
            f"group {group.name!r}, run {run_key!r}: another publisher recorded this run or W={draft.watermark} "
            "meanwhile; nothing was published"
        ) from error
