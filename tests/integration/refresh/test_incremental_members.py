"""Incremental PythonMembers and SQL members on real PostgreSQL, real Spark (local[2]) and a real catalog.

A differential test: a random workload over several cuts (inserts, updates, deletes, key changes,
NULL group keys and values, duplicate rows in a keyless source, a source carried while the other
changed, an added column: a whole recompute; a full refresh asked for by Spark configuration) and
after every cut each incremental member equals, exactly, its twin computed whole by the same
function or query from the same cut (a SQL twin wraps the query in a derived table, which is not
incremental).
"""

from __future__ import annotations

import functools
import logging
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from airflow_provider_streambed import Mirror, PythonMember, RefreshGroup, SqlMember
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.refresh.derived import delta_rules, incremental_sql, member_shape
from airflow_provider_streambed.refresh.derived.sources import INCREMENTAL_CONF
from airflow_provider_streambed.refresh.spark.connect_variables import connect_mode
from airflow_provider_streambed.refresh.spark.session import REQUIRED_CONF
from tests.integration.refresh.cuts import Cuts, cuts_of
from tests.integration.refresh.deletes import delete_files_with_images
from tests.integration.refresh.workloads import JOIN_SCHEMA, SCHEMA, join_workload, workload

pytestmark = pytest.mark.slow

OWNERS = "tests.integration.refresh.python_members:owner_totals"
KINDS = "tests.integration.refresh.python_members:kind_totals"
OWNER_STATS = ("SELECT owner, COUNT(*) AS n, COUNT(balance) AS counted, SUM(balance) AS total, AVG(balance) AS mean, "
               "MIN(balance) AS low, MAX(balance) AS high FROM accounts WHERE id % 10 <> 3 GROUP BY owner")
KIND_STATS = ("SELECT kind, COUNT(*) AS n, SUM(n) AS total, AVG(n) AS mean, MIN(n) AS low, MAX(n) AS high "
              "FROM events GROUP BY kind")
#: Updated from the changes alone (no AVG, an exact SUM beside the COUNT of its argument)
OWNER_SUMS = ("SELECT owner, COUNT(*) AS n, COUNT(balance) AS counted, SUM(balance) AS total, MIN(balance) AS low, "
              "MAX(balance) AS high FROM accounts WHERE id % 10 <> 3 GROUP BY owner")
KIND_SUMS = ("SELECT kind, COUNT(*) AS n, COUNT(n) AS counted, SUM(n) AS total, AVG(n) AS mean FROM events "
             "GROUP BY kind")
#: Updated in the worker's process (sql_delta_local): plain columns of one source, no WHERE
KIND_COUNTS = "SELECT kind, COUNT(*) AS n, COUNT(n) AS counted, SUM(n) AS total FROM events GROUP BY kind"
GROUP = RefreshGroup("incr", "src", "cat", "incr", (
    Mirror("public.accounts"),
    Mirror("public.events", compact_deleted_ratio=0.2),
    # owners reads events too: a run that changes accounts only gives it events' empty changes
    PythonMember("owners", OWNERS, sources=["accounts", "events"], incremental=True),
    PythonMember("owners_whole", OWNERS, sources=["accounts", "events"]),
    PythonMember("kinds", KINDS, sources=["events"], incremental=True),
    PythonMember("kinds_whole", KINDS, sources=["events"]),
    SqlMember("owner_stats", OWNER_STATS, sources=["accounts"], incremental=True),
    SqlMember("owner_stats_whole", f"SELECT * FROM ({OWNER_STATS}) t", sources=["accounts"], incremental=True),
    SqlMember("kind_stats", KIND_STATS, sources=["events"], incremental=True),
    SqlMember("kind_stats_whole", f"SELECT * FROM ({KIND_STATS}) t", sources=["events"]),
    SqlMember("owner_sums", OWNER_SUMS, sources=["accounts"], incremental=True),
    SqlMember("owner_sums_whole", f"SELECT * FROM ({OWNER_SUMS}) t", sources=["accounts"]),
    SqlMember("kind_sums", KIND_SUMS, sources=["events"], incremental=True),
    SqlMember("kind_sums_whole", f"SELECT * FROM ({KIND_SUMS}) t", sources=["events"]),
    SqlMember("kind_counts", KIND_COUNTS, sources=["events"], incremental=True),
    SqlMember("kind_counts_whole", f"SELECT * FROM ({KIND_COUNTS}) t", sources=["events"]),
))
SUMMED = "its aggregates updated from the changes of"
UPDATED = ("from its previous output", "the groups of", SUMMED)
INCREMENTAL = ("owners", "kinds", "owner_stats", "kind_stats", "owner_sums", "kind_sums", "kind_counts")


