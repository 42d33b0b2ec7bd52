"""Which mirrors a run copies again: the source changes no change record carries, and the policy."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from airflow_provider_streambed.capture.pgoutput import Column
from airflow_provider_streambed.capture.resyncs import (
    LastCutMirror,
    check_policy,
    column_aliases,
    renamed_columns,
    resync_reasons,
    source_change,
)
from airflow_provider_streambed.capture.source import NO_PARTITIONS, SourceTable
from airflow_provider_streambed.capture.typemap import FLOAT4, FLOAT8, INT2, INT4, INT8, NUMERIC, TEXT, PgType
from airflow_provider_streambed.exceptions import SchemaChangeError, is_final
from airflow_provider_streambed.staging.column_changes import iceberg_type

#: numeric(12, 2)'s type modifier: ((precision << 16) | scale) + 4
NUMERIC_12_2 = ((12 << 16) | 2) + 4


def table(*columns: tuple[str, int], filled: tuple[str, ...] = (), modifier: int = -1,
          storage: str = "") -> SourceTable:
    layout = tuple(Column(name, oid, modifier if oid == NUMERIC else -1, False) for name, oid in columns)
    types = tuple(PgType.builtin(oid, modifier if oid == NUMERIC else -1) for _, oid in columns)
    return SourceTable("m", "public.t", 1, layout, (), types, filled, storage=storage)


#: The mirror's previous cut, as the catalog gives it (Iceberg's Arrow types: large strings, int32 for smallint)
PREVIOUS = LastCutMirror(pa.schema([("id", pa.int32()), ("n", pa.int32()), ("note", pa.large_string()),
                                    ("amount", pa.decimal128(12, 2))]))


def test_changes_the_mirror_follows_in_place_need_no_resync() -> None:
    same = table(("id", INT4), ("n", INT2), ("note", TEXT), ("amount", NUMERIC), modifier=NUMERIC_12_2)
    assert source_change(same, PREVIOUS) == ""  # smallint is an Iceberg int; text a string
    added = table(("id", INT4), ("n", INT2), ("note", TEXT), ("amount", NUMERIC), ("tier", INT2),
                  modifier=NUMERIC_12_2)
    assert source_change(added, PREVIOUS) == ""  # a column added without a default: older rows are null
    dropped = table(("id", INT4), ("n", INT2), ("amount", NUMERIC), modifier=NUMERIC_12_2)
    assert source_change(dropped, PREVIOUS) == ""  # dropped from the schema by field id, files kept
    widened = table(("id", INT8), ("n", INT2), ("note", TEXT), ("amount", NUMERIC), modifier=((20 << 16) | 2) + 4)
    assert source_change(widened, PREVIOUS) == ""  # int to long, a longer decimal: Iceberg promotes them


def test_changes_no_change_record_carries_need_a_resync() -> None:
    defaulted = table(("id", INT4), ("n", INT2), ("note", TEXT), ("amount", NUMERIC), ("region", TEXT),
                      filled=("region",), modifier=NUMERIC_12_2)
    assert source_change(defaulted, PREVIOUS).startswith("columns ['region'] were added with a DEFAULT")
    retyped = table(("id", TEXT), ("n", INT2), ("note", INT8), ("amount", NUMERIC), modifier=((20 << 16) | 3) + 4)
    assert source_change(retyped, PREVIOUS) == (
        "columns changed type: id int -> string, note string -> long, amount decimal128(12, 2) -> decimal128(20, 3)")
    narrowed = table(("id", INT4), ("n", INT2), ("note", TEXT), ("amount", NUMERIC), modifier=((10 << 16) | 2) + 4)
    assert source_change(narrowed, PREVIOUS) == "columns changed type: amount decimal128(12, 2) -> decimal128(10, 2)"


def test_a_partitioned_table_whose_partitions_changed_needs_a_resync() -> None:
    previous = LastCutMirror(pa.schema([("id", pa.int32())]), storage="16390:16390,16395:16395")
    assert source_change(table(("id", INT4), storage="16390:16390,16395:16395"), previous) == ""
    for storage in ("16390:16390,16395:16401", "16390:16390", "16390:16390,16395:16395,16402:16402"):
        assert source_change(table(("id", INT4), storage=storage), previous).startswith("its partitions changed")
    unrecorded = LastCutMirror(previous.columns)  # a cut of an older release: not compared
    assert source_change(table(("id", INT4), storage="16390:16390"), unrecorded) == ""
    empty = LastCutMirror(previous.columns, attnums={"id": 1})  # no partitions, recorded as none before NO_PARTITIONS
    assert source_change(table(("id", INT4), storage=NO_PARTITIONS), empty) == ""
    assert source_change(table(("id", INT4)), empty) == ""  # a plain table
    assert source_change(table(("id", INT4), storage="16390:16390"), empty).startswith("its partitions changed")
    none = LastCutMirror(previous.columns, storage=NO_PARTITIONS, attnums={"id": 1})
    assert source_change(table(("id", INT4), storage="16390:16390"), none).startswith("its partitions changed")


def test_a_changed_key_needs_a_resync() -> None:
    keyed = LastCutMirror(pa.schema([("id", pa.int32())]), identity="key:id")
    same = SourceTable("m", "public.t", 1, (Column("id", INT4, -1, True),), ("id",), (PgType.builtin(INT4),))
    assert source_change(same, keyed) == ""
    assert source_change(dataclasses.replace(same, key_columns=(), keyless=True), keyed) == (
        "what names one row changed from key:id to keyless (primary key or replica identity)")
    assert source_change(same, LastCutMirror(keyed.columns)) == ""  # recorded by an older release: not compared


def test_a_rename_is_told_from_a_drop_by_attnum() -> None:
    recorded = LastCutMirror.of(pa.schema([("id", pa.int32()), ("note", pa.string())]),
                                {"attnums": '{"id": 1, "note": 3}', "storage": "", "identity": "key:id"})
    assert recorded.attnums == {"id": 1, "note": 3} and recorded.identity == "key:id"
    renamed = dataclasses.replace(table(("id", INT4), ("remark", TEXT)), attnums=(1, 3))
    assert renamed_columns(renamed, recorded) == {"note": "remark"}
    assert source_change(renamed, recorded) == ""  # renamed in place, keeping its field id
    assert column_aliases(renamed, recorded) == {"remark": ("note",)}
    dropped_and_added = dataclasses.replace(renamed, attnums=(1, 4))  # DROP note, ADD remark: another attnum
    assert renamed_columns(dropped_and_added, recorded) == {} and column_aliases(dropped_and_added, recorded) == {}
    assert source_change(dropped_and_added, recorded) == ""


def test_a_column_taking_a_dropped_columns_name_needs_a_resync() -> None:
    recorded = LastCutMirror.of(pa.schema([("id", pa.int32()), ("note", pa.string())]),
                                {"attnums": '{"id": 1, "note": 3}'},
                                names={"id": ("id",), "note": ("memo", "note")}, retired=["legacy"])
    readded = dataclasses.replace(table(("id", INT4), ("note", TEXT)), attnums=(1, 5))  # DROP note, ADD note
    assert source_change(readded, recorded) == (
        "columns ['note'] take a name the mirror's older files hold for another column (a dropped or renamed one)")
    back = dataclasses.replace(table(("id", INT4), ("note", TEXT), ("legacy", TEXT)), attnums=(1, 3, 6))
    assert source_change(back, recorded).startswith(
        "columns ['legacy'] take a name the mirror's older files hold for another column")
    taken = dataclasses.replace(table(("id", INT4), ("note", TEXT), ("memo", TEXT)), attnums=(1, 3, 7))
    assert source_change(taken, recorded).startswith(  # "memo" is an older name of note: its files hold it
        "columns ['memo'] take a name the mirror's older files hold for another column")
    back = dataclasses.replace(table(("id", INT4), ("memo", TEXT)), attnums=(1, 3))
    assert source_change(back, recorded) == ""  # note renamed back to memo: its own older name
    renamed_again = dataclasses.replace(table(("id", INT4), ("remark", TEXT)), attnums=(1, 3))
    assert column_aliases(renamed_again, recorded) == {"remark": ("note", "memo")}  # every older name of the field


def test_iceberg_types_fold_what_iceberg_does_not_tell_apart() -> None:
    assert iceberg_type(pa.int16()) == iceberg_type(pa.int32()) == "int" != iceberg_type(pa.int64())
    assert iceberg_type(pa.string()) == iceberg_type(pa.large_string()) == "string"
    assert iceberg_type(pa.binary()) == iceberg_type(pa.large_binary()) == "binary"
    assert iceberg_type(pa.timestamp("us", "UTC")) == "timestamptz" != iceberg_type(pa.timestamp("us"))
    assert iceberg_type(PgType.builtin(FLOAT4).arrow) == "float" != iceberg_type(PgType.builtin(FLOAT8).arrow)


def test_requested_members_and_new_members() -> None:
    tables = {"a": table(("id", INT4)), "b": table(("id", INT8)), "c": table(("id", INT4))}
    one_int = LastCutMirror(pa.schema([("id", pa.int32())]))
    previous = {"a": one_int, "b": one_int}
    assert resync_reasons(tables, {"a": one_int, "b": LastCutMirror(pa.schema([("id", pa.string())]))},
                          requested=["A"]) == {"a": "requested", "b": "columns changed type: id string -> long"}
    assert resync_reasons(tables, previous) == {}  # c is new: copied anyway


def test_the_fail_policy_refuses_a_source_change_as_final_naming_the_command() -> None:
    tables = {"a": table(("id", INT4))}
    check_policy("g", "evolve", {"a": "columns ['x'] were dropped or renamed"}, tables)
    check_policy("g", "fail", {"a": "requested"}, tables)  # asked for: done whatever the policy
    expected = (r"group 'g', member 'a': source table public.t: columns \['x'\] were dropped .*"
                r"\(or run `streambed resync --group g --member a`\)")
    with pytest.raises(SchemaChangeError, match=expected) as refused:
        check_policy("g", "fail", {"a": "columns ['x'] were dropped or renamed"}, tables)
    assert is_final(refused.value)


def test_a_last_cut_gives_each_column_its_field_id() -> None:
    columns = pa.schema([pa.field("id", pa.int32(), metadata={b"PARQUET:field_id": b"1"}),
                         pa.field("note", pa.large_string(), metadata={b"PARQUET:field_id": b"7"})])
    assert LastCutMirror(columns).field_ids == {"id": 1, "note": 7}
    assert LastCutMirror(pa.schema([("id", pa.int32())])).field_ids == {}
