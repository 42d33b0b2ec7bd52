"""Change stream: turn the pgoutput messages of the slot into changelog rows of the kept transactions.

Which transactions are kept is decided by this code, not trusted to the server: a transaction is
kept iff ``start <= commit_lsn < W``. ``Begin.final_lsn`` already is the commit LSN, so the
decision is taken at Begin and the rows stream straight to the writer (memory stays bounded for
any transaction size); the Commit must then carry the same LSN, and a result that ends inside a
transaction fails loudly. A transaction whose commit record starts exactly at W (possible when W
sits right after a WAL page header) is dropped here and comes again after the slot is advanced
to W. Relation messages are processed for every transaction, kept or not.

Updates that change the key are written as a ``D`` of the old key and a ``U`` of the new row
(next ``_seq``). Under ``REPLICA IDENTITY FULL`` every update of a keyed table is written as a
``D`` of its whole old row and a ``U`` of the new one, so a run's first change of a key the
previous cut holds is a delete of that row: the merges keep it with its position delete, where
the change feed and incremental members read removed rows
(:attr:`~airflow_provider_streambed.staging.TableCapture.old_images`, recorded per member when
every update and delete carried its old row).

Unchanged-TOAST values are taken from the old row when the table has ``REPLICA IDENTITY FULL``
(PostgreSQL logs it detoasted); otherwise they stay marked (see :mod:`.changelog`), and a key
change with an unchanged TOASTed value cannot be resolved by the merge: give such tables
``REPLICA IDENTITY FULL``. PostgreSQL marks a partitioned table's old rows whole (``O``) by the
partitioned table's identity but logs them by the partition's, which ``ALTER TABLE ... REPLICA
IDENTITY`` on the partitioned table does not change: they are taken as whole only when every
partition is FULL (:attr:`.source.SourceTable.leaves_full`, read when the run begins), and not
when the row is null where the new row keeps an unchanged TOASTed value (which is never null: the
row was logged by a partition that was not FULL then). Whether a partitioned table's changes
carried their old rows over the whole run is decided after the pin of W
(:meth:`.partition_readings.PartitionReadings.old_rows_held`): a partition's identity may have changed.

The changes of a member added this run whose copy already holds their transaction (by Begin's
xid, :class:`.copy_snapshot.CopyFilter`) are dropped, truncates included, and counted.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_streambed.capture.changelog import TableLog
from airflow_provider_streambed.capture.copy_snapshot import CopyFilter
from airflow_provider_streambed.capture.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    Commit,
    Relation,
    Truncate,
    Value,
    decode_message,
    decode_update,
    read_tuple,
    tuple_reader,
)
from airflow_provider_streambed.capture.source import SourceTable
from airflow_provider_streambed.capture.typemap import PgType
from airflow_provider_streambed.exceptions import DecodeError, SchemaChangeError, resync_member_fix
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.staging import OP_DELETE, OP_TRUNCATE, OP_UPDATE

_RELID = struct.Struct(">I").unpack_from
_INSERT, _UPDATE, _DELETE, _NEW, _OLD = ord("I"), ord("U"), ord("D"), ord("N"), ord("O")


@dataclass
class _Target:
    """Where the changes of one relation go."""

    member: str
    log: TableLog
    key_indexes: tuple[int, ...]
    read_new: Callable[[bytes, int], list[Value]]
    keyless: bool = False
    copy: CopyFilter | None = None  # a member added this run: drops what its copy holds
    whole_rows: bool = True  # an old row marked whole (``O``) is whole: a plain table, or every partition FULL


@dataclass
class ChangeStream:
    """Turns pgoutput messages into changelog rows for the kept transactions.

    Attributes:
        group: the group name (messages).
        tables: the mirrored tables by member name.
        logs: the changelog writers by member name.
        start: keep commits at or after this LSN (the slot's confirmed position).
        watermark: keep commits before W.
        column_types: types ``(where, (name, type OID, modifier) columns)`` of a Relation message
            (:meth:`.type_resolver.TypeResolver.column_types`).
        copies: the filters of members added this run, by member.
    """

    group: str
    tables: dict[str, SourceTable]
    logs: dict[str, TableLog]
    start: Lsn
    watermark: Lsn
    column_types: Callable[[str, Iterable[tuple[str, int, int]]], tuple[PgType, ...]]
    copies: Mapping[str, CopyFilter] = field(default_factory=dict)
    without_old_images: set[str] = field(default_factory=set)  # members with a change that lacked its old row
    transactions: int = 0
    skipped: int = 0
    newest_commit_time: int | None = None  # of the kept transactions (pgoutput's microseconds)
    _targets: dict[int, _Target] = field(default_factory=dict)
    _open: Begin | None = None
    _keep: bool = False
    _seq: int = 0
    _commit_lsn: int = 0  # of the open transaction: every row it writes carries it
    _xid: int = 0
    _members: dict[str, str] = field(default_factory=dict)  # ``schema.table`` -> member, as Relations name them

    def __post_init__(self) -> None:
        self._members = {table.qualified_name: member for member, table in self.tables.items()}

    def feed(self, data: bytes) -> None:
        """Process one message."""
        tag = data[0]
        if tag == _INSERT:
            if (target := self._row_target(data)) is not None:
                if data[5] != _NEW:
                    raise DecodeError(f"group {self.group!r}: Insert without a new tuple")
                target.log.add_insert(target.read_new(data, 6), self._commit_lsn, self._xid, self._seq)
                self._seq += 1
        elif tag == _UPDATE:
            if (target := self._row_target(data)) is not None:
                self._update(target, data)
        elif tag == _DELETE:
            if (target := self._row_target(data)) is not None:
                if target.keyless and (data[5] != _OLD or not target.whole_rows):
                    raise self._not_full(target)
                old = read_tuple(data, 6)[0]
                if data[5] != _OLD or not target.whole_rows or UNCHANGED_TOAST in old:
                    self.without_old_images.add(target.member)
                self._add(target, OP_DELETE, old)
        else:
            self._control(decode_message(data))

    def _row_target(self, data: bytes) -> _Target | None:
        """Where a row change goes: ``None`` for a transaction not kept, a table not mirrored, or a
        change that the member's copy holds already (dropped, counted)."""
        if not self._keep or (target := self._targets.get(_RELID(data, 1)[0])) is None or self._dropped(target):
            return None
        return target

    def _control(self, message: Any) -> None:
        if isinstance(message, Begin):
            if self._open is not None:
                raise DecodeError(f"group {self.group!r}: Begin of xid {message.xid} inside xid {self._open.xid}")
            self._open, self._seq, self._commit_lsn, self._xid = message, 0, message.final_lsn, message.xid
            self._keep = self.start.value <= message.final_lsn < self.watermark.value
            if not self._keep:
                self.skipped += 1
            for copy in self.copies.values():
                copy.begin(message.xid)
        elif isinstance(message, Commit):
            self._commit(message)
        elif isinstance(message, Relation):
            self._relation(message)
        elif isinstance(message, Truncate) and self._keep:
            for oid in message.relation_oids:
                if (target := self._targets.get(oid)) is not None and not self._dropped(target):
                    self._add(target, OP_TRUNCATE, [None] * len(target.log.layout))

    def _commit(self, message: Commit) -> None:
        begin = self._open
        if begin is None or begin.final_lsn != message.commit_lsn:
            raise DecodeError(
                f"group {self.group!r}: Commit at {Lsn(message.commit_lsn)} does not match its Begin "
                f"({'none' if begin is None else Lsn(begin.final_lsn)})"
            )
        if self._keep:
            if not message.commit_lsn < self.watermark.value:
                raise DecodeError(f"group {self.group!r}: kept a transaction committed at {Lsn(message.commit_lsn)}")
            self.transactions += 1
            self.newest_commit_time = max(self.newest_commit_time or 0, message.commit_time)
        self._open, self._keep = None, False

    def _relation(self, relation: Relation) -> None:
        member = self._members.get(f"{relation.namespace or 'pg_catalog'}.{relation.name}")
        if member is None:
            self._targets.pop(relation.oid, None)
            return
        table, log = self.tables[member], self.logs[member]
        if relation.columns != log.layout:
            types = self.column_types(log.where, ((c.name, c.type_oid, c.type_modifier) for c in relation.columns))
            log.set_layout(relation.columns, types)
        names = [column.name for column in relation.columns]
        keys = tuple(names.index(k) for k in table.key_columns if k in names)
        self._targets[relation.oid] = _Target(member, log, keys, tuple_reader(len(names)), table.keyless,
                                              self.copies.get(member), whole_rows=table.leaves_full)

    @staticmethod
    def _dropped(target: _Target) -> bool:
        """Whether the open transaction's change of ``target`` is in its copy already (dropped, counted)."""
        return target.copy is not None and target.copy.drops()

    def _add(self, target: _Target, op: str, values: list[Value]) -> None:
        target.log.add(op, values, self._commit_lsn, self._xid, self._seq)
        self._seq += 1

    def _update(self, target: _Target, data: bytes) -> None:
        update = decode_update(data)
        new, old = update.new, update.old
        whole = old if update.old_kind == "O" and target.whole_rows else None  # the whole old row, when it is one
        if whole is not None and any(value is UNCHANGED_TOAST and whole[i] is None for i, value in enumerate(new)):
            whole = None  # a TOASTed value kept is never null: the row holds the key only (a partition not FULL then)
        if whole is not None and UNCHANGED_TOAST in new:
            new = [whole[i] if value is UNCHANGED_TOAST else value for i, value in enumerate(new)]
        if target.keyless:  # one row of the multiset leaves (its old image) and one comes
            if whole is None:
                raise self._not_full(target)
            if whole != new:  # an update to the same values changes no row
                self._add(target, OP_DELETE, whole)
                self._add(target, OP_UPDATE, new)
            return
        if whole is not None and UNCHANGED_TOAST not in whole:
            self._add(target, OP_DELETE, whole)  # the whole old row: a key change's delete too
        else:
            self.without_old_images.add(target.member)
            if old is not None and any(
                new[i] is not UNCHANGED_TOAST and old[i] != new[i] for i in target.key_indexes
            ):
                key_only = [old[i] if i in target.key_indexes else None for i in range(len(old))]
                self._add(target, OP_DELETE, key_only)
        self._add(target, OP_UPDATE, new)

    def _not_full(self, target: _Target) -> SchemaChangeError:
        """The error for a keyless table's change without its whole old row."""
        return SchemaChangeError(
            f"{target.log.where}: a change carries no whole old row, so the replica identity of this table without "
            "a primary key (or of one of its partitions) is no longer FULL; a keyless mirror needs every old image: "
            f"ALTER TABLE ... REPLICA IDENTITY FULL (on every partition), then "
            f"{resync_member_fix(self.group, target.member)}"
        )

    def finish(self) -> None:
        """Check the result did not end inside a transaction.

        Raises:
            DecodeError: it did (the server returned a partial transaction).
        """
        if self._open is not None:
            raise DecodeError(f"group {self.group!r}: the changes ended inside transaction xid {self._open.xid}")
