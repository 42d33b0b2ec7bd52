"""The type mapping: text values (pgoutput) and ADBC arrays (copies) converted to the same Arrow arrays."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from airflow_provider_streambed.capture import typemap as t
from airflow_provider_streambed.capture.typemap import PgType
from airflow_provider_streambed.exceptions import DecodeError, UnsupportedTypeError, is_final

UTC = dt.UTC
CASES = [
    (t.INT2, -1, [b"-32768", None, b"32767"], pa.int16(), [-32768, None, 32767]),
    (t.INT4, -1, [b"2147483647", b"-1"], pa.int32(), [2147483647, -1]),
    (t.INT8, -1, [b"-9223372036854775808"], pa.int64(), [-9223372036854775808]),
    (t.NUMERIC, (10 << 16 | 3) + 4, [b"1234567.500", b"-0.001", None], pa.decimal128(10, 3),
     [decimal.Decimal("1234567.500"), decimal.Decimal("-0.001"), None]),
    (t.NUMERIC, -1, [b"0.00000000000000000001", b"NaN"], pa.string(), ["0.00000000000000000001", "NaN"]),
    (t.BOOL, -1, [b"t", b"f", None], pa.bool_(), [True, False, None]),
    (t.TEXT, -1, ['hé "q" \\ x'.encode(), b""], pa.string(), ['hé "q" \\ x', ""]),
    (t.VARCHAR, 9, [b"abc"], pa.string(), ["abc"]),
    (t.BPCHAR, 8, [b"ab  "], pa.string(), ["ab  "]),
    (t.DATE, -1, [b"2024-02-29", b"infinity", b"-infinity"], pa.date32(),
     [dt.date(2024, 2, 29), dt.date.max, dt.date.min]),
    (t.TIME, -1, [b"13:14:15.123456", b"00:00:00"], pa.time64("us"), [dt.time(13, 14, 15, 123456), dt.time(0)]),
    (t.TIMESTAMP, -1, [b"2024-01-02 03:04:05.678901", b"2000-01-01 00:00:00"], pa.timestamp("us"),
     [dt.datetime(2024, 1, 2, 3, 4, 5, 678901), dt.datetime(2000, 1, 1)]),
    (t.TIMESTAMPTZ, -1, [b"2024-06-01 10:00:00.123+00", b"infinity"], pa.timestamp("us", tz="UTC"),
     [dt.datetime(2024, 6, 1, 10, 0, 0, 123000, tzinfo=UTC), dt.datetime.max.replace(tzinfo=UTC)]),
    (t.UUID, -1, [b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"], pa.string(), ["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"]),
    (t.JSON, -1, [b'{"a": [1, 2]}'], pa.string(), ['{"a": [1, 2]}']),
    (t.JSONB, -1, [b'{"a": [1, 2], "b": 1}'], pa.string(), ['{"a": [1, 2], "b": 1}']),
    (t.BYTEA, -1, [b"\\xdeadbeef00", b"\\x", None], pa.binary(), [b"\xde\xad\xbe\xef\x00", b"", None]),
    (t.INTERVAL, -1, [b"1 year 2 mons 3 days 04:05:06.7"], pa.string(), ["1 year 2 mons 3 days 04:05:06.7"]),
]


@pytest.mark.parametrize(("oid", "modifier", "values", "arrow", "expected"), CASES)
def test_convert_column(oid: int, modifier: int, values: list[bytes | None], arrow: pa.DataType,
                        expected: list[object]) -> None:
    array = PgType.builtin(oid, modifier).from_text(values, "t.c")
    assert PgType.builtin(oid, modifier).arrow == arrow
    assert array.type == arrow
    assert array.to_pylist() == expected


def test_copy_text_values_are_converted_like_pgoutput_bytes() -> None:
    assert PgType.builtin(t.INT4).from_text(["1", None], "t.c").to_pylist() == [1, None]
    assert PgType.builtin(t.BYTEA, -1).from_text(["\\x01"], "t.c").to_pylist() == [b"\x01"]


def test_floats_keep_nan_and_infinities() -> None:
    for oid in (t.FLOAT4, t.FLOAT8):
        values = PgType.builtin(oid).from_text([b"NaN", b"Infinity", b"-Infinity", b"0.1", b"1.1e+30"], "t.c")
        values = values.to_pylist()
        assert values[0] != values[0] and values[1:3] == [float("inf"), float("-inf")]
        assert values[3] == pytest.approx(0.1) and values[4] == pytest.approx(1.1e30)


def test_wide_numeric_is_a_string() -> None:
    assert PgType.builtin(t.NUMERIC, (60 << 16 | 2) + 4).arrow == pa.string()


@pytest.mark.parametrize(
    ("oid", "modifier", "value", "match"),
    [
        (t.NUMERIC, (10 << 16 | 3) + 4, b"NaN", "t.c: value 'NaN' cannot be read as decimal128"),
        (t.DATE, -1, b"0001-01-01 BC", "value '0001-01-01 BC' cannot be read as date32"),
        (t.INT4, -1, b"x", "value 'x' cannot be read as int32"),
        (t.TEXT, -1, b"\xff", "not valid UTF-8"),
        (t.BYTEA, -1, b"\\xZZ", "not in hex output format"),
    ],
)
def test_bad_values_fail_naming_the_column(oid: int, modifier: int, value: bytes, match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        PgType.builtin(oid, modifier).from_text([value], "t.c")


def test_toast_markers_only_for_variable_width_types() -> None:
    assert all(PgType.builtin(oid).fixed_width for oid in (t.INT4, t.BOOL, t.TIMESTAMPTZ, t.UUID, t.FLOAT8))
    assert not any(PgType.builtin(oid).fixed_width for oid in (t.TEXT, t.BYTEA, t.JSONB, t.NUMERIC))


def _adbc_infinity(oid: int) -> pa.Array:
    """``[infinity, -infinity, NULL]`` as ADBC 1.13 reads them (its epoch shift wraps around)."""
    high, low = t._COPY_INFINITY[oid]
    storage = pa.int32() if oid == t.DATE else pa.int64()
    return pa.array([high, low, None], storage).cast(PgType.builtin(oid).arrow)


@pytest.mark.parametrize("oid", [t.DATE, t.TIMESTAMP, t.TIMESTAMPTZ])
def test_copied_infinities_land_as_decoded_ones(oid: int) -> None:
    column = PgType.builtin(oid)
    copied = column.from_copy(_adbc_infinity(oid), "t.c")
    decoded = column.from_text([b"infinity", b"-infinity", None], "t.c")
    assert copied.equals(decoded)


@pytest.mark.parametrize(
    ("oid", "array", "text", "match"),
    [
        (t.DATE, pa.array([-719_163], pa.int32()).cast(pa.date32()), b"0001-12-31 BC",
         "outside what the mirror carries"),
        (t.TIME, pa.array([86_400_000_000], pa.int64()).cast(pa.time64("us")), b"24:00:00", "24:00:00|23:59:59"),
    ],
)
def test_values_outside_spark_ranges_fail_on_both_paths(oid: int, array: pa.Array, text: bytes, match: str) -> None:
    column = PgType.builtin(oid)
    with pytest.raises(DecodeError, match=match):
        column.from_copy(array, "t.c")
    with pytest.raises(DecodeError, match=r"t\.c"):
        column.from_text([text], "t.c")


def test_copied_numerics_are_read_from_their_text() -> None:
    column = PgType.builtin(t.NUMERIC, (10 << 16 | 3) + 4)
    expression = PgType("numeric", t.NUMERIC, output="numeric_out").copy_expression("n")
    assert expression.as_string() == 'numeric_out("n")::text'
    copied = column.from_copy(pa.array(["1234567.500", None]), "t.c")
    assert copied.equals(column.from_text([b"1234567.500", None], "t.c"))
    with pytest.raises(DecodeError, match="value 'NaN' cannot be read as decimal128"):
        column.from_copy(pa.array(["NaN"]), "t.c")


def test_text_forms_are_copied_as_text_and_native_types_as_they_are() -> None:
    assert PgType("uuid", t.UUID, text_form=True, output="uuid_out").copy_expression("u").as_string() == (
        'uuid_out("u")::text')
    assert PgType.builtin(t.INT8).copy_expression("i").as_string() == '"i"'
    times = pa.array([0, 86_399_999_999, None], pa.int64()).cast(pa.time64("us"))
    assert PgType.builtin(t.TIME).from_copy(times, "t.c").equals(
        PgType.builtin(t.TIME).from_text([b"00:00:00", b"23:59:59.999999", None], "t.c"))


def test_a_text_form_without_an_output_function_cannot_be_copied() -> None:
    with pytest.raises(UnsupportedTypeError, match="type 'mood': no output function known") as error:
        PgType("mood", t.TEXT, text_form=True).copy_expression("m")
    assert not is_final(error.value)  # the source may be fixed (cast or drop the column) before the retry
