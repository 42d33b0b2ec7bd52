"""``application_per_member``: one Spark application per member, sources first, under ``dag.test()``."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import psycopg
import pytest
from airflow.sdk import DAG

from airflow_provider_streambed import Mirror, RefreshGroup, SqlMember, StreambedRefreshGroup
from airflow_provider_streambed.examples.bank import ACCOUNTS, INITIAL_BALANCE, load_bank, move_money
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.refresh.mirrors.duckdb_merge import IN_PROCESS_MERGE_CONF
from airflow_provider_streambed.testing.spark import EventLogs
from tests.integration.airflow.conftest import spark_kwargs, sync_dags

pytestmark = pytest.mark.slow
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_one_application_per_member(bank_connections: dict[str, str], pg_dsn: str, tmp_path: Path) -> None:
    load_bank(pg_dsn)
    with psycopg.connect(pg_dsn) as conn:
        transfers = [move_money(conn, random.Random(9)) for _ in range(5)]
    group = RefreshGroup(
        name="bank_apps", source_conn_id="bank_pg", catalog_conn_id="lakehouse", namespace="apps",
        members=[SqlMember("money", "SELECT sum(balance) AS total FROM accounts", sources=["accounts"]),
                 Mirror("accounts"), Mirror("transfers")],
    )
    events = EventLogs(tmp_path / "spark-events")
    options = spark_kwargs()
    options["spark_conf"] |= events.conf()
    options["spark_options"]["application_per_member"] = True
    with DAG("apps_e2e", schedule=None, start_date=START) as dag:
        StreambedRefreshGroup(group, **options)
    sync_dags(dag)

    assert dag.test(logical_date=START).state == "success"
    assert events.applications() == 1  # the mirrors are their bootstrap copies: only the SQL member runs
    with psycopg.connect(pg_dsn) as conn:
        transfers += [move_money(conn, random.Random(10)) for _ in range(5)]
    assert dag.test(logical_date=START + dt.timedelta(hours=1)).state == "success"
    assert events.applications() == 2  # the mirrors merged in the refresh task: only the SQL member runs

    options["spark_conf"] |= {IN_PROCESS_MERGE_CONF: "false"}  # Spark merges the mirrors too
    with DAG("apps_e2e_spark", schedule=None, start_date=START) as spark_dag:
        StreambedRefreshGroup(group, **options)
    sync_dags(spark_dag)
    with psycopg.connect(pg_dsn) as conn:
        transfers += [move_money(conn, random.Random(11)) for _ in range(5)]
    assert spark_dag.test(logical_date=START + dt.timedelta(hours=2)).state == "success"
    assert events.applications() == 5  # one application per member
    cut = CutReader(bank_connections, group).latest()
    assert cut.to_arrow("money").to_pylist() == [{"total": ACCOUNTS * INITIAL_BALANCE}]
    assert sorted(cut.to_arrow("transfers")["id"].to_pylist()) == sorted(transfers)
