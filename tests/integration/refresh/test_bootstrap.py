"""Bootstrap copies end to end: parallel ranges under a live writer, every type through both paths,
unsupported types, progress and the copy adopted as the mirror's first files."""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import math
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession

from airflow_provider_streambed.capture import copy as copy_module
from airflow_provider_streambed.capture.bootstrap import CopyOptions
from airflow_provider_streambed.capture.copy import TableProgress
from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.capture.run_records import CaptureResult, CaptureSettings
from airflow_provider_streambed.capture.slot import advance_slot
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.examples.bank import SCHEMA as BANK_SCHEMA
from airflow_provider_streambed.examples.bank import Writer
from airflow_provider_streambed.exceptions import UnsupportedTypeError
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.local import refresh_once
from airflow_provider_streambed.member_declarations import Mirror, SqlMember
from airflow_provider_streambed.publish.cut import publish_cut
from airflow_provider_streambed.read import Cut, CutReader
from airflow_provider_streambed.read.snapshot_files import plan_snapshot_files
from airflow_provider_streambed.refresh import build_job_spec, collect_member_manifests
from airflow_provider_streambed.refresh.mirrors.duckdb_merge import IN_PROCESS_MERGE_CONF
from airflow_provider_streambed.refresh.spark.job import run_job
from airflow_provider_streambed.steps import last_cut_mirrors
from airflow_provider_streambed.testing.spark import EventLogs
from tests.integration.airflow.bank import check_cut
from tests.integration.refresh.deletes import delete_files_with_images

pytestmark = pytest.mark.slow
Conn = psycopg.Connection[Any]


@pytest.fixture
def catalog(sqlite_catalog_uri: str, tmp_path: Path) -> SqlCatalog:
    return SqlCatalog("lake", uri=sqlite_catalog_uri, warehouse=(tmp_path / "warehouse").as_uri())


def one_run(conn: Conn, group: RefreshGroup, catalog: SqlCatalog, spark: SparkSession, run_key: str,
            copy: CopyOptions | None = None) -> Cut:
    """Capture (comparing with the last cut, as the capture step does), refresh (in this process's
    Spark) and publish one cut, then advance the slot."""
    ledger = Ledger(catalog.engine)
    ledger.create()
    previous = last_cut_mirrors(catalog, group, ledger.last_cut(group.name))
    captured = capture_run(conn, group, ledger, run_key, catalog.properties["warehouse"],
                           CaptureSettings(copy=copy or CopyOptions()), previous)
    assert isinstance(captured, CaptureResult)
    spec = build_job_spec(group, catalog, ledger, captured.manifest_uri, run_key, "none")
    run_job(spark, spec)
    published = publish_cut(catalog, ledger, group, run_key, collect_member_manifests(spec))
    advance_slot(conn, group, captured.watermark)
    return CutReader(catalog, group, ledger).get(published.cut_id)


def bank_group(name: str) -> RefreshGroup:
    return RefreshGroup(
        name=name, source_conn_id="pg", catalog_conn_id="lake", namespace=name,
        members=(
            Mirror("public.accounts"),
            Mirror("public.transfers"),
            SqlMember("balances", "SELECT a.id, a.balance, coalesce(sum(m.amount), 0) AS net_transfers "
                      "FROM accounts a LEFT JOIN (SELECT dst AS id, amount FROM transfers UNION ALL "
                      "SELECT src, -amount FROM transfers) m ON m.id = a.id GROUP BY a.id, a.balance",
                      sources=("accounts", "transfers")),
        ),
    )


