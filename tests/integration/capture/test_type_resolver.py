"""The type resolver against a real catalog: domains, enums, arrays, refusals, dropped types."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from airflow_provider_streambed.capture import typemap as t
from airflow_provider_streambed.capture.type_resolver import TypeResolver
from airflow_provider_streambed.exceptions import UnsupportedTypeError

pytestmark = pytest.mark.slow
Conn = psycopg.Connection[Any]


def _oid(conn: Conn, name: str) -> int:
    row = conn.execute("SELECT %s::regtype::oid::int8", (name,)).fetchone()
    assert row is not None
    return int(row[0])


def test_domains_resolve_to_their_base_type_and_enums_and_arrays_to_text(source: Conn) -> None:
    source.execute("CREATE TYPE colour AS ENUM ('red')")
    source.execute("CREATE DOMAIN shade AS colour")
    source.execute("CREATE DOMAIN price AS numeric(10, 2)")
    source.execute("CREATE DOMAIN cheap AS price CHECK (VALUE < 10)")
    columns = [("a", _oid(source, "shade"), -1), ("b", _oid(source, "cheap"), -1), ("c", _oid(source, "colour[]"), -1),
               ("d", t.INT4, -1)]
    shade, cheap, colours, number = TypeResolver(source).column_types("t", columns)
    assert (shade.oid, shade.text_form, shade.cast) == (t.TEXT, True, "colour")
    assert shade.copy_expression("a").as_string(source) == 'enum_out("a"::colour)::text'
    assert (cheap.oid, cheap.modifier, str(cheap.arrow)) == (t.NUMERIC, (10 << 16 | 2) + 4, "decimal128(10, 2)")
    assert colours.text_form and not number.text_form and number.fixed_width and not colours.fixed_width
    text = source.execute(f"SELECT {shade.copy_expression('x').as_string(source)} FROM "
                          "(SELECT 'red'::shade AS x) s").fetchone()
    assert text == ("red",)


def test_unsupported_types_are_named_and_dropped_types_are_text(source: Conn) -> None:
    source.execute("CREATE TYPE pair AS (a int, b int)")
    with pytest.raises(UnsupportedTypeError, match="table t: column 'p' has type 'pair'"):
        TypeResolver(source).column_types("table t", [("p", _oid(source, "pair"), -1)])
    with pytest.raises(UnsupportedTypeError, match="column 'r' has type 'int4multirange'"):
        TypeResolver(source).column_types("table t", [("r", _oid(source, "int4multirange"), -1)])
    (gone,) = TypeResolver(source).column_types("t", [("g", 4_000_000_000, -1)])  # not in the catalog any more
    assert gone.text_form and gone.from_text([b"x"], "t").to_pylist() == ["x"]
