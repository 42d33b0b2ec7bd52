"""A pure-Python decoder of pgoutput protocol version 1 messages (one message per peek row).

Layouts (PostgreSQL "Logical Replication Message Formats"; all integers big-endian): Begin,
Commit, Origin, Relation, Type, Insert, Update, Delete and Truncate. Tuple values are kept in
their text form as ``bytes``; a NULL is ``None`` and an unchanged TOASTed value (``'u'``, sent
when an UPDATE left an out-of-line value alone) is the :data:`UNCHANGED_TOAST` sentinel, so the
two are never confused. Typing the text happens column-wise later (:mod:`.types`).

:func:`read_tuple` is the hot path: it uses precompiled ``struct`` unpackers and slices, and
does no per-value conversion.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from airflow_provider_streambed.exceptions import DecodeError


class _Unchanged:
    """The type of :data:`UNCHANGED_TOAST`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"


#: An unchanged TOASTed value (``'u'``): the column kept its previous value.
UNCHANGED_TOAST = _Unchanged()

Value = bytes | None | _Unchanged

_INT16 = struct.Struct(">h").unpack_from
_INT32 = struct.Struct(">i").unpack_from
_UINT32 = struct.Struct(">I").unpack_from
_BEGIN = struct.Struct(">QqI").unpack_from
_COMMIT = struct.Struct(">BQQq").unpack_from
_TYPE_INFO = struct.Struct(">Ii").unpack_from
_TRUNCATE = struct.Struct(">IB").unpack_from
_T, _N, _U, _NEW = ord("t"), ord("n"), ord("u"), ord("N")


class Begin(NamedTuple):
    """``B``: a transaction starts; ``final_lsn`` is its commit record's LSN."""

    final_lsn: int
    commit_time: int
    xid: int


class Commit(NamedTuple):
    """``C``: a transaction ends; ``commit_lsn`` starts the commit record, ``end_lsn`` ends it;
    ``commit_time`` is in microseconds since PostgreSQL's epoch (:func:`commit_timestamp`)."""

    flags: int
    commit_lsn: int
    end_lsn: int
    commit_time: int


#: PostgreSQL's epoch, which pgoutput's timestamps count from.
PG_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


def commit_timestamp(commit_time: int) -> dt.datetime:
    """A Commit message's ``commit_time`` as a UTC datetime."""
    return PG_EPOCH + dt.timedelta(microseconds=commit_time)


class Origin(NamedTuple):
    """``O``: the transaction was replayed from a replication origin."""

    lsn: int
    name: str


class Column(NamedTuple):
    """A column of a Relation message."""

    name: str
    type_oid: int
    type_modifier: int
    is_key: bool


class Relation(NamedTuple):
    """``R``: the layout of a table's tuples from here on."""

    oid: int
    namespace: str
    name: str
    replica_identity: str
    columns: tuple[Column, ...]


class TypeInfo(NamedTuple):
    """``Y``: a non-builtin type's namespace and name."""

    oid: int
    namespace: str
    name: str


class Insert(NamedTuple):
    """``I``: a new row."""

    relation_oid: int
    new: list[Value]


class Update(NamedTuple):
    """``U``: a changed row; ``old_kind`` is ``K`` (key), ``O`` (full old row) or ``None``."""

    relation_oid: int
    old_kind: str | None
    old: list[Value] | None
    new: list[Value]


class Delete(NamedTuple):
    """``D``: a removed row identified by its key (``K``) or full old row (``O``)."""

    relation_oid: int
    old_kind: str
    old: list[Value]


class Truncate(NamedTuple):
    """``T``: tables truncated together; options bit 1 = CASCADE, bit 2 = RESTART IDENTITY."""

    options: int
    relation_oids: tuple[int, ...]


Message = Begin | Commit | Origin | Relation | TypeInfo | Insert | Update | Delete | Truncate


def read_tuple(data: bytes, offset: int) -> tuple[list[Value], int]:
    """Read a TupleData at ``offset``; returns the values and the offset after them.

    Raises:
        DecodeError: an unknown column kind (binary ``'b'`` values are never requested).
    """
    (count,) = _INT16(data, offset)
    offset += 2
    values: list[Value] = []
    append = values.append
    for _ in range(count):
        kind = data[offset]
        if kind == _T:
            (length,) = _INT32(data, offset + 1)
            start = offset + 5
            offset = start + length
            append(data[start:offset])
        elif kind == _N:
            append(None)
            offset += 1
        elif kind == _U:
            append(UNCHANGED_TOAST)
            offset += 1
        else:
            raise DecodeError(f"unexpected tuple column kind {chr(kind)!r} at byte {offset}")
    return values, offset


