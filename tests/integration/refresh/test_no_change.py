"""A run costs what changed: unchanged members are carried into the new cut, and no change starts no Spark.

``refresh_once`` on the bank example with real PostgreSQL, spark-submit and a SQLite catalog;
Spark's event logs count the applications started.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_provider_streambed import RefreshGroup, SqlMember
from airflow_provider_streambed.capture.slot import check_slot
from airflow_provider_streambed.examples.bank import load_bank
from airflow_provider_streambed.local import RunResult, refresh_once
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.testing.spark import EventLogs
from tests.integration.airflow.bank import check_cut

pytestmark = pytest.mark.slow
DAGS = Path(__file__).resolve().parents[3] / "dags"


def snapshots(result: RunResult) -> dict[str, int]:
    return {name: member.snapshot_id for name, member in result.cut.members.items()}


def test_unchanged_members_are_carried_and_no_change_starts_no_spark(
    pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path
) -> None:
    sys.path.insert(0, str(DAGS))
    from example_bank import bank

    load_bank(pg_dsn)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE elsewhere (id int)")  # a table outside the group: moves W, changes nothing
    event_logs = EventLogs(tmp_path / "spark-events")
    applications = event_logs.applications
    properties = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    options: dict[str, Any] = {"source_dsn": pg_dsn, "catalog_properties": properties, "spark_conf": event_logs.conf()}

    def write(statement: str) -> None:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(statement)

    first = refresh_once(bank, **options)
    assert applications() == 1

    write("INSERT INTO elsewhere VALUES (1)")
    second = refresh_once(bank, **options)
    assert second.outcome == "published" and second.cut.cut_id == 2 and second.cut.watermark > first.cut.watermark
    assert applications() == 1, "a run with no change started Spark"
    assert snapshots(second) == snapshots(first)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert check_slot(conn, bank).confirmed_flush == second.cut.watermark
    reader = CutReader(properties, bank)
    cut2 = reader.get(2)
    assert cut2.verify() == []
    for name in ("accounts", "transfers", "balances"):
        assert cut2.to_arrow(name).sort_by("id").equals(reader.get(1).to_arrow(name).sort_by("id"))
        tags = cut2.table(name).metadata.refs
        assert tags["bank-cut-2"].snapshot_id == tags["bank-cut-1"].snapshot_id == first.cut.members[name].snapshot_id

    write("INSERT INTO transfers (src, dst, amount) VALUES (1, 2, 0)")  # transfers changes, accounts does not
    third = refresh_once(bank, **options)
    assert applications() == 2
    assert third.cut.members["accounts"].snapshot_id == first.cut.members["accounts"].snapshot_id
    assert third.cut.members["transfers"].snapshot_id != first.cut.members["transfers"].snapshot_id
    assert third.cut.members["balances"].snapshot_id != first.cut.members["balances"].snapshot_id
    latest = reader.latest()
    assert latest.verify() == [] and latest.to_arrow("transfers").num_rows == 1
    transfer = latest.to_arrow("transfers").column("id")[0].as_py()
    assert check_cut(latest, {transfer}) == {transfer}

    edited = RefreshGroup(**{**bank.to_dict(), "members": [
        *(m for m in bank.members if m.name != "balances"),
        SqlMember("balances", "SELECT id, balance, 0 AS net_transfers FROM accounts", sources=["accounts"]),
    ]})
    write("INSERT INTO elsewhere VALUES (2)")
    fourth = refresh_once(edited, **options)
    assert applications() == 3, "an edited member was not recomputed"
    assert {name for name, sid in snapshots(fourth).items() if sid != snapshots(third)[name]} == {"balances"}
    assert CutReader(properties, edited).latest().verify() == []

    # a member removed from the declaration is left alone; the others carry on
    shrunk = RefreshGroup(**{**edited.to_dict(), "members": [m for m in edited.members if m.name != "transfers"]})
    write("INSERT INTO elsewhere VALUES (3)")
    fifth = refresh_once(shrunk, **options)
    assert sorted(fifth.cut.members) == ["accounts", "balances"] and applications() == 3
    assert CutReader(properties, shrunk).latest().verify() == []

    # mirrors alone with changes merge in-process: no Spark application either
    mirrors = RefreshGroup(**{**shrunk.to_dict(), "members": [m for m in shrunk.members if m.name == "accounts"]})
    write("UPDATE accounts SET balance = balance + 1 WHERE id = 1")
    sixth = refresh_once(mirrors, **options)
    assert applications() == 3, "a mirror merged in-process started Spark"
    assert sixth.cut.members["accounts"].snapshot_id != fifth.cut.members["accounts"].snapshot_id
    accounts = CutReader(properties, mirrors).latest().to_arrow("accounts")
    with psycopg.connect(pg_dsn) as conn:
        assert accounts.sort_by("id").column("balance").to_pylist() == [
            row[0] for row in conn.execute("SELECT balance FROM accounts ORDER BY id")]
