"""Bootstrap copies under concurrent writes, and every mapped type round-tripped through the server."""

from __future__ import annotations

import datetime as dt
import decimal
import threading
from collections import Counter
from typing import Any

import psycopg
import pytest

from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.ledger import Ledger
from tests.integration.capture.conftest import Row, apply_changes, make_group, publish, read_changes, table_state

pytestmark = pytest.mark.slow
Conn = psycopg.Connection[Any]


def test_bootstrap_with_concurrent_writes_reaches_the_exact_state(
    source: Conn, ledger: Ledger, warehouse: str, pg_dsn: str
) -> None:
    source.execute("CREATE TABLE t (id int PRIMARY KEY, v int)")
    source.execute("CREATE TABLE events (n int, note text)")  # append-only: a duplicate would show
    source.execute("INSERT INTO t SELECT g, 0 FROM generate_series(1, 300) g")
    source.execute("INSERT INTO events SELECT g, 'before' FROM generate_series(1, 50) g")
    group = make_group("t", "events", append_only=("events",))
    stop = threading.Event()

    def write() -> None:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            n = 1000
            while not stop.is_set():
                n += 1
                with conn.transaction():
                    conn.execute("UPDATE t SET v = v + 1 WHERE id = %s", (n % 300 + 1,))
                    conn.execute("INSERT INTO t VALUES (%s, -1)", (n,))
                    conn.execute("DELETE FROM t WHERE id = %s", (n - 5,))
                    conn.execute("INSERT INTO events VALUES (%s, 'during')", (n,))

    with psycopg.connect(pg_dsn, autocommit=True) as early:
        early.execute("BEGIN")
        early.execute("INSERT INTO events VALUES (-1, 'open while the slot is created')")
        threading.Timer(0.5, early.execute, ("COMMIT",)).start()  # slot creation waits for it
        writer = threading.Thread(target=write)
        writer.start()
        try:
            first = capture_run(source, group, ledger, "r1", warehouse)
        finally:
            stop.set()
            writer.join()
    assert first.bootstrap and all(table.bootstrap for table in first.manifest.tables)
    publish(source, ledger, group, first)
    second = capture_run(source, group, ledger, "r2", warehouse)  # writers stopped: the state at W2 is now
    assert not second.bootstrap
    state: dict[tuple[Any, ...], Row] = {}
    for result in (first, second):
        apply_changes(state, read_changes(result.manifest, "t"), ("id",))
    assert state == table_state(source, "t", ("id",))
    events = [row for result in (first, second) for row in read_changes(result.manifest, "events").to_pylist()]
    appended = Counter((row["n"], row["note"]) for row in events)
    truth = Counter(source.execute("SELECT n, note FROM events").fetchall())
    assert appended == truth and sum(truth.values()) > 51


def test_a_mirror_added_later_is_bootstrapped(source: Conn, ledger: Ledger, warehouse: str) -> None:
    source.execute("CREATE TABLE a (id int PRIMARY KEY)")
    source.execute("CREATE TABLE b (id int PRIMARY KEY, v text)")
    source.execute("INSERT INTO b VALUES (1, 'x'), (2, 'y')")
    publish(source, ledger, make_group("a"), capture_run(source, make_group("a"), ledger, "r1", warehouse))
    source.execute("INSERT INTO b VALUES (3, 'z')")
    group = make_group("a", "b")
    result = capture_run(source, group, ledger, "r2", warehouse)
    table_b = next(table for table in result.manifest.tables if table.member == "b")
    assert table_b.bootstrap and table_b.key_columns == ("id",)
    state: dict[tuple[Any, ...], Row] = {}
    apply_changes(state, read_changes(result.manifest, "b"), ("id",))
    assert state == table_state(source, "b", ("id",))
    publish(source, ledger, group, result)
    source.execute("UPDATE b SET v = 'changed' WHERE id = 1")
    later = capture_run(source, group, ledger, "r3", warehouse)
    assert not later.bootstrap
    assert read_changes(later.manifest, "b").to_pylist()[0]["v"] == "changed"


TYPES = {
    "c_int2": ("int2", "-32768", -32768),
    "c_int4": ("int4", "2147483647", 2147483647),
    "c_int8": ("int8", "-9223372036854775808", -9223372036854775808),
    "c_num": ("numeric(10,3)", "1234567.5", decimal.Decimal("1234567.500")),
    "c_numfree": ("numeric", "0.00000000000000000001", "0.00000000000000000001"),
    "c_f4": ("float4", "'-Infinity'", float("-inf")),
    "c_f8": ("float8", "0.30000000000000004", 0.30000000000000004),
    "c_bool": ("bool", "true", True),
    "c_text": ("text", "E'h\\u00e9 \"q\" \\\\ x\\n'", 'hé "q" \\ x\n'),
    "c_varchar": ("varchar(5)", "'abc'", "abc"),
    "c_char": ("char(4)", "'ab'", "ab  "),
    "c_date": ("date", "'2024-02-29'", dt.date(2024, 2, 29)),
    "c_time": ("time", "'13:14:15.123456'", dt.time(13, 14, 15, 123456)),
    "c_ts": ("timestamp", "'2024-01-02 03:04:05.678901'", dt.datetime(2024, 1, 2, 3, 4, 5, 678901)),
    "c_tstz": ("timestamptz", "'2024-06-01 15:30:00.123+05:30'", dt.datetime(2024, 6, 1, 10, 0, 0, 123000, dt.UTC)),
    "c_uuid": ("uuid", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
    "c_json": ("json", "'{\"a\": [1, 2]}'", '{"a": [1, 2]}'),
    "c_jsonb": ("jsonb", "'{\"b\":1, \"a\":[1,2]}'", '{"a": [1, 2], "b": 1}'),
    "c_bytea": ("bytea", "'\\xdeadbeef00'::bytea", b"\xde\xad\xbe\xef\x00"),
    "c_arr": ("int4[]", "'{1,NULL,3}'", "{1,NULL,3}"),
    "c_tarr": ("text[]", "ARRAY['a b', 'c,d', NULL]", '{"a b","c,d",NULL}'),
}


def test_every_type_round_trips_through_copy_and_decoding(source: Conn, ledger: Ledger, warehouse: str) -> None:
    columns = ", ".join(f"{name} {pg_type}" for name, (pg_type, _, _) in TYPES.items())
    source.execute(f"CREATE TABLE typed (id int PRIMARY KEY, {columns})")
    values = ", ".join(literal for _, literal, _ in TYPES.values())
    source.execute("SET TimeZone = 'Asia/Kolkata'")  # the writer's settings must not matter
    source.execute(f"INSERT INTO typed VALUES (1, {values})")
    source.execute("INSERT INTO typed (id) VALUES (2)")
    group = make_group("typed")
    copied = capture_run(source, group, ledger, "r1", warehouse)
    publish(source, ledger, group, copied)
    source.execute("SET DateStyle = 'German, DMY'")
    source.execute(f"INSERT INTO typed VALUES (3, {values})")
    source.execute("INSERT INTO typed (id) VALUES (4)")
    decoded = capture_run(source, group, ledger, "r2", warehouse)
    expected = {name: value for name, (_, _, value) in TYPES.items()}
    nulls = dict.fromkeys(TYPES)
    for result, (full, empty) in ((copied, (1, 2)), (decoded, (3, 4))):
        rows = {row["id"]: row for row in read_changes(result.manifest, "typed").to_pylist()}
        assert {name: rows[full][name] for name in TYPES} == expected
        assert {name: rows[empty][name] for name in TYPES} == nulls
