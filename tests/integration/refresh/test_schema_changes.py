"""Source schema changes between cuts, under writers on another member.

Real PostgreSQL, the real capture step, the job in-process on the ``local[2]`` session, and
``publish_cut`` into an SQLite catalog. A column added without a default, dropped, renamed or
widened evolves the mirror in place: its schema by field id, its files kept, merged in-process
and by Spark alike (earlier rows of an added column read null). A change no change record
carries (a column added with a default, a type Iceberg cannot promote, ``USING`` included, a
dropped column's name taken again, a new key) copies that member again in the next cut (a resync
of the member) while the other mirror keeps merging; the cut before keeps its schema. Under
``on_schema_change="fail"`` such a change is refused as final until the member is resynced.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import SchemaChangeError, is_final
from airflow_provider_streambed.member_declarations import Mirror, SqlMember
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.refresh.mirrors.duckdb_merge import IN_PROCESS_MERGE_CONF
from tests.integration.refresh.cuts import Cuts, cuts_of

pytestmark = pytest.mark.slow

GROUP = RefreshGroup(
    "evolving",
    "src",
    "cat",
    "ns",
    (Mirror("public.accounts"), Mirror("public.events"),
     SqlMember("rich", "SELECT * FROM accounts WHERE balance > 100", sources=("accounts",))),
)
SCHEMA = """
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL, note text);
INSERT INTO accounts SELECT g, g * 50, 'n' || g FROM generate_series(1, 4) g;
CREATE TABLE events (id int PRIMARY KEY, what text);
INSERT INTO events VALUES (1, 'a'), (2, 'b');
"""


def source_rows(cuts: Cuts) -> list[dict[str, Any]]:
    cursor = cuts.conn.execute("SELECT * FROM accounts ORDER BY id")
    names = [column.name for column in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


@pytest.fixture
def cuts(spark: SparkSession, tmp_path: Path, pg_dsn: str, sqlite_catalog_uri: str) -> Iterator[Cuts]:
    with cuts_of(spark, tmp_path, pg_dsn, sqlite_catalog_uri, GROUP, SCHEMA) as cuts:
        yield cuts


def published_rows(cuts: Cuts, cut_id: int, member: str) -> list[dict[str, Any]]:
    return sorted(CutReader(cuts.catalog, GROUP.name).get(cut_id).to_arrow(member).to_pylist(), key=lambda r: r["id"])


def test_added_columns_appear_in_the_next_cut_with_null_in_older_rows(cuts: Cuts) -> None:
    cuts.publish("run1")
    cuts.conn.execute("ALTER TABLE accounts ADD COLUMN tier smallint")
    cuts.conn.execute("INSERT INTO accounts VALUES (5, 900, 'n5', 2)")
    cuts.conn.execute("UPDATE accounts SET tier = 1, balance = balance + 1 WHERE id = 3")
    assert cuts.publish("run2").cut_id == 2
    rows = published_rows(cuts, 2, "accounts")
    assert rows == source_rows(cuts)
    assert [row["tier"] for row in rows] == [None, None, 1, None, 2]
    assert [row["id"] for row in published_rows(cuts, 2, "rich")] == [3, 4, 5]  # derived tables see it too

    cuts.conn.execute("ALTER TABLE accounts ADD COLUMN flag boolean")  # no row changes after it
    assert cuts.publish("run3").cut_id == 3
    assert published_rows(cuts, 3, "accounts") == source_rows(cuts)
    assert all(row["flag"] is None for row in published_rows(cuts, 3, "accounts"))

    cuts.conn.execute("ALTER TABLE accounts RENAME COLUMN tier TO level")  # no row changes after it either
    assert cuts.publish("run4").cut_id == 4
    assert published_rows(cuts, 4, "accounts") == source_rows(cuts)  # renamed in the cut whose W is past it


def data_files(cuts: Cuts, cut_id: int, member: str) -> set[str]:
    cut = CutReader(cuts.catalog, GROUP.name).get(cut_id)
    return {task.file.file_path for task in cut.table(member).scan(snapshot_id=cut.member(member).snapshot_id)
            .plan_files()}


@pytest.mark.parametrize("merge", ["in-process", "spark"])
@pytest.mark.parametrize(
    "change",
    [
        "ALTER TABLE accounts DROP COLUMN note",
        "ALTER TABLE accounts RENAME COLUMN note TO remark",
        "ALTER TABLE accounts ALTER COLUMN id TYPE bigint",
        "ALTER TABLE accounts ALTER COLUMN note TYPE varchar(40), ALTER COLUMN balance SET DEFAULT 7, "
        "ALTER COLUMN note SET NOT NULL",
    ],
    ids=["drop", "rename", "widen", "metadata"],
)
def test_a_compatible_change_evolves_the_mirror_in_place(
    cuts: Cuts, spark: SparkSession, change: str, merge: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="airflow_provider_streambed.refresh.mirrors.duckdb_merge")
    spark.conf.set(IN_PROCESS_MERGE_CONF, str(merge == "in-process").lower())
    try:
        cuts.publish("run1")
        cuts.conn.execute("UPDATE accounts SET balance = balance + 1 WHERE id = 2")  # before it: the old columns
        cuts.conn.execute(change)
        cuts.conn.execute("UPDATE accounts SET balance = 7 WHERE id = 1")  # after it: the new ones
        cuts.conn.execute("DELETE FROM accounts WHERE id = 3")
        cuts.conn.execute("INSERT INTO events VALUES (3, 'third')")
        second = cuts.publish("run2")
    finally:
        spark.conf.unset(IN_PROCESS_MERGE_CONF)
    assert published_rows(cuts, 2, "accounts") == source_rows(cuts)  # the columns and values at W
    merged_here = "group=evolving member=accounts: merged in-process" in caplog.text
    assert merged_here == (merge == "in-process"), caplog.text  # not a fallback to Spark
    accounts = CutReader(cuts.catalog, GROUP.name).get(2).table("accounts")
    summary = accounts.snapshot_by_id(second.members["accounts"].snapshot_id).summary
    assert summary is not None and summary.get("streambed.resync-reason") is None
    assert data_files(cuts, 1, "accounts") <= data_files(cuts, 2, "accounts")  # no file rewritten: merged on read
    first = CutReader(cuts.catalog, GROUP.name).get(1).table("accounts").schema()
    assert list(published_rows(cuts, 1, "accounts")[0]) == ["id", "balance", "note"]  # cut 1 keeps its schema
    now = accounts.schema()
    renamed = {"note": "remark"} if "RENAME" in change else {}
    for field in first.fields:  # a column kept, renamed or promoted keeps its field id
        if (name := renamed.get(field.name, field.name)) in now.column_names:
            assert now.find_field(name).field_id == field.field_id, name
    if "bigint" in change:
        assert CutReader(cuts.catalog, GROUP.name).get(2).schema("accounts").field("id").type == pa.int64()
    for cut_id, rows in ((1, published_rows(cuts, 1, "accounts")), (2, source_rows(cuts))):  # each with its schema
        cut = CutReader(cuts.catalog, GROUP.name).get(cut_id)
        through_duckdb = cut.to_duckdb(duckdb.connect()).execute("SELECT * FROM accounts ORDER BY id")
        assert through_duckdb.fetch_arrow_table().to_pylist() == rows, f"cut {cut_id} through DuckDB"
        through_spark = cut.to_spark(spark)["accounts"].orderBy("id").collect()
        assert [row.asDict() for row in through_spark] == rows, f"cut {cut_id} through Spark"

    cuts.conn.execute("UPDATE accounts SET balance = 8 WHERE id = 4")  # an ordinary run after it
    assert cuts.publish("run3").cut_id == 3
    assert published_rows(cuts, 3, "accounts") == source_rows(cuts)
    rich = [row for row in source_rows(cuts) if row["balance"] > 100]
    assert published_rows(cuts, 3, "rich") == rich and len(rich) == 1  # the derived member reads it too


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("ALTER TABLE accounts ADD COLUMN region text NOT NULL DEFAULT 'eu'",
         "columns ['region'] were added with a DEFAULT"),
        ("ALTER TABLE accounts ADD COLUMN stamp timestamptz DEFAULT clock_timestamp()",
         "columns ['stamp'] were added with a DEFAULT"),  # volatile: a table rewrite wrote it
        ("ALTER TABLE accounts ALTER COLUMN balance TYPE numeric(20, 2)",
         "columns changed type: balance long -> decimal128(20, 2)"),
        ("ALTER TABLE accounts ALTER COLUMN balance TYPE numeric(20, 2) USING balance * 2",
         "columns changed type: balance long -> decimal128(20, 2)"),
        ("ALTER TABLE accounts DROP COLUMN note, ADD COLUMN note text",
         "columns ['note'] take a name the mirror's older files hold for another column"),
        ("ALTER TABLE accounts DROP CONSTRAINT accounts_pkey, ADD PRIMARY KEY (id, balance)",
         "what names one row changed from key:id to key:id,balance"),
        ("ALTER TABLE accounts REPLICA IDENTITY FULL, DROP CONSTRAINT accounts_pkey",
         "what names one row changed from key:id to keyless"),
    ],
    ids=["add-default", "add-volatile-default", "retype", "using", "name-taken-again", "new-key", "keyless"],
)
def test_a_change_no_change_record_carries_resyncs_the_member_in_the_next_cut(
    cuts: Cuts, change: str, reason: str
) -> None:
    cuts.publish("run1")
    cuts.conn.execute(change)
    cuts.conn.execute("UPDATE accounts SET note = 'changed' WHERE id = 1" if "note" not in change
                      else "DELETE FROM accounts WHERE id = 1")
    cuts.conn.execute("INSERT INTO events VALUES (3, 'third')")
    second = cuts.publish("run2")
    assert second.cut_id == 2
    assert published_rows(cuts, 2, "accounts") == source_rows(cuts)  # values, the default and the new types too
    assert [row["what"] for row in published_rows(cuts, 2, "events")] == ["a", "b", "third"]
    accounts = CutReader(cuts.catalog, GROUP.name).get(2).table("accounts")
    summary = accounts.snapshot_by_id(second.members["accounts"].snapshot_id).summary
    assert summary["streambed.resync-reason"].startswith(reason)
    events = CutReader(cuts.catalog, GROUP.name).get(2).table("events")
    assert events.snapshot_by_id(second.members["events"].snapshot_id).summary.get("streambed.resync-reason") is None
    assert list(published_rows(cuts, 1, "accounts")[0]) == ["id", "balance", "note"]  # cut 1 keeps its schema
    assert CutReader(cuts.catalog, GROUP.name).get(1).schema("accounts").field("balance").type == pa.int64()
    first = CutReader(cuts.catalog, GROUP.name).get(1).table("accounts").schema()
    kept = {field.name for field in accounts.schema().fields if field.name in first.column_names
            and accounts.schema().find_field(field.name).field_id == first.find_field(field.name).field_id}
    replaced = {"balance"} if "TYPE" in change else set()
    assert kept == {"id", "balance", "note"} - replaced  # an unpromotable type gets a new field id

    cuts.conn.execute("DELETE FROM accounts WHERE id = 4")  # an ordinary run merges on the copy
    cuts.conn.execute("INSERT INTO events VALUES (4, 'fourth')")
    assert cuts.publish("run3").cut_id == 3
    assert published_rows(cuts, 3, "accounts") == source_rows(cuts)
    assert len(published_rows(cuts, 3, "events")) == 4


@pytest.fixture
def strict(spark: SparkSession, tmp_path: Path, pg_dsn: str, sqlite_catalog_uri: str) -> Iterator[Cuts]:
    """The group under ``on_schema_change="fail"``."""
    fail = dataclasses.replace(GROUP, on_schema_change="fail")
    with cuts_of(spark, tmp_path, pg_dsn, sqlite_catalog_uri, fail, SCHEMA) as cuts:
        yield cuts


def test_under_the_fail_policy_a_change_is_refused_as_final_until_the_member_is_resynced(strict: Cuts) -> None:
    strict.publish("run1")
    strict.conn.execute("ALTER TABLE accounts DROP COLUMN note")  # in place: no refusal
    strict.conn.execute("UPDATE accounts SET balance = balance + 1 WHERE id = 1")
    assert strict.publish("run2").cut_id == 2
    strict.conn.execute("ALTER TABLE accounts ALTER COLUMN balance TYPE numeric(20, 2)")
    strict.conn.execute("UPDATE accounts SET balance = 5.5 WHERE id = 1")
    with pytest.raises(SchemaChangeError, match=r"group 'evolving', member 'accounts': source table public.accounts: "
                                                r"columns changed type: balance long -> decimal128\(20, 2\).*"
                                                r"on_schema_change is "
                                                r"'fail'; resync the member: .*\(or run `streambed resync --group "
                                                r"evolving --member accounts`\)") as refused:
        strict.stage("run3")  # refused before W is pinned: nothing is copied, computed or published
    assert is_final(refused.value)
    assert strict.ledger.get_run(GROUP.name, "run3") is None
    assert strict.publish("run4", resync_members=["accounts"]).cut_id == 3
    assert published_rows(strict, 3, "accounts") == source_rows(strict)


def test_changes_on_both_sides_of_a_ddl_in_one_run_publish_right(cuts: Cuts) -> None:
    cuts.publish("run1")
    cuts.conn.execute("UPDATE accounts SET balance = 1 WHERE id = 1")  # before the DDL: the old columns
    cuts.conn.execute("ALTER TABLE accounts ADD COLUMN tier smallint")
    cuts.conn.execute("UPDATE accounts SET tier = 3, balance = 2 WHERE id = 2")  # after it: the new ones
    cuts.conn.execute("INSERT INTO events VALUES (3, 'third')")
    assert cuts.publish("run2").cut_id == 2
    assert published_rows(cuts, 2, "accounts") == source_rows(cuts)

    cuts.conn.execute("UPDATE accounts SET balance = 3 WHERE id = 3")
    cuts.conn.execute("ALTER TABLE accounts DROP COLUMN note")  # in place
    cuts.conn.execute("UPDATE accounts SET balance = 4, tier = 1 WHERE id = 4")
    cuts.conn.execute("ALTER TABLE accounts RENAME COLUMN tier TO level")
    cuts.conn.execute("ALTER TABLE accounts ALTER COLUMN level TYPE bigint")
    cuts.conn.execute("UPDATE accounts SET level = 5 WHERE id = 2")
    cuts.conn.execute("DELETE FROM accounts WHERE id = 1")
    assert cuts.publish("run3").cut_id == 3
    assert published_rows(cuts, 3, "accounts") == source_rows(cuts)
    assert [row["what"] for row in published_rows(cuts, 3, "events")] == ["a", "b", "third"]


def test_every_change_in_sequence_under_a_writer_keeps_the_group_publishing(cuts: Cuts) -> None:
    changes = [
        "ALTER TABLE accounts ADD COLUMN tier smallint",
        "ALTER TABLE accounts ADD COLUMN region text NOT NULL DEFAULT 'eu'",
        "ALTER TABLE accounts RENAME COLUMN note TO remark",
        "ALTER TABLE accounts ALTER COLUMN tier TYPE bigint",
        "ALTER TABLE accounts ALTER COLUMN balance TYPE numeric(20, 2)",
        "ALTER TABLE accounts ALTER COLUMN remark SET NOT NULL",
        "ALTER TABLE accounts DROP COLUMN region",
        "ALTER TABLE accounts REPLICA IDENTITY FULL, DROP CONSTRAINT accounts_pkey",
    ]
    cuts.publish("run0")
    for step, change in enumerate(changes, start=1):
        cuts.conn.execute(f"UPDATE accounts SET balance = balance + {step} WHERE id = {1 + step % 4}")  # before it
        cuts.conn.execute(change)
        cuts.conn.execute(f"INSERT INTO accounts (id, balance, {'remark' if step >= 3 else 'note'}) "
                          f"VALUES ({10 + step}, {step}, 'r{step}')")
        cuts.conn.execute(f"INSERT INTO events VALUES ({10 + step}, 'e{step}')")
        cut = cuts.publish(f"run{step}")  # the change's run
        assert published_rows(cuts, cut.cut_id, "accounts") == source_rows(cuts), change
        cuts.conn.execute(f"DELETE FROM accounts WHERE id = {10 + step}")
        cut = cuts.publish(f"run{step}-after")  # an ordinary run after it
        assert published_rows(cuts, cut.cut_id, "accounts") == source_rows(cuts), change
        assert len(published_rows(cuts, cut.cut_id, "events")) == 2 + step
