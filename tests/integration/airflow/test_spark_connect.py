"""The refresh on a real Spark Connect server: the Airflow task group through a ``spark_connect``
connection, ``refresh_once(spark_remote=...)``, and a server that is down."""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

import psycopg
import pytest
from airflow.sdk import DAG

from airflow_provider_streambed import Mirror, PythonMember, RefreshGroup, SqlMember, StreambedRefreshGroup
from airflow_provider_streambed.examples.bank import load_bank, move_money
from airflow_provider_streambed.exceptions import RefreshError
from airflow_provider_streambed.ledger import Ledger, RunState
from airflow_provider_streambed.local import refresh_once
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.run_key import make_run_key
from airflow_provider_streambed.testing.postgres import free_port
from tests.integration.airflow.bank import check_cut
from tests.integration.airflow.conftest import START, WriterRuns, rerun, sync_dags
from tests.integration.airflow.members import FLAKY_FLAG

pytestmark = pytest.mark.slow
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "dags"))


def test_bank_on_a_connect_server_under_the_writer(run_bank_under_writer: Callable[..., WriterRuns],
                                                  spark_connect_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    address = urlparse(spark_connect_url)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_TEST", json.dumps(
        {"conn_type": "spark_connect", "host": address.hostname, "port": address.port}))
    ran = run_bank_under_writer("bank_connect", 3, spark_conn_id="spark_connect_test")  # cuts 1..4, each checked
    assert len(ran.journal) > 20


def test_a_server_that_is_down_fails_retryably_and_publishes_nothing(
    pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path, spark_connect_url: str
) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "dags"))
    from example_bank import bank

    load_bank(pg_dsn)
    with psycopg.connect(pg_dsn) as conn:
        rng = random.Random(3)
        journal = {move_money(conn, rng) for _ in range(10)}
    properties = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    down = f"sc://localhost:{free_port()}"
    with pytest.raises(RefreshError, match=rf"the Spark Connect server {down} cannot be reached"):
        refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties, run_key="r1", spark_remote=down)
    reader = CutReader(properties, bank)
    assert reader.list() == []
    pinned = reader.ledger.get_run(bank.name, "r1")
    assert pinned is not None and pinned.state == RunState.PINNED

    result = refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties, run_key="r1",
                          spark_remote=spark_connect_url)
    assert result.cut is not None and result.cut.watermark == pinned.watermark
    assert check_cut(reader.get(result.cut.cut_id), journal) == journal
    # pyspark's process-wide Connect switch is undone: later classic sessions and spark-submit work
    assert not {"SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE"} & set(os.environ)


def test_a_task_per_member_retries_only_the_failed_member(bank_connections: dict[str, str], pg_dsn: str,
                                                          spark_connect_url: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    address = urlparse(spark_connect_url)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_TEST", json.dumps(
        {"conn_type": "spark_connect", "host": address.hostname, "port": address.port}))
    flag = tmp_path / "flaky-ok"
    monkeypatch.setenv(FLAKY_FLAG, str(flag))
    load_bank(pg_dsn)
    with psycopg.connect(pg_dsn) as conn:
        rng = random.Random(7)
        journal = {move_money(conn, rng) for _ in range(10)}
    group = RefreshGroup(
        name="bank_members", source_conn_id="bank_pg", catalog_conn_id="lakehouse", namespace="bank_members",
        members=[Mirror("accounts"), Mirror("transfers"),
                 PythonMember("counts", "tests.integration.airflow.members:flaky_counts", sources=["transfers"]),
                 SqlMember("senders", "SELECT count(*) AS senders FROM counts", sources=["counts"])],
    )
    with DAG("bank_members", schedule=None, start_date=START) as dag:
        StreambedRefreshGroup(group, spark_conn_id="spark_connect_test", task_per_member=True)
    sync_dags(dag)
    assert {task_id: sorted(dag.get_task(task_id).upstream_task_ids) for task_id in dag.task_ids} == {
        "bank_members.capture_watermark": [],
        "bank_members.refresh_accounts": ["bank_members.capture_watermark"],
        "bank_members.refresh_transfers": ["bank_members.capture_watermark"],
        "bank_members.refresh_counts": ["bank_members.capture_watermark", "bank_members.refresh_transfers"],
        "bank_members.refresh_senders": ["bank_members.capture_watermark", "bank_members.refresh_counts"],
        "bank_members.publish_cut": ["bank_members.refresh_accounts", "bank_members.refresh_counts",
                                     "bank_members.refresh_senders", "bank_members.refresh_transfers"],
    }

    dag_run = dag.test(logical_date=START)
    states = {ti.task_id.split(".")[1]: ti.state for ti in dag_run.get_task_instances()}
    assert states == {"capture_watermark": "success", "refresh_accounts": "success",
                      "refresh_transfers": "success", "refresh_counts": "failed",
                      "refresh_senders": "upstream_failed", "publish_cut": "upstream_failed"}
    ledger = Ledger(bank_connections["uri"])
    pinned = ledger.get_run(group.name, make_run_key("bank_members", dag_run.run_id))
    assert pinned is not None and ledger.last_cut(group.name) is None

    flag.touch()
    cleared = ["bank_members.refresh_counts", "bank_members.refresh_senders", "bank_members.publish_cut"]
    assert rerun(dag, dag_run, cleared) == "success"
    tries = {ti.task_id.split(".")[1]: ti.try_number for ti in dag_run.get_task_instances()}
    assert tries["refresh_accounts"] == 1 and tries["refresh_transfers"] == 1 and tries["refresh_counts"] == 2
    cut = CutReader(bank_connections, group).latest()
    assert (cut.cut_id, cut.watermark) == (1, pinned.watermark)
    assert [record.cut_id for record in ledger.list_cuts(group.name)] == [1]
    senders = cut.to_arrow("senders").to_pylist()[0]["senders"]
    assert senders == len({row["src"] for row in cut.to_arrow("transfers").to_pylist()}) and len(journal) == 10
