"""The change stream: which transactions are kept, key changes, TOAST, truncates (no server)."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_streambed.capture.change_stream import ChangeStream
from airflow_provider_streambed.capture.changelog import TableLog
from airflow_provider_streambed.capture.copy_snapshot import CopyFilter, CopySnapshot
from airflow_provider_streambed.capture.pgoutput import Column
from airflow_provider_streambed.capture.source import SourceTable
from airflow_provider_streambed.capture.typemap import PgType
from airflow_provider_streambed.exceptions import DecodeError, SchemaChangeError
from airflow_provider_streambed.lsn import Lsn

LAYOUT = (Column("id", 23, -1, True), Column("body", 25, -1, False))
OID = 16400


def tup(*values: bytes | str | None) -> bytes:
    out = struct.pack(">h", len(values))
    for value in values:
        if value is None:
            out += b"n"
        elif value == "u":
            out += b"u"
        else:
            assert isinstance(value, bytes)
            out += b"t" + struct.pack(">i", len(value)) + value
    return out


def begin(lsn: int, xid: int) -> bytes:
    return b"B" + struct.pack(">QqI", lsn, 0, xid)


def commit(lsn: int) -> bytes:
    return b"C" + struct.pack(">BQQq", 0, lsn, lsn + 48, 0)


def relation(*columns: Column, oid: int = OID) -> bytes:
    out = b"R" + struct.pack(">I", oid) + b"public\0t\0d" + struct.pack(">h", len(columns))
    for column in columns:
        out += bytes([column.is_key]) + column.name.encode() + b"\0" + struct.pack(">Ii", column.type_oid, -1)
    return out


def insert(*values: bytes | None) -> bytes:
    return b"I" + struct.pack(">I", OID) + b"N" + tup(*values)


def builtin_types(where: str, columns: Iterable[tuple[str, int, int]]) -> tuple[PgType, ...]:
    """Built-in types only (the real resolver asks the source's catalog)."""
    return tuple(PgType.builtin(oid, modifier) for _, oid, modifier in columns)


def stream(tmp_path: Path, start: int = 100, watermark: int = 1000, copy: CopyFilter | None = None,
           storage: str = "", leaves_full: bool = True, keyless: bool = False) -> ChangeStream:
    types = builtin_types("t", ((c.name, c.type_oid, c.type_modifier) for c in LAYOUT))
    leaves = "" if not storage else "16500:f:740,16501:f:741" if leaves_full else "16500:f:740,16501:d:741"
    table = SourceTable("t", "public.t", OID, LAYOUT, () if keyless else ("id",), types, keyless=keyless,
                        storage=storage, leaves=leaves)
    assert table.leaves_full == leaves_full or not storage
    log = TableLog("t", (tmp_path / "t").as_uri(), LAYOUT, types, batch_rows=2)
    copies = {} if copy is None else {"t": copy}
    return ChangeStream("g", {"t": table}, {"t": log}, Lsn(start), Lsn(watermark), builtin_types, copies)


def rows(changes: ChangeStream) -> list[dict[str, object]]:
    files = changes.logs["t"].close()
    return pa.concat_tables(
        [pq.read_table(uri.removeprefix("file://")) for uri in files], promote_options="default"
    ).to_pylist()


def feed(changes: ChangeStream, *messages: bytes) -> None:
    for data in messages:
        changes.feed(data)
    changes.finish()


def test_keeps_exactly_the_commits_in_start_to_w(tmp_path: Path) -> None:
    changes = stream(tmp_path)
    feed(
        changes,
        begin(50, 1), relation(*LAYOUT), insert(b"1", b"a"), commit(50),  # already confirmed
        begin(100, 2), relation(*LAYOUT), insert(b"2", b"b"), insert(b"3", None), commit(100),
        begin(999, 3), insert(b"4", b"d"), commit(999),
        begin(1000, 4), insert(b"5", b"e"), commit(1000),  # commit LSN == W: next cut
    )
    assert [(r["id"], r["_xid"], r["_commit_lsn"], r["_seq"], r["_op"]) for r in rows(changes)] == [
        (2, 2, 100, 0, "I"), (3, 2, 100, 1, "I"), (4, 3, 999, 0, "I")
    ]
    assert (changes.transactions, changes.skipped) == (2, 2)


def test_relation_in_a_skipped_transaction_still_counts(tmp_path: Path) -> None:
    wider = (*LAYOUT, Column("extra", 20, -1, False))
    changes = stream(tmp_path)
    feed(changes, begin(50, 1), relation(*wider), commit(50),
         begin(200, 2), insert(b"1", b"a", b"7"), commit(200))
    assert rows(changes) == [{"id": 1, "body": "a", "extra": 7, "_commit_lsn": 200, "_xid": 2, "_seq": 0,
                              "_op": "I", "_toast_body": False}]


def test_key_change_is_a_delete_then_an_update_and_toast_is_marked(tmp_path: Path) -> None:
    changes = stream(tmp_path)
    key_update = b"U" + struct.pack(">I", OID) + b"K" + tup(b"1", None) + b"N" + tup(b"3", "u")
    toast_update = b"U" + struct.pack(">I", OID) + b"N" + tup(b"3", "u")
    delete = b"D" + struct.pack(">I", OID) + b"K" + tup(b"3", None)
    truncate = b"T" + struct.pack(">IBI", 1, 0, OID)
    feed(changes, begin(200, 9), relation(*LAYOUT), key_update, toast_update, delete, truncate, commit(200))
    assert [(r["id"], r["body"], r["_toast_body"], r["_seq"], r["_op"]) for r in rows(changes)] == [
        (1, None, False, 0, "D"), (3, None, True, 1, "U"), (3, None, True, 2, "U"), (3, None, False, 3, "D"),
        (None, None, False, 4, "T"),
    ]


def test_full_identity_resolves_unchanged_toast_from_the_old_row(tmp_path: Path) -> None:
    changes = stream(tmp_path)
    update = b"U" + struct.pack(">I", OID) + b"O" + tup(b"1", b"long") + b"N" + tup(b"2", "u")
    feed(changes, begin(200, 9), relation(*LAYOUT), update, commit(200))
    assert [(r["id"], r["body"], r["_toast_body"], r["_op"]) for r in rows(changes)] == [
        (1, "long", False, "D"), (2, "long", False, "U")
    ]


def test_full_identity_writes_each_update_as_a_delete_of_its_old_row_then_its_new_row(tmp_path: Path) -> None:
    changes = stream(tmp_path)
    update = b"U" + struct.pack(">I", OID) + b"O" + tup(b"1", b"old") + b"N" + tup(b"1", b"new")
    delete = b"D" + struct.pack(">I", OID) + b"O" + tup(b"1", b"new")
    feed(changes, begin(200, 9), relation(*LAYOUT), update, delete, commit(200))
    assert [(r["id"], r["body"], r["_seq"], r["_op"]) for r in rows(changes)] == [
        (1, "old", 0, "D"), (1, "new", 1, "U"), (1, "new", 2, "D")
    ]
    assert changes.without_old_images == set()


PARTITIONS = "16500:16500,16501:16501"


def test_a_partitioned_tables_old_rows_are_whole_only_when_every_partition_is_full(tmp_path: Path) -> None:
    """Marked whole (``O``) by the partitioned table's identity, an old row holds the key only when
    its partition's identity is not FULL: then no unchanged-TOAST value is taken from it, and the
    member's changes lack their old rows; so when it is null where the new row keeps a TOASTed
    value, whatever the partitions are now. (Whether they held over the whole run is the capture's
    to decide after W: ``test_changes``'s partitioned tables.)"""
    update = b"U" + struct.pack(">I", OID) + b"O" + tup(b"1", None) + b"N" + tup(b"1", "u")
    delete = b"D" + struct.pack(">I", OID) + b"O" + tup(b"2", b"old")
    for leaves_full in (False, True):
        for change in (update, delete):
            changes = stream(tmp_path / f"{leaves_full}{change[:1].decode()}", storage=PARTITIONS,
                             leaves_full=leaves_full)
            feed(changes, begin(200, 9), relation(*LAYOUT), change, commit(200))
            if change is update:  # even with every partition FULL now: a kept TOASTed value is never null
                assert [(r["id"], r["body"], r["_toast_body"], r["_op"]) for r in rows(changes)] == [
                    (1, None, True, "U")]
            assert changes.without_old_images == ({"t"} if change is update or not leaves_full else set())
    changes = stream(tmp_path / "whole", storage=PARTITIONS)
    whole = b"U" + struct.pack(">I", OID) + b"O" + tup(b"1", b"long") + b"N" + tup(b"1", "u")
    feed(changes, begin(200, 9), relation(*LAYOUT), whole, commit(200))
    assert [(r["body"], r["_toast_body"], r["_op"]) for r in rows(changes)] == [("long", False, "D"),
                                                                                 ("long", False, "U")]
    assert changes.without_old_images == set()


def test_a_keyless_partitioned_table_needs_every_partition_full(tmp_path: Path) -> None:
    delete = b"D" + struct.pack(">I", OID) + b"O" + tup(b"2", None)
    with pytest.raises(SchemaChangeError, match="or of one of its partitions"):
        feed(stream(tmp_path, storage=PARTITIONS, leaves_full=False, keyless=True),
             begin(200, 9), relation(*LAYOUT), delete, commit(200))


def test_a_change_without_its_old_row_marks_the_member(tmp_path: Path) -> None:
    plain = b"U" + struct.pack(">I", OID) + b"N" + tup(b"1", b"new")
    by_key = b"D" + struct.pack(">I", OID) + b"K" + tup(b"1", None)
    for change in (plain, by_key):
        changes = stream(tmp_path / change[:1].decode())
        feed(changes, begin(200, 9), relation(*LAYOUT), change, commit(200))
        assert changes.without_old_images == {"t"}


def test_mismatched_commit_and_partial_transaction_fail(tmp_path: Path) -> None:
    with pytest.raises(DecodeError, match="does not match its Begin"):
        feed(stream(tmp_path), begin(200, 1), commit(300))
    with pytest.raises(DecodeError, match="ended inside transaction xid 1"):
        feed(stream(tmp_path), begin(200, 1), relation(*LAYOUT), insert(b"1", b"a"))


def test_an_added_members_changes_in_transactions_its_copy_holds_are_dropped_and_counted(tmp_path: Path) -> None:
    copy = CopyFilter(CopySnapshot.parse("10:20:12"))
    changes = stream(tmp_path, copy=copy)
    key_update = b"U" + struct.pack(">I", OID) + b"K" + tup(b"1", None) + b"N" + tup(b"3", b"c")
    delete = b"D" + struct.pack(">I", OID) + b"K" + tup(b"3", None)
    truncate = b"T" + struct.pack(">IBI", 1, 0, OID)
    feed(
        changes,
        begin(200, 11), relation(*LAYOUT), insert(b"1", b"a"), key_update, delete, truncate, commit(200),  # copied
        begin(300, 12), insert(b"2", b"b"), commit(300),  # in progress at the copy's snapshot
        begin(400, 5), insert(b"4", b"d"), commit(400),  # before xmin: copied
        begin(500, 20), insert(b"5", b"e"), truncate, commit(500),  # at xmax: after the snapshot
    )
    assert [(r["id"], r["_xid"], r["_seq"], r["_op"]) for r in rows(changes)] == [
        (2, 12, 0, "I"), (5, 20, 0, "I"), (None, 20, 1, "T")
    ]
    assert copy.dropped == 5 and changes.transactions == 4  # messages: the key update is one (two changelog rows)