_COLUMN_TEMPLATE = """
    kind = data[offset]
    if kind == 116:
        start = offset + 5
        offset = start + INT32(data, offset + 1)[0]
        v{i} = data[start:offset]
    elif kind == 110:
        v{i} = None
        offset += 1
    elif kind == 117:
        v{i} = UNCHANGED
        offset += 1
    else:
        raise DecodeError(f"unexpected tuple column kind {{chr(kind)!r}} at byte {{offset}}")
"""
_readers: dict[int, Callable[[bytes, int], list[Value]]] = {}


def tuple_reader(count: int) -> Callable[[bytes, int], list[Value]]:
    """A :func:`read_tuple` specialised for ``count`` columns (loop unrolled; about twice as fast).

    The returned function reads a TupleData at ``offset`` and returns its values; it checks the
    column count. It is generated once per column count from one template.
    """
    reader = _readers.get(count)
    if reader is None:
        body = "".join(_COLUMN_TEMPLATE.format(i=i) for i in range(count))
        source = (
            "def read(data, offset):\n"
            f"    if INT16(data, offset)[0] != {count}:\n"
            f"        raise DecodeError('tuple has ' + str(INT16(data, offset)[0]) + ' columns, expected {count}')\n"
            "    offset += 2\n"
            f"{body}"
            f"    return [{', '.join(f'v{i}' for i in range(count))}]\n"
        )
        namespace: dict[str, Any] = {"INT16": _INT16, "INT32": _INT32, "UNCHANGED": UNCHANGED_TOAST,
                                     "DecodeError": DecodeError}
        exec(compile(source, f"<pgoutput tuple reader {count}>", "exec"), namespace)
        reader = _readers[count] = namespace["read"]
    return reader


def _read_string(data: bytes, offset: int) -> tuple[str, int]:
    end = data.index(0, offset)
    return data[offset:end].decode(), end + 1


def decode_relation(data: bytes) -> Relation:
    """Decode an ``R`` message."""
    (oid,) = _UINT32(data, 1)
    namespace, offset = _read_string(data, 5)
    name, offset = _read_string(data, offset)
    identity = chr(data[offset])
    (count,) = _INT16(data, offset + 1)
    offset += 3
    columns = []
    for _ in range(count):
        flags = data[offset]
        column, offset = _read_string(data, offset + 1)
        type_oid, modifier = _TYPE_INFO(data, offset)
        offset += 8
        columns.append(Column(column, type_oid, modifier, bool(flags & 1)))
    return Relation(oid, namespace, name, identity, tuple(columns))


def decode_update(data: bytes) -> Update:
    """Decode a ``U`` message."""
    (oid,) = _UINT32(data, 1)
    kind = chr(data[5])
    old: list[Value] | None = None
    old_kind: str | None = None
    offset = 6
    if kind in ("K", "O"):
        old_kind = kind
        old, offset = read_tuple(data, offset)
        kind = chr(data[offset])
        offset += 1
    if kind != "N":
        raise DecodeError(f"Update message of relation {oid}: expected 'N', got {kind!r}")
    new, _ = read_tuple(data, offset)
    return Update(oid, old_kind, old, new)


def _decode_simple(tag: int, data: bytes) -> Message:
    if tag == 66:  # B
        return Begin(*_BEGIN(data, 1))
    if tag == 67:  # C
        return Commit(*_COMMIT(data, 1))
    if tag == 79:  # O
        (lsn,) = struct.unpack_from(">Q", data, 1)
        return Origin(lsn, _read_string(data, 9)[0])
    if tag == 89:  # Y
        (oid,) = _UINT32(data, 1)
        namespace, offset = _read_string(data, 5)
        return TypeInfo(oid, namespace, _read_string(data, offset)[0])
    if tag == 84:  # T
        count, options = _TRUNCATE(data, 1)
        return Truncate(options, struct.unpack_from(f">{count}I", data, 6))
    raise DecodeError(f"unknown pgoutput message type {chr(tag)!r} ({len(data)} bytes)")


def decode_message(data: bytes) -> Message:
    """Decode one pgoutput message.

    Raises:
        DecodeError: an unknown message type or malformed bytes.
    """
    tag = data[0]
    try:
        if tag == 73:  # I
            if data[5] != _NEW:
                raise DecodeError(f"Insert message: expected 'N', got {chr(data[5])!r}")
            return Insert(_UINT32(data, 1)[0], read_tuple(data, 6)[0])
        if tag == 85:  # U
            return decode_update(data)
        if tag == 68:  # D
            return Delete(_UINT32(data, 1)[0], chr(data[5]), read_tuple(data, 6)[0])
        if tag == 82:  # R
            return decode_relation(data)
        return _decode_simple(tag, data)
    except (struct.error, IndexError, ValueError, UnicodeDecodeError) as error:
        raise DecodeError(f"malformed pgoutput message {chr(tag)!r} ({len(data)} bytes): {error}") from error