def _bag(table: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(row.values()) for row in table.to_pylist())


def _check_cuts(cuts: Cuts, catalog_uri: str, changes: Callable[[int], None],
                names: tuple[str, ...]) -> tuple[CutReader, dict[str, list[str]]]:
    """Six cuts, ``changes(run)`` made before each but the first; after each, every member of
    ``names`` equals, exactly, its twin computed whole (``<name>_whole``). Returns the cuts'
    reader and each member's staged reasons, cut by cut (where it was computed)."""
    reader = CutReader({"uri": catalog_uri, "warehouse": cuts.warehouse}, cuts.group)
    reasons: dict[str, list[str]] = defaultdict(list)
    for run in range(6):
        if run:
            changes(run)
        cut = reader.get(cuts.publish(f"r{run}").cut_id)
        for name in names:
            if name in cuts.staged:
                reasons[name].append(cuts.staged[name].reason)
            whole = cut.to_arrow(f"{name}_whole")
            assert whole.num_rows > 0
            assert cut.to_arrow(name).schema == whole.schema
            assert _bag(cut.to_arrow(name)) == _bag(whole), f"cut {cut.cut_id}, member {name}: {reasons[name]}"
    return reader, reasons


@pytest.fixture
def always_maintained(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQL members are maintained however many groups a run touches."""
    monkeypatch.setattr(incremental_sql, "MAX_TOUCHED_SHARE", 10.0)


@pytest.mark.usefixtures("always_maintained")
def test_incremental_python_members_equal_a_whole_recompute_on_every_cut(
    pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the means of kinds of more than 7 values are recomputed, the others updated from the changes
    monkeypatch.setitem(delta_rules.AVERAGED_EXACTLY_UP_TO, "integer", 7)
    rng = random.Random(3401)

    def changes(run: int) -> None:
        if run == 3:  # from run 3 the members take the rows accounts lost from its position deletes' rows
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                conn.execute("ALTER TABLE accounts REPLICA IDENTITY FULL")
        workload(pg_dsn, rng, run)

    with cuts_of(spark, tmp_path, pg_dsn, sqlite_catalog_uri, GROUP, SCHEMA) as cuts:
        # run 4 adds a column to accounts (workloads.workload)
        reader, reasons = _check_cuts(cuts, sqlite_catalog_uri, changes, INCREMENTAL)
        assert delete_files_with_images(reader.latest(), "accounts") == Counter({True: 1})
        spark.conf.set(INCREMENTAL_CONF, "false")  # a full refresh
        try:
            workload(pg_dsn, rng, 7)
            cut = reader.get(cuts.publish("full").cut_id)
        finally:
            spark.conf.unset(INCREMENTAL_CONF)
        for name in ("owners", "owner_stats"):
            assert cuts.staged[name].reason == f"whole: not incremental: {INCREMENTAL_CONF} is false (a full refresh)"
            assert _bag(cut.to_arrow(name)) == _bag(cut.to_arrow(f"{name}_whole"))
    for name in INCREMENTAL:
        assert reasons[name][0] == ("whole: not incremental: no previous output of its definition "
                                    "(its first cut, or its definition changed)")
        assert sum(reason.startswith(UPDATED) for reason in reasons[name]) >= 2, reasons[name]
    for name in ("owners", "owner_stats", "owner_sums"):
        assert "whole: not incremental: its source 'accounts' changed its columns" in reasons[name], reasons[name]
    for name in ("owner_sums", "owner_stats"):
        assert f"{SUMMED} accounts, the groups that lost rows (MIN, MAX) recomputed" in reasons[name], reasons[name]
    assert f"{SUMMED} events, the groups of more than 7 rows (AVG (mean)) recomputed" in reasons["kind_sums"]
    in_process = f"{SUMMED} events in this process"
    assert sum(reason == in_process for reason in reasons["kind_counts"]) >= 2, reasons["kind_counts"]
    assert not any(reason.endswith("in this process") for name in INCREMENTAL if name != "kind_counts"
                   for reason in reasons[name])  # a WHERE, no COUNT beside a SUM, or means of more than 7 rows
    assert all(reason.endswith("(not updated from the changes alone: no COUNT of the argument of SUM (total) tells "
                               "when it is NULL)") for reason in reasons["kind_stats"]
               if reason.startswith("the groups of")), reasons["kind_stats"]
    assert cuts.staged["owner_stats_whole"].reason == "whole: not incremental: its result is not a GROUP BY"


CONNECTED = RefreshGroup("connected", "src", "cat", "connected", (
    Mirror("public.accounts"),
    Mirror("public.events", compact_deleted_ratio=0.2),
    SqlMember("owner_sums", OWNER_SUMS, sources=["accounts"], incremental=True),
    SqlMember("owner_sums_whole", f"SELECT * FROM ({OWNER_SUMS}) t", sources=["accounts"]),
    SqlMember("kind_stats", KIND_STATS, sources=["events"], incremental=True),
    SqlMember("kind_stats_whole", f"SELECT * FROM ({KIND_STATS}) t", sources=["events"], incremental=True),
))


@pytest.fixture
def connect_spark(spark_connect_url: str) -> Iterator[SparkSession]:
    """A session of the test session's Spark Connect server, with the job's settings."""
    with connect_mode():
        session = SparkSession.builder.remote(spark_connect_url).create()
        for key, value in REQUIRED_CONF.items():
            session.conf.set(key, value)
        try:
            yield session
        finally:
            session.stop()


@pytest.mark.usefixtures("always_maintained")
def test_incremental_sql_members_on_spark_connect_read_their_plan_once_and_equal_a_whole_recompute(
    pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path, connect_spark: SparkSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=member_shape.__name__)
    changes = functools.partial(workload, pg_dsn, random.Random(3405))  # run 4 adds a column to accounts
    with cuts_of(connect_spark, tmp_path, pg_dsn, sqlite_catalog_uri, CONNECTED, SCHEMA) as cuts:
        _, reasons = _check_cuts(cuts, sqlite_catalog_uri, changes, ("owner_sums", "kind_stats"))
    plans = Counter(record.getMessage().split("member=")[1].split(":")[0] for record in caplog.records
                    if "reading its query's plan with a local Spark" in record.getMessage())
    # read on the first cut, and again for owner_sums once accounts changed its columns; else recorded
    assert plans == {"owner_sums": 2, "kind_stats": 1, "kind_stats_whole": 1}
    assert f"{SUMMED} accounts, the groups that lost rows (MIN, MAX) recomputed" in reasons["owner_sums"]
    assert sum(reason.startswith("the groups of events its changes touched recomputed") for reason in
               reasons["kind_stats"]) >= 3, reasons["kind_stats"]
    assert cuts.staged["kind_stats_whole"].reason == "whole: not incremental: its result is not a GROUP BY"


REGIONS = ("SELECT p.branch, b.region, COUNT(*) AS n, COUNT(p.amount) AS counted, SUM(p.amount) AS total, "
           "AVG(p.amount) AS mean, MIN(p.amount) AS low, MAX(p.amount) AS high "
           "FROM payments p JOIN branches b ON p.branch = b.id WHERE b.active GROUP BY p.branch, b.region")
#: Grouped by a column of the keyed side only: its recompute would read every payment.
REGION_TOTALS = "SELECT b.region, COUNT(*) AS n FROM payments p JOIN branches b ON p.branch = b.id GROUP BY b.region"
REGION_KINDS = ("SELECT kind, b.region AS region, COUNT(*) AS n, SUM(amount) AS total "
                "FROM branches b JOIN (SELECT * FROM payments WHERE amount > 3) p ON b.id = p.branch "
                "GROUP BY p.kind, b.region")
JOINS = RefreshGroup("joins", "src", "cat", "joins", (
    Mirror("public.branches", compact_deleted_ratio=100.0),
    Mirror("public.payments", compact_deleted_ratio=100.0),
    SqlMember("regions", REGIONS, sources=["payments", "branches"], incremental=True),
    SqlMember("regions_whole", f"SELECT * FROM ({REGIONS}) t", sources=["payments", "branches"]),
    SqlMember("region_kinds", REGION_KINDS, sources=["branches", "payments"], incremental=True),
    SqlMember("region_kinds_whole", f"SELECT * FROM ({REGION_KINDS}) t", sources=["branches", "payments"]),
    SqlMember("kind_regions", "SELECT p.kind, COUNT(*) AS n FROM payments p JOIN branches b ON p.kind = b.region "
              "GROUP BY p.kind", sources=["payments", "branches"], incremental=True),
    SqlMember("region_totals", REGION_TOTALS, sources=["payments", "branches"], incremental=True),
))


@pytest.mark.usefixtures("always_maintained")
def test_incremental_sql_members_over_a_key_join_equal_a_whole_recompute_on_every_cut(
    pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path, spark: SparkSession
) -> None:
    changes = functools.partial(join_workload, pg_dsn, random.Random(3403))  # runs 1 and 4: branches is carried
    with cuts_of(spark, tmp_path, pg_dsn, sqlite_catalog_uri, JOINS, JOIN_SCHEMA) as cuts:
        _, reasons = _check_cuts(cuts, sqlite_catalog_uri, changes, ("regions", "region_kinds"))
    touched = ("the groups of {} its changes touched recomputed, the others kept "
               "(not updated from the changes alone: {})")
    both = "more than one of its joined sources changed ({})"
    # runs 1 and 4 change payments only: regions is updated from its changes, joined to branches as they are
    assert [reason.startswith(f"{SUMMED} payments") for reason in reasons["regions"]] == [
        False, True, False, False, True, False], reasons["regions"]
    assert [reason for reason in reasons["regions"][1:] if not reason.startswith(SUMMED)] == [
        touched.format("payments JOIN branches", both.format("payments, branches"))] * 3
    unsummed = "no COUNT of the argument of SUM (total) tells when it is NULL"
    assert reasons["region_kinds"][1:] == [touched.format("branches JOIN payments", why) for why in (
        unsummed, both.format("branches, payments"), both.format("branches, payments"), unsummed,
        both.format("branches, payments"))]
    assert cuts.staged["kind_regions"].reason == "whole: not incremental: a join not on the key of branches or payments"
    assert cuts.staged["region_totals"].reason == ("whole: not incremental: no GROUP BY column comes from payments "
                                                   "and it is not joined on its key, so every run would read it whole")


def test_a_sql_member_whose_changes_touch_most_groups_is_computed_whole(spark: SparkSession) -> None:
    previous = spark.createDataFrame([(key,) for key in range(10)], "k int")
    assert incremental_sql.mostly_touched(previous, spark.createDataFrame([(1,), (2,)], "k int")) == ""
    assert incremental_sql.mostly_touched(previous, spark.createDataFrame([(key,) for key in range(6)], "k int")) == (
        "its changes touched 6 of its 10 groups (more than 50%)")
