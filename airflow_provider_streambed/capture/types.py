"""PostgreSQL type OIDs to Arrow types, and column-wise conversion of pgoutput text values.

Values arrive as the text output of the decoding session (pinned to ``TimeZone=UTC``,
``DateStyle=ISO``, ``extra_float_digits=3``, ``bytea_output=hex`` by :mod:`.extract`). A whole
column of a batch is converted at once with Arrow casts (no per-value Python work except for
``bytea``). Mapping:

- int2/int4/int8 -> int16/int32/int64; float4/float8 -> float32/float64 (NaN and +-Infinity kept)
- numeric(p, s) with p <= 38 -> decimal128(p, s); unconstrained or wider numeric -> string
  (a NaN in a constrained numeric column cannot be a decimal: it fails loudly)
- bool -> bool; text/varchar/bpchar (blank-padded as PostgreSQL prints it) -> string
- date -> date32; time -> time64[us]; timestamp -> timestamp[us]; timestamptz -> timestamp[us, UTC]
  (``infinity`` / ``-infinity`` become the largest / smallest value Python's datetime can hold;
  BC dates fail loudly)
- uuid, json, jsonb, arrays and every other type -> string (PostgreSQL's text form); bytea -> binary
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_streambed.exceptions import DecodeError

BOOL, BYTEA, INT8, INT2, INT4, TEXT, JSON = 16, 17, 20, 21, 23, 25, 114
FLOAT4, FLOAT8, BPCHAR, VARCHAR, DATE, TIME = 700, 701, 1042, 1043, 1082, 1083
TIMESTAMP, TIMESTAMPTZ, NUMERIC, UUID, JSONB = 1114, 1184, 1700, 2950, 3802

_SIMPLE: dict[int, pa.DataType] = {
    BOOL: pa.bool_(),
    BYTEA: pa.binary(),
    INT2: pa.int16(),
    INT4: pa.int32(),
    INT8: pa.int64(),
    FLOAT4: pa.float32(),
    FLOAT8: pa.float64(),
    DATE: pa.date32(),
    TIME: pa.time64("us"),
    TIMESTAMP: pa.timestamp("us"),
    TIMESTAMPTZ: pa.timestamp("us", tz="UTC"),
}
#: Fixed-width types: PostgreSQL never stores them out of line, so they are never unchanged-TOAST.
FIXED_WIDTH = frozenset({BOOL, INT2, INT4, INT8, FLOAT4, FLOAT8, DATE, TIME, TIMESTAMP, TIMESTAMPTZ, UUID})
_MAX_DECIMAL_PRECISION = 38
_INFINITY = {
    DATE: (dt.date.max.isoformat(), dt.date.min.isoformat()),
    TIMESTAMP: (dt.datetime.max.isoformat(" "), dt.datetime.min.isoformat(" ")),
    TIMESTAMPTZ: (dt.datetime.max.isoformat(" ") + "+00", dt.datetime.min.isoformat(" ") + "+00"),
}


def numeric_precision_scale(type_modifier: int) -> tuple[int, int] | None:
    """``(precision, scale)`` of a numeric type modifier, ``None`` when unconstrained."""
    if type_modifier < 4:
        return None
    value = type_modifier - 4
    return (value >> 16) & 0xFFFF, value & 0xFFFF


def arrow_type(type_oid: int, type_modifier: int) -> pa.DataType:
    """The Arrow type a column of this PostgreSQL type is written as."""
    if type_oid == NUMERIC:
        bounds = numeric_precision_scale(type_modifier)
        if bounds is not None and 0 < bounds[0] <= _MAX_DECIMAL_PRECISION and bounds[1] <= bounds[0]:
            return pa.decimal128(*bounds)
        return pa.string()
    return _SIMPLE.get(type_oid, pa.string())


def may_be_toasted(type_oid: int) -> bool:
    """Whether an UPDATE can leave this column's value out as unchanged-TOAST."""
    return type_oid not in FIXED_WIDTH


def _first_bad(text: pa.Array, target: pa.DataType) -> str:
    for value in text.to_pylist():
        if value is None:
            continue
        try:
            pa.array([value], pa.string()).cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return str(value)
    return "?"


def _cast(text: pa.Array, type_oid: int, target: pa.DataType, where: str) -> pa.Array:
    if type_oid == BOOL:
        return pc.equal(text, "t")
    if type_oid == TIME:
        stamped = pc.binary_join_element_wise("1970-01-01", text, " ")
        return pc.cast(stamped, pa.timestamp("us")).cast(target)
    try:
        return text.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        if type_oid in _INFINITY:
            high, low = _INFINITY[type_oid]
            replaced = pc.replace_substring_regex(pc.replace_substring_regex(text, "^infinity$", high),
                                                  "^-infinity$", low)
            try:
                return replaced.cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass
        raise DecodeError(f"{where}: value {_first_bad(text, target)!r} cannot be read as {target}") from error


def _is_bytes(values: Sequence[bytes | str | None]) -> bool:
    return next((isinstance(v, bytes) for v in values if v is not None), True)


def _bytea(value: bytes | str) -> bytes:
    text = value.decode() if isinstance(value, bytes) else value
    return bytes.fromhex(text[2:])


def convert_column(values: Sequence[bytes | str | None], type_oid: int, type_modifier: int, where: str) -> pa.Array:
    """Convert one column's text values (``None`` = NULL) to its Arrow type.

    Args:
        values: the column's values in PostgreSQL's text form (bytes from pgoutput, str from COPY).
        type_oid: the column's type OID from the Relation message.
        type_modifier: the column's type modifier (numeric precision and scale).
        where: group/table/column, for error messages.

    Raises:
        DecodeError: a value cannot be represented in the column's Arrow type.
    """
    target = arrow_type(type_oid, type_modifier)
    if type_oid == BYTEA:
        try:
            return pa.array([None if v is None else _bytea(v) for v in values], pa.binary())
        except ValueError as error:
            raise DecodeError(f"{where}: a bytea value is not in hex output format") from error
    try:
        text = pa.array(values, pa.binary()).cast(pa.string()) if _is_bytes(values) else pa.array(values, pa.string())
    except pa.ArrowInvalid as error:
        raise DecodeError(f"{where}: a value is not valid UTF-8") from error
    if target == pa.string():
        return text
    try:
        return _cast(text, type_oid, target, where)
    except pa.ArrowInvalid as error:
        raise DecodeError(f"{where}: {error}") from error