def test_parallel_ranges_under_the_bank_writer_copy_exactly_the_snapshot(
    pg_dsn: str, catalog: SqlCatalog, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(copy_module, "MIN_RANGE_BLOCKS", 64)  # split this small table as a large one would be
    group = bank_group("bootstrap_bank")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(BANK_SCHEMA)
        conn.execute("INSERT INTO transfers (src, dst, amount) SELECT 1, 2, 0 FROM generate_series(1, 120000)")
        writer = Writer(pg_dsn)
        writer.start()
        try:
            first = one_run(conn, group, catalog, spark, "r1", CopyOptions(parallelism=4))
            later = [one_run(conn, group, catalog, spark, f"r{n}") for n in (2, 3)]
        finally:
            journal = writer.stop() | set(range(1, 120001))
    for cut in (first, *later):
        ids = check_cut(cut, journal)
        assert ids == set(range(1, max(ids) + 1)), "one writer commits in id order: a cut holds a prefix"
    files = plan_snapshot_files(first.table("transfers"), first.member("transfers").snapshot_id)
    copies = [uri for uri in files.data if uri.rsplit("/", 1)[-1].startswith("copy-")]
    assert len(copies) == 8, files.data  # 4 connections x 2 ranges, adopted as the first cut's files
    accounts = plan_snapshot_files(first.table("accounts"), first.member("accounts").snapshot_id)
    assert accounts.deletes, "the writer changed copied accounts before W: their copied rows are deleted by position"
    _same_everywhere(first, spark, "accounts")


def _same_everywhere(cut: Cut, spark: SparkSession, member: str) -> pa.Table:
    """The member's rows at the cut (pyiceberg), checked equal to Spark's and DuckDB's reads."""
    ours = cut.to_arrow(member)
    through_spark = cut.to_spark(spark)[member].toArrow().cast(ours.schema)  # collect() fails on year 1
    with duckdb.connect() as con:
        cut.to_duckdb(con)
        through_duckdb = con.execute(f'SELECT * FROM "{member}"').to_arrow_table().cast(ours.schema)
    assert _normal(through_spark) == _normal(ours), "Spark"
    assert _normal(through_duckdb) == _normal(ours), "DuckDB"
    return ours


def _normal(table: pa.Table, *dropped: str) -> list[dict[str, Any]]:
    """Rows sorted by their first column, without ``dropped`` columns, NaN made comparable."""
    rows = table.drop_columns(list(dropped)).sort_by(table.column_names[0]).to_pylist()
    return [{k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()} for row in rows]


TYPED = {  # column: (type, a value, an edge value)
    "c_int2": ("int2", "-32768", "32767"),
    "c_int8": ("int8", "-9223372036854775808", "9223372036854775807"),
    "c_num": ("numeric(38,10)", "'1234567890123456789012345678.0123456789'", "'-0.0000000001'"),
    "c_numfree": ("numeric", "'NaN'", "'1e-30'"),
    "c_f4": ("float4", "'NaN'", "'-Infinity'"),
    "c_f8": ("float8", "'Infinity'", "0.30000000000000004"),
    "c_bool": ("bool", "true", "false"),
    "c_text": ("text", "E'tab\\there \"q\" \\\\ back\\nnew'", "''"),
    "c_char": ("char(4)", "'ab'", "'abcd'"),
    "c_bytea": ("bytea", "'\\x00ff10'::bytea", "''::bytea"),
    "c_date": ("date", "'infinity'", "'-infinity'"),
    "c_date_edges": ("date", "'0001-01-01'", "'9999-12-31'"),
    "c_time": ("time", "'23:59:59.999999'", "'00:00:00'"),
    "c_timetz": ("timetz", "'12:00:00+05:30'", "'00:00:00-01'"),
    "c_ts": ("timestamp", "'-infinity'", "'infinity'"),
    "c_ts_edges": ("timestamp", "'9999-12-31 23:59:59.999999'", "'0001-01-01 00:00:00'"),
    "c_tstz": ("timestamptz", "'2024-06-01 15:30:00.123456+05:30'", "'-infinity'"),
    "c_tstz_inf": ("timestamptz", "'infinity'", "'epoch'"),
    "c_interval": ("interval", "'1 year 2 mons 3 days 04:05:06.7'", "'-1 day'"),
    "c_uuid": ("uuid", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "'00000000-0000-0000-0000-000000000000'"),
    "c_json": ("json", "'{\"a\": [1, 2]}'", "'null'"),
    "c_jsonb": ("jsonb", "'{\"b\":1, \"a\":[1,2]}'", "'[]'"),
    "c_arr": ("int4[]", "'{1,NULL,3}'", "'{}'"),
    "c_tarr": ("text[]", "ARRAY['a b', 'c,d', NULL]", "ARRAY['\"']"),
    "c_mood": ("mood", "'happy'", "'sad'"),
    "c_dom": ("positive", "7", "2147483647"),
    "c_mood_dom": ("mood_domain", "'happy'", "'sad'"),
    "c_money_dom": ("amount", "12.345", "'-0.5'"),
    "c_inet": ("inet", "'10.0.0.1/8'", "'::1'"),
}


def _typed_rows(conn: Conn) -> None:
    conn.execute("CREATE TYPE mood AS ENUM ('sad', 'happy')")
    conn.execute("CREATE DOMAIN positive AS int4 CHECK (VALUE > 0)")
    conn.execute("CREATE DOMAIN mood_domain AS mood")
    conn.execute("CREATE DOMAIN amount AS numeric(12, 2)")
    columns = ", ".join(f"{name} {pg_type}" for name, (pg_type, _, _) in TYPED.items())
    conn.execute(f"CREATE TABLE typed (id int PRIMARY KEY, touched int NOT NULL DEFAULT 0, {columns})")
    conn.execute("SET TimeZone = 'Asia/Kolkata'")  # the writer's settings must not matter
    for row_id, index in ((1, 1), (2, 2)):
        values = ", ".join(value[index] for value in TYPED.values())
        conn.execute(f"INSERT INTO typed VALUES ({row_id}, 0, {values})")
    conn.execute("INSERT INTO typed (id) VALUES (3)")  # every column NULL


def test_every_type_lands_the_same_through_the_copy_and_through_the_wal(
    pg_dsn: str, catalog: SqlCatalog, spark: SparkSession
) -> None:
    group = RefreshGroup(name="typed", source_conn_id="pg", catalog_conn_id="lake", namespace="typed",
                         members=(Mirror("public.typed"),))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        _typed_rows(conn)
        copied = one_run(conn, group, catalog, spark, "r1")
        conn.execute("SET DateStyle = 'German, DMY'")
        conn.execute("ALTER TABLE typed REPLICA IDENTITY FULL")  # the old rows come too, in the deletes' rows
        conn.execute("UPDATE typed SET touched = 1")  # every row comes back through pgoutput
        decoded = one_run(conn, group, catalog, spark, "r2")
    first_files = plan_snapshot_files(copied.table("typed"), copied.member("typed").snapshot_id)
    second_files = plan_snapshot_files(decoded.table("typed"), decoded.member("typed").snapshot_id)
    assert all(uri.rsplit("/", 1)[-1].startswith("copy-") for uri in first_files.data)
    assert len(second_files.deletes) == 1 and not set(first_files.data) & {  # every copied row replaced
        uri for uri in second_files.data if not uri.rsplit("/", 1)[-1].startswith("copy-")}
    first, second = (_same_everywhere(cut, spark, "typed") for cut in (copied, decoded))
    assert first.schema == second.schema
    differences = [
        (before["id"], name, before[name], after[name])
        for before, after in zip(_normal(first), _normal(second), strict=True)
        for name in before if name != "touched" and before[name] != after[name]
    ]
    assert not differences, differences
    assert second.column("touched").to_pylist() == [1, 1, 1]
    # the old rows as the WAL gives them, kept in the position deletes, are the copied rows exactly
    assert delete_files_with_images(decoded, "typed") == Counter({True: 1})
    removed = decoded.changes_since(copied)["typed"].removed
    assert removed.schema == first.schema and _normal(removed) == _normal(first)
    row = _normal(first)[0]
    assert row["c_date"] == dt.date.max and row["c_ts"] == dt.datetime.min
    assert _normal(first)[1]["c_date"] == dt.date.min and _normal(first)[1]["c_tstz"] == dt.datetime.min.replace(
        tzinfo=dt.UTC)
    assert row["c_mood_dom"] == "happy" and row["c_money_dom"] == decimal.Decimal("12.35")
    assert row["c_num"] == decimal.Decimal("1234567890123456789012345678.0123456789")
    assert row["c_numfree"] == "NaN" and row["c_f4"] == "NaN" and row["c_f8"] == math.inf
    assert row["c_time"] == dt.time(23, 59, 59, 999999) and row["c_timetz"] == "12:00:00+05:30"
    assert row["c_tstz"] == dt.datetime(2024, 6, 1, 10, 0, 0, 123456, dt.UTC)
    assert row["c_text"] == 'tab\there "q" \\ back\nnew' and row["c_char"] == "ab  "
    assert row["c_interval"] == "1 year 2 mons 3 days 04:05:06.7" and row["c_mood"] == "happy"
    assert row["c_dom"] == 7 and row["c_arr"] == "{1,NULL,3}" and row["c_bytea"] == b"\x00\xff\x10"
    types = {field.name: field.type for field in first.schema}
    assert types["c_dom"] == pa.int32() and types["c_time"] == pa.time64("us")
    assert types["c_tstz"] == pa.timestamp("us", tz="UTC") and types["c_num"] == pa.decimal128(38, 10)
    assert types["c_money_dom"] == pa.decimal128(12, 2) and types["c_mood_dom"] == pa.string()


def test_an_unsupported_type_fails_before_any_copy_and_the_run_is_retried_after_a_cast(
    pg_dsn: str, catalog: SqlCatalog, spark: SparkSession
) -> None:
    group = RefreshGroup(name="odd", source_conn_id="pg", catalog_conn_id="lake", namespace="odd",
                         members=(Mirror("public.odd"),))
    ledger = Ledger(catalog.engine)
    warehouse = catalog.properties["warehouse"]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TYPE pair AS (a int, b text)")
        conn.execute("CREATE TABLE odd (id int PRIMARY KEY, p pair, r int4range)")
        conn.execute("INSERT INTO odd VALUES (1, ROW(1, 'x'), '[1,5)')")
        with pytest.raises(UnsupportedTypeError, match=r"table 'public.odd': column 'p' has type 'pair'"):
            capture_run(conn, group, ledger, "r1", warehouse)
        assert not list(Path(warehouse.removeprefix("file://")).rglob("*.parquet")), "nothing was copied"
        assert conn.execute("SELECT count(*) FROM pg_replication_slots").fetchone() == (0,)
        conn.execute("ALTER TABLE odd ALTER COLUMN p TYPE text USING p::text")
        with pytest.raises(UnsupportedTypeError, match="column 'r' has type 'int4range'"):
            capture_run(conn, group, ledger, "r1", warehouse)
        conn.execute("ALTER TABLE odd DROP COLUMN r")
        cut = one_run(conn, group, catalog, spark, "r1")
    assert cut.to_arrow("odd").to_pylist() == [{"id": 1, "p": "(1,x)"}]


def test_a_long_copy_reports_progress_and_its_totals(
    pg_dsn: str, catalog: SqlCatalog, caplog: pytest.LogCaptureFixture
) -> None:
    group = RefreshGroup(name="slow", source_conn_id="pg", catalog_conn_id="lake", namespace="slow",
                         members=(Mirror("public.big"),))
    reports: list[tuple[str, int, int]] = []

    def report(progress: TableProgress) -> None:
        reports.append((progress.member, progress.rows, progress.estimate))

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE big AS SELECT g AS id, md5(g::text) AS body FROM generate_series(1, 400000) g")
        conn.execute("ALTER TABLE big ADD PRIMARY KEY (id)")
        conn.execute("ANALYZE big")
        with caplog.at_level(logging.INFO, logger="airflow_provider_streambed.capture.copy"):
            copy = CopyOptions(parallelism=1, progress_interval=0.05, on_progress=report)
            captured = capture_run(conn, group, Ledger(catalog.engine), "r1", catalog.properties["warehouse"],
                                   CaptureSettings(copy=copy))
    assert isinstance(captured, CaptureResult) and captured.manifest.tables[0].copied_rows == 400_000
    lines = [record.getMessage() for record in caplog.records]
    assert any("of ~400,000 rows" in line and "rows/s" in line for line in lines), lines
    assert any("copied 400,000 rows" in line and "MiB of Parquet" in line for line in lines), lines
    assert reports[-1] == ("big", 400_000, 400_000) and len(reports) >= 2
    rows = [row for uri in captured.manifest.tables[0].copy_files
            for row in pq.read_table(uri.removeprefix("file://")).column("id").to_pylist()]
    assert sorted(rows) == list(range(1, 400_001))


def test_a_copy_without_changes_is_published_as_it_is_without_spark(
    pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path
) -> None:
    group = RefreshGroup(name="quietcopy", source_conn_id="pg", catalog_conn_id="lake", namespace="quietcopy",
                         members=(Mirror("public.quiet_copy"),))
    properties = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    events = EventLogs(tmp_path / "events")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE quiet_copy AS SELECT g AS id, g * 2 AS v FROM generate_series(1, 1000) g")
        conn.execute("ALTER TABLE quiet_copy ADD PRIMARY KEY (id)")
        first = refresh_once(group, source_dsn=pg_dsn, catalog_properties=properties, spark_conf=events.conf())
        assert events.applications() == 0, "the copy is the mirror: no Spark application"
        rows = CutReader(properties, group).get(first.cut.cut_id).to_arrow("quiet_copy").sort_by("id")
        assert rows.column("v").to_pylist() == list(range(2, 2001, 2))
        conn.execute("UPDATE quiet_copy SET v = -1 WHERE id = 1")
        second = refresh_once(group, source_dsn=pg_dsn, catalog_properties=properties, spark_conf=events.conf())
        assert events.applications() == 0, "a change merged in-process started Spark"
        rows = CutReader(properties, group).get(second.cut.cut_id).to_arrow("quiet_copy").sort_by("id")
        assert rows.column("v").to_pylist()[:2] == [-1, 4]
        conn.execute("UPDATE quiet_copy SET v = -2 WHERE id = 2")
        third = refresh_once(group, source_dsn=pg_dsn, catalog_properties=properties,
                             spark_conf={**events.conf(), IN_PROCESS_MERGE_CONF: "false"})
    assert events.applications() == 1  # the same change merged by Spark when asked
    rows = CutReader(properties, group).get(third.cut.cut_id).to_arrow("quiet_copy").sort_by("id")
    assert rows.column("v").to_pylist()[:3] == [-1, -2, 6]
