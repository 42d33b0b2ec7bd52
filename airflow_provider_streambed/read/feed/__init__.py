"""The change feed: what changed in every member of a group between two cuts, net, as Arrow tables.

Cut ``b``'s rows of a member are cut ``a``'s rows less ``removed`` plus ``added`` (as multisets), and
the two are net: a row inserted and deleted in between, or changed and changed back, is in
neither. Since each cut holds exactly the source transactions with commit LSN below its W, the
changes are exactly the effect of the transactions with commit LSN in ``[W_a, W_b)``, on every
member at once.

The cost follows the changes where the member's metadata allows (:mod:`.snapshots`); a member
rewritten whole in between is diffed whole instead (:mod:`.multiset`), and its
:class:`MemberChanges` says so. Both cuts' rows come in the later cut's columns (field ids map the
earlier files onto them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.table import StaticTable

from airflow_provider_streambed.exceptions import ChangeFeedError
from airflow_provider_streambed.ledger import CutMember, Ledger
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.read.feed import multiset
from airflow_provider_streambed.read.feed.snapshots import added_rows, removed_rows, rows_at, snapshot_delta

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection, DuckDBPyRelation
    from pyspark.sql import DataFrame, SparkSession

logger = logging.getLogger(__name__)

Method = Literal["snapshots", "full diff"]


@dataclass(frozen=True, slots=True)
class MemberChanges:
    """What changed in one member between two cuts.

    Attributes:
        member: the member's name.
        since: W of the earlier cut: the changes are those of the source transactions with
            commit LSN in ``[since, until)``.
        until: W of the later cut.
        removed: rows of the earlier cut that the later one does not have (net, duplicates counted).
        added: rows of the later cut that the earlier one does not have (net, duplicates counted).
        method: ``"snapshots"`` when read from the files added in between (cost follows the
            changes), ``"full diff"`` when both cuts' rows were read whole and compared.
        reason: why a full diff was needed (empty for ``"snapshots"``).
    """

    member: str
    since: Lsn
    until: Lsn
    removed: pa.Table
    added: pa.Table
    method: Method
    reason: str = ""

    def to_duckdb(self, con: DuckDBPyConnection) -> tuple[DuckDBPyRelation, DuckDBPyRelation]:
        """``removed`` and ``added`` as relations of ``con``."""
        return con.from_arrow(self.removed), con.from_arrow(self.added)

    def to_spark(self, spark: SparkSession) -> tuple[DataFrame, DataFrame]:
        """``removed`` and ``added`` as DataFrames of ``spark`` (built from the Arrow tables)."""
        from airflow_provider_streambed.compat.spark import arrow_frame  # pyspark: only for a Spark reader
        return arrow_frame(spark, self.removed), arrow_frame(spark, self.added)


class CutView(Protocol):
    """What the feed needs of a cut (:class:`~airflow_provider_streambed.read.Cut` is one)."""

    @property
    def group(self) -> str: ...
    @property
    def cut_id(self) -> int: ...
    @property
    def watermark(self) -> Lsn: ...
    @property
    def members(self) -> Mapping[str, CutMember]: ...

    def table(self, name: str) -> StaticTable: ...


def check_range(earlier: CutView, later: CutView, ledger: Ledger) -> None:
    """Refuse cuts of two groups or in the wrong order, and expired cuts.

    Raises:
        ChangeFeedError: different groups, or ``earlier`` is the later cut.
        CutExpiredError: either cut expired under the group's retention (its snapshots may be gone);
            the message says when.
    """
    if earlier.group != later.group:
        raise ChangeFeedError(f"changes between cuts of two groups: {later.group!r} cut {later.cut_id} and "
                              f"{earlier.group!r} cut {earlier.cut_id}")
    if earlier.cut_id > later.cut_id:
        raise ChangeFeedError(f"group {later.group!r}: cut {later.cut_id}.changes_since(cut {earlier.cut_id}): "
                              "the argument must be the earlier cut")
    for cut in (earlier, later):
        ledger.get_cut(cut.group, cut.cut_id)  # raises CutExpiredError, naming when


def changes_between(earlier: CutView, later: CutView, ledger: Ledger) -> dict[str, MemberChanges]:
    """Per member of ``later``, what changed since ``earlier`` (see :meth:`Cut.changes_since
    <airflow_provider_streambed.read.Cut.changes_since>`)."""
    check_range(earlier, later, ledger)
    return {name: member_changes(earlier, later, name) for name in sorted(later.members)}


def member_changes(earlier: CutView, later: CutView, name: str) -> MemberChanges:
    """What changed in member ``name`` from ``earlier`` to ``later``."""
    started = time.perf_counter()
    table = later.table(name)
    snapshot_id = later.members[name].snapshot_id
    snapshot = table.snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise ChangeFeedError(f"group {later.group!r}, cut {later.cut_id}, member {name!r}: snapshot "
                              f"{snapshot_id} is missing from its metadata")
    schema = table.metadata.schema_by_id(snapshot.schema_id) if snapshot.schema_id is not None else None
    schema = schema or table.schema()
    before = earlier.members.get(name)
    old = None if before is None else table.snapshot_by_id(before.snapshot_id)
    if before is not None and before.snapshot_id == snapshot_id:
        empty = rows_at(table, schema, table, None)
        changes = MemberChanges(name, earlier.watermark, later.watermark, empty, empty, "snapshots")
    elif old is None:
        reason = (f"member {name!r} is not in cut {earlier.cut_id}" if before is None
                  else f"cut {earlier.cut_id}'s snapshot is not in cut {later.cut_id}'s metadata")
        changes = _full_diff(earlier, later, name, table, schema, reason)
    else:
        delta = snapshot_delta(table.io, old, snapshot)
        if isinstance(delta, str):
            changes = _full_diff(earlier, later, name, table, schema, delta)
        else:
            removed, added = multiset.net(removed_rows(table, schema, delta),
                                          added_rows(table, schema, delta))
            changes = MemberChanges(name, earlier.watermark, later.watermark, removed, added, "snapshots")
    logger.info("group=%s cut=%d..%d member=%s: %d removed, %d added (%s%s) in %.2f s", later.group,
                earlier.cut_id, later.cut_id, name, changes.removed.num_rows, changes.added.num_rows, changes.method,
                f": {changes.reason}" if changes.reason else "", time.perf_counter() - started)
    return changes


def _full_diff(earlier: CutView, later: CutView, name: str, table: StaticTable, schema: Schema,
               reason: str) -> MemberChanges:
    """Member ``name``'s changes as the multiset difference of both cuts' rows, read whole."""
    before = earlier.members.get(name)
    old_rows = rows_at(table, schema, table, None) if before is None else rows_at(
        table, schema, earlier.table(name), before.snapshot_id)
    new_rows = rows_at(table, schema, table, later.members[name].snapshot_id)
    removed, added = multiset.net(old_rows, new_rows, narrow=False)
    return MemberChanges(name, earlier.watermark, later.watermark, removed, added, "full diff", reason)
