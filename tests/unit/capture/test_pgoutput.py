"""The pgoutput decoder on byte streams captured from PostgreSQL 15 (hex fixtures)."""

from __future__ import annotations

import pytest

from airflow_provider_streambed.capture.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    Column,
    Commit,
    Delete,
    Insert,
    Origin,
    Relation,
    Truncate,
    TypeInfo,
    Update,
    decode_message,
)
from airflow_provider_streambed.exceptions import DecodeError

BEGIN = "42 000000000b1ca628 000303ec7ca9e29d 0000034e"
COMMIT = "43 00 000000000b1ca628 000000000b1ca658 000303ec7ca9e29d"
ORIGIN = "4f 00000001abcdef00 6f3100"
RELATION = (
    "52 000040ad 7075626c696300 6800 64 0003 01 696400 00000017 ffffffff "
    "00 6300 000040a9 ffffffff 00 62696700 00000019 ffffffff"
)
TYPE = "59 000040a9 7075626c696300 636f6c00"
INSERT = "49 000040ad 4e 0003 74 00000001 31 74 00000001 72 6e"
UPDATE_TOAST = "55 000040ad 4e 0003 74 00000001 32 74 00000001 72 75"
UPDATE_KEY = "55 000040ad 4b 0003 74 00000001 31 6e 6e 4e 0003 74 00000001 33 74 00000001 72 6e"
UPDATE_FULL = "55 000040ad 4f 0002 74 00000001 32 74 00000002 6869 4e 0002 74 00000001 32 75"
DELETE = "44 000040ad 4b 0003 74 00000001 33 6e 6e"
TRUNCATE = "54 00000002 02 000040ad 000040ae"


def message(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def test_begin_and_commit_carry_the_commit_lsn() -> None:
    begin = decode_message(message(BEGIN))
    commit = decode_message(message(COMMIT))
    assert begin == Begin(final_lsn=0x0B1CA628, commit_time=0x000303EC7CA9E29D, xid=846)
    assert commit == Commit(flags=0, commit_lsn=0x0B1CA628, end_lsn=0x0B1CA658, commit_time=0x000303EC7CA9E29D)
    assert isinstance(begin, Begin) and isinstance(commit, Commit)
    assert begin.final_lsn == commit.commit_lsn < commit.end_lsn


def test_origin() -> None:
    assert decode_message(message(ORIGIN)) == Origin(lsn=0x1ABCDEF00, name="o1")


def test_relation_and_type() -> None:
    relation = decode_message(message(RELATION))
    assert relation == Relation(
        oid=0x40AD,
        namespace="public",
        name="h",
        replica_identity="d",
        columns=(Column("id", 23, -1, True), Column("c", 0x40A9, -1, False), Column("big", 25, -1, False)),
    )
    assert decode_message(message(TYPE)) == TypeInfo(oid=0x40A9, namespace="public", name="col")


def test_insert_keeps_text_and_null() -> None:
    assert decode_message(message(INSERT)) == Insert(0x40AD, [b"1", b"r", None])


def test_update_keeps_null_and_unchanged_toast_apart() -> None:
    update = decode_message(message(UPDATE_TOAST))
    assert update == Update(0x40AD, None, None, [b"2", b"r", UNCHANGED_TOAST])
    assert isinstance(update, Update) and update.new[2] is UNCHANGED_TOAST and update.new[2] is not None


def test_update_of_the_key_has_the_old_key() -> None:
    assert decode_message(message(UPDATE_KEY)) == Update(0x40AD, "K", [b"1", None, None], [b"3", b"r", None])


def test_update_with_full_old_row() -> None:
    assert decode_message(message(UPDATE_FULL)) == Update(0x40AD, "O", [b"2", b"hi"], [b"2", UNCHANGED_TOAST])


def test_delete() -> None:
    assert decode_message(message(DELETE)) == Delete(0x40AD, "K", [b"3", None, None])


def test_truncate_lists_every_relation() -> None:
    assert decode_message(message(TRUNCATE)) == Truncate(options=2, relation_oids=(0x40AD, 0x40AE))


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ("5a 00", "unknown pgoutput message type 'Z'"),
        ("49 000040ad 4e 0001 62 00000001 31", "unexpected tuple column kind 'b'"),
        ("49 000040ad 4e 0002 74 00000001", "malformed pgoutput message 'I'"),
        ("55 000040ad 58 0001 6e", "expected 'N', got 'X'"),
    ],
)
def test_bad_bytes_fail_loudly(data: str, match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        decode_message(message(data))
