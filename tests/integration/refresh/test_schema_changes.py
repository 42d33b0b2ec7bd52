"""Source schema changes between cuts: ``ADD COLUMN`` follows into the next cut, anything else fails the run.

Real PostgreSQL, the real capture step, the job in-process on the ``local[2]`` session, and
``publish_cut`` into an SQLite catalog: the published table's schema gains the column, earlier
rows read null; a dropped column, a column added with a default (which older rows read from the
catalog) or a changed type fails the refresh naming table and column, and nothing is staged or
published for that run; a resync of the group then publishes the source's rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import RefreshError, SchemaChangeError, is_final
from airflow_provider_streambed.member_declarations import Mirror, SqlMember
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.staging import staging_root
from airflow_provider_streambed.staging.members import read_member_manifest
from tests.integration.refresh.cuts import Cuts

pytestmark = pytest.mark.slow

GROUP = RefreshGroup(
    "evolving",
    "src",
    "cat",
    "ns",
    (Mirror("public.accounts"), SqlMember("rich", "SELECT * FROM accounts WHERE balance > 100", sources=("accounts",))),
)
SCHEMA = """
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL, note text);
INSERT INTO accounts SELECT g, g * 50, 'n' || g FROM generate_series(1, 4) g;
"""


def source_rows(cuts: Cuts) -> list[dict[str, Any]]:
    cursor = cuts.conn.execute("SELECT * FROM accounts ORDER BY id")
    names = [column.name for column in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


@pytest.fixture
def cuts(spark: SparkSession, tmp_path: Path, pg_dsn: str, sqlite_catalog_uri: str) -> Iterator[Cuts]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
    cuts = Cuts(spark, tmp_path, pg_dsn, sqlite_catalog_uri, GROUP)
    yield cuts
    cuts.conn.close()


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


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("ALTER TABLE accounts DROP COLUMN note", r"columns \['note'\] were dropped or renamed since the last cut"),
        ("ALTER TABLE accounts RENAME COLUMN note TO remark",
         r"columns \['note'\] were dropped or renamed since the last cut"),
        ("ALTER TABLE accounts ADD COLUMN region text NOT NULL DEFAULT 'eu'",
         r"columns \['region'\] were added with a DEFAULT, which the rows from before the ALTER TABLE read"),
    ],
)
def test_changes_the_mirror_cannot_follow_are_refused_as_final_until_a_resync(
    cuts: Cuts, change: str, message: str
) -> None:
    cuts.publish("run1")
    cuts.conn.execute(change)
    cuts.conn.execute("UPDATE accounts SET balance = balance + 1 WHERE id = 1")
    where = r"group 'evolving', member 'accounts': source table public.accounts: "
    with pytest.raises(SchemaChangeError, match=where + message + r".*resync the group") as refused:
        cuts.stage("run2")  # refused while the run is planned: nothing is computed, no Spark job starts
    assert is_final(refused.value)
    root = staging_root(cuts.warehouse, GROUP.name, "run2")
    assert read_member_manifest(root, "accounts") is None and read_member_manifest(root, "rich") is None
    assert cuts.publish("run3", resync=True).cut_id == 2
    assert published_rows(cuts, 2, "accounts") == source_rows(cuts)
    assert list(published_rows(cuts, 1, "accounts")[0]) == ["id", "balance", "note"]  # cut 1 keeps its schema


def test_a_changed_type_fails_the_run_naming_table_and_column(cuts: Cuts) -> None:
    cuts.publish("run1")
    cuts.conn.execute("ALTER TABLE accounts ALTER COLUMN balance TYPE numeric(20, 2)")
    cuts.conn.execute("UPDATE accounts SET balance = balance + 1 WHERE id = 1")
    with pytest.raises(RefreshError, match=r"table 'public.accounts'.*column 'balance' changed type from bigint to "
                                           r"decimal\(20,2\)") as failure:
        cuts.stage("run2")
    assert "member 'rich': not computed" in str(failure.value)
    assert is_final(failure.value)  # no retry computes it: the run releases its group
    root = staging_root(cuts.warehouse, GROUP.name, "run2")
    assert read_member_manifest(root, "accounts") is None and read_member_manifest(root, "rich") is None
    last = cuts.ledger.last_cut(GROUP.name)
    assert last is not None and last.cut_id == 1
