"""One mapping of PostgreSQL column types to Arrow (and so Iceberg) types, for copies and for pgoutput.

A row must land identically whichever path brought it: a bootstrap copy (binary ``COPY`` read
into Arrow by ADBC, :mod:`.copy`) or the change stream (pgoutput's text values, :mod:`.extract`).
Both paths go through a column's :class:`PgType`: :meth:`PgType.from_copy` converts an ADBC
array, :meth:`PgType.from_text` converts text values, and both end in the same Arrow type with
the same values and the same range checks. Whole columns are converted with Arrow compute (no
Python work per value except for pgoutput's ``bytea``).

==========================================  ======================  ================  ==========================
PostgreSQL                                  Arrow                   Iceberg           notes
==========================================  ======================  ================  ==========================
bool                                        bool                    boolean
int2 / int4 / int8                          int16 / int32 / int64   int / int / long
float4 / float8                             float32 / float64       float / double    NaN, +-Infinity kept
numeric(p, s), p <= 38                      decimal128(p, s)        decimal(p, s)     NaN, +-Infinity fail
numeric, numeric(p > 38)                    string                  string            PostgreSQL's text form
text, varchar, bpchar                       string                  string            bpchar blank-padded
bytea                                       binary                  binary
date                                        date32                  date              see ranges below
time                                        time64[us]              time              24:00:00 fails
timestamp                                   timestamp[us]           timestamp         see ranges below
timestamptz                                 timestamp[us, UTC]      timestamptz       stored in UTC
uuid, json, jsonb, xml, interval, timetz,   string                  string            PostgreSQL's text form
money, inet, cidr, macaddr(8), bit,
varbit, geometric types, tsvector,
tsquery, name, "char", oid, pg_lsn,
jsonpath, enums, arrays of any of these
a domain                                    its base type's         its base type's
==========================================  ======================  ================  ==========================

Ranges: dates and timestamps hold years 1 to 9999 (what Spark and Python's datetime carry);
``infinity`` / ``-infinity`` become the largest / smallest of them, other values outside fail
(BC dates too). Text forms follow the decoding session's settings (``TimeZone=UTC``,
``DateStyle=ISO``, ``IntervalStyle=postgres``, ``extra_float_digits=3``, ``bytea_output=hex``),
which the copy sessions pin too. Spark reads ``time`` columns with ``spark.sql.timeType.enabled``
(set by :mod:`~airflow_provider_streambed.read.spark_snapshot` and the refresh job).

Any other type (composite, range and multirange types, extension types such as ``hstore`` or
PostGIS ``geometry``) is refused by :class:`~.type_resolver.TypeResolver` before any copy,
naming the column.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from psycopg import sql

from airflow_provider_streambed.exceptions import DecodeError, UnsupportedTypeError

BOOL, BYTEA, CHAR, NAME, INT8, INT2, INT4, TEXT, OID, JSON = 16, 17, 18, 19, 20, 21, 23, 25, 26, 114
FLOAT4, FLOAT8, BPCHAR, VARCHAR, DATE, TIME = 700, 701, 1042, 1043, 1082, 1083
TIMESTAMP, TIMESTAMPTZ, INTERVAL, TIMETZ, NUMERIC, UUID, JSONB = 1114, 1184, 1186, 1266, 1700, 2950, 3802

#: Built-in types with an Arrow type of their own (besides numerics).
NATIVE: dict[int, pa.DataType] = {
    BOOL: pa.bool_(),
    BYTEA: pa.binary(),
    INT2: pa.int16(),
    INT4: pa.int32(),
    INT8: pa.int64(),
    FLOAT4: pa.float32(),
    FLOAT8: pa.float64(),
    TEXT: pa.string(),
    VARCHAR: pa.string(),
    BPCHAR: pa.string(),
    DATE: pa.date32(),
    TIME: pa.time64("us"),
    TIMESTAMP: pa.timestamp("us"),
    TIMESTAMPTZ: pa.timestamp("us", tz="UTC"),
}
#: Built-in types carried as their text form (besides enums, arrays and wide numerics).
TEXT_FORM = frozenset({
    CHAR, NAME, OID, JSON, 142, 600, 601, 602, 603, 604, 628, 650, 718, 774, 790, 829, 869, INTERVAL, TIMETZ,
    1560, 1562, UUID, 3220, 3614, 3615, JSONB, 4072,
})
_MAX_DECIMAL_PRECISION = 38
_DAY_US = 86_400_000_000
#: Days and microseconds from 1970-01-01 to PostgreSQL's epoch 2000-01-01. ADBC 1.13 adds them to
#: PostgreSQL's ``infinity`` (the largest int) and ``-infinity`` (the smallest), which wraps around:
#: the values below stand for them in its arrays (pinned by a test against ADBC).
_PG_EPOCH_DAYS, _PG_EPOCH_US = 10_957, 946_684_800_000_000
_INT32, _INT64 = 2**32, 2**64
_COPY_INFINITY = {
    DATE: (2**31 - 1 + _PG_EPOCH_DAYS - _INT32, -(2**31) + _PG_EPOCH_DAYS),
    TIMESTAMP: (2**63 - 1 + _PG_EPOCH_US - _INT64, -(2**63) + _PG_EPOCH_US),
}
_COPY_INFINITY[TIMESTAMPTZ] = _COPY_INFINITY[TIMESTAMP]
_EPOCH = dt.datetime(1970, 1, 1)
#: The values ``infinity`` / ``-infinity`` become, as integers of the Arrow type's storage.
_BOUNDS = {
    DATE: ((dt.date.max - _EPOCH.date()).days, (dt.date.min - _EPOCH.date()).days),
    TIMESTAMP: ((dt.datetime.max - _EPOCH) // dt.timedelta(microseconds=1),
                (dt.datetime.min - _EPOCH) // dt.timedelta(microseconds=1)),
}
_BOUNDS[TIMESTAMPTZ] = _BOUNDS[TIMESTAMP]
_TEXT_INFINITY = {
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


def decimal_type(type_modifier: int) -> pa.DataType | None:
    """The Arrow decimal a numeric type modifier maps to, ``None`` when the column is carried as text.

    Args:
        type_modifier: the column's ``atttypmod`` (``-1``: an unconstrained ``numeric``).

    Returns:
        ``decimal128(p, s)`` for a precision of 1 to 38, else ``None`` (PostgreSQL's text form).
    """
    bounds = numeric_precision_scale(type_modifier)
    if bounds is not None and 0 < bounds[0] <= _MAX_DECIMAL_PRECISION and bounds[1] <= bounds[0]:
        return pa.decimal128(*bounds)
    return None


@dataclass(frozen=True, slots=True)
class PgType:
    """A column's PostgreSQL type as the mapping carries it (a domain resolved to its base type).

    Attributes:
        name: the declared type as PostgreSQL formats it (``numeric(12,3)``, ``mood``, a domain's name).
        oid: the (base) type's OID.
        modifier: the (base) type's modifier (numeric precision and scale).
        fixed_width: never stored out of line, so never an unchanged-TOAST value.
        text_form: carried as PostgreSQL's text output, a string.
        output: the (base) type's output function (``typoutput``), as SQL names it: a copy reads
            text forms and numerics through it, which is what pgoutput sends (a cast to text
            may differ: ``'::1'::inet::text`` is ``::1/128``).
        cast: a domain's base type as SQL names it: a copy casts the column to it before the
            output function (``enum_out`` does not take a domain over an enum); empty otherwise.
    """

    name: str
    oid: int
    modifier: int = -1
    fixed_width: bool = False
    text_form: bool = False
    output: str = ""
    cast: str = ""

    @classmethod
    def builtin(cls, oid: int, modifier: int = -1) -> PgType:
        """A built-in scalar type by OID without asking a catalog (what the resolver gives for it; the
        conversions' unit tests use it)."""
        fixed = oid in {BOOL, INT2, INT4, INT8, FLOAT4, FLOAT8, DATE, TIME, TIMESTAMP, TIMESTAMPTZ, UUID, OID, CHAR,
                        NAME, INTERVAL, TIMETZ}
        return cls(str(oid), oid, modifier, fixed, oid in TEXT_FORM or (oid == NUMERIC and not decimal_type(modifier)))

    @property
    def arrow(self) -> pa.DataType:
        """The Arrow type the column is written as."""
        if self.text_form:
            return pa.string()
        if self.oid == NUMERIC:
            decimal = decimal_type(self.modifier)
            assert decimal is not None  # text_form otherwise
            return decimal
        return NATIVE[self.oid]

    def copy_expression(self, column: str) -> sql.Composable:
        """The select-list expression a copy reads the column with: text forms and numerics as the
        output function's text, other types as they are (binary): UnsupportedTypeError without one."""
        if self.text_form or self.oid == NUMERIC:
            if not self.output:
                raise UnsupportedTypeError(f"type {self.name!r}: no output function known")
            value: sql.Composable = sql.Identifier(column)
            if self.cast:
                value = sql.SQL("{}::{}").format(value, sql.SQL(self.cast))
            return sql.SQL("{}({})::text").format(sql.SQL(self.output), value)
        return sql.Identifier(column)

    def from_copy(self, array: pa.Array, where: str) -> pa.Array:
        """The column's Arrow array from an ADBC array of :meth:`copy_expression`.

        Raises:
            DecodeError: a value is outside what the Arrow type (or Spark) carries, or not a number.
        """
        target = self.arrow
        if self.oid in _COPY_INFINITY and not self.text_form:
            array = self._replace_infinity(array)
        elif array.type != target and self.oid == NUMERIC:
            array = _cast_text(array.cast(pa.string()), self, where)
        elif array.type != target:
            array = array.cast(target)
        _check_range(array, self, where)
        return array

    def _replace_infinity(self, array: pa.Array) -> pa.Array:
        storage = pa.int32() if self.oid == DATE else pa.int64()
        numbers = array.cast(storage)
        (wrapped_high, wrapped_low), (high, low) = _COPY_INFINITY[self.oid], _BOUNDS[self.oid]
        numbers = pc.if_else(pc.equal(numbers, wrapped_high), high, numbers)
        numbers = pc.if_else(pc.equal(numbers, wrapped_low), low, numbers)
        return numbers.cast(storage).cast(self.arrow)

    def from_text(self, values: Sequence[bytes | str | None], where: str) -> pa.Array:
        """The column's Arrow array from PostgreSQL text values (``None`` = NULL).

        Raises:
            DecodeError: a value cannot be represented in the column's Arrow type.
        """
        if self.oid == BYTEA and not self.text_form:
            try:
                return pa.array([None if v is None else _bytea(v) for v in values], pa.binary())
            except ValueError as error:
                raise DecodeError(f"{where}: a bytea value is not in hex output format") from error
        try:
            text = (pa.array(values, pa.binary()).cast(pa.string()) if _is_bytes(values)
                    else pa.array(values, pa.string()))
        except pa.ArrowInvalid as error:
            raise DecodeError(f"{where}: a value is not valid UTF-8") from error
        if self.arrow == pa.string():
            return text
        array = _cast_text(text, self, where)
        _check_range(array, self, where)
        return array


def _first_bad(text: pa.Array, target: pa.DataType) -> str:
    for value in text.to_pylist():
        if value is None:
            continue
        try:
            pa.array([value], pa.string()).cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return str(value)
    return "?"


def _cast_text(text: pa.Array, column: PgType, where: str) -> pa.Array:
    target = column.arrow
    if column.oid == BOOL:
        return pc.equal(text, "t")
    try:
        if column.oid == TIME:
            stamped = pc.binary_join_element_wise("1970-01-01", text, " ")
            return pc.cast(stamped, pa.timestamp("us")).cast(target)
        return text.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        if column.oid in _TEXT_INFINITY:
            high, low = _TEXT_INFINITY[column.oid]
            replaced = pc.replace_substring_regex(pc.replace_substring_regex(text, "^infinity$", high),
                                                  "^-infinity$", low)
            try:
                return replaced.cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass
        raise DecodeError(f"{where}: value {_first_bad(text, target)!r} cannot be read as {target}") from error


def _check_range(array: pa.Array, column: PgType, where: str) -> None:
    """Fail on dates and timestamps outside years 1-9999 and on ``time`` 24:00:00 (Spark carries neither)."""
    if column.oid == TIME and not column.text_form:
        numbers, bounds = array.cast(pa.int64()), (_DAY_US - 1, 0)
    elif column.oid in _BOUNDS and not column.text_form:
        numbers, bounds = array.cast(pa.int32() if column.oid == DATE else pa.int64()), _BOUNDS[column.oid]
    else:
        return
    extremes = pc.min_max(numbers)
    low, high = extremes["min"].as_py(), extremes["max"].as_py()
    if low is None or (bounds[1] <= low and high <= bounds[0]):
        return
    bad = low if low < bounds[1] else high
    shown = pa.array([bad], numbers.type).cast(column.arrow).cast(pa.string())[0]  # Arrow formats any year
    raise DecodeError(
        f"{where}: value {shown} ({column.name}) is outside what the mirror carries "
        f"({'00:00:00 to 23:59:59.999999' if column.oid == TIME else 'years 1 to 9999'})"
    )


def _is_bytes(values: Sequence[bytes | str | None]) -> bool:
    return next((isinstance(v, bytes) for v in values if v is not None), True)


def _bytea(value: bytes | str) -> bytes:
    text = value.decode() if isinstance(value, bytes) else value
    return bytes.fromhex(text[2:])
