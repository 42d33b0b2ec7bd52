"""Resync after a dropped slot, end to end: the trigger-form Param under ``dag.test()``.

``streambed resync`` publishing a consistent cut through Spark is tested after ``streambed
refresh`` in ``test_refresh_once.py`` (one bank source serves both)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import psycopg
import pytest
from airflow.sdk import DAG

from airflow_provider_streambed import Mirror, RefreshGroup, StreambedRefreshGroup
from airflow_provider_streambed.capture.names import slot_name
from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.examples.bank import load_bank
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.run_key import make_run_key
from tests.integration.airflow.conftest import sync_dags
from tests.integration.capture.conftest import publish

pytestmark = pytest.mark.slow
DAGS = Path(__file__).resolve().parents[3] / "dags"
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def drop_slot(dsn: str, group: RefreshGroup) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_drop_replication_slot(%s)", (slot_name(group),))


def test_the_resync_param_copies_every_table_again(bank_connections: dict[str, str], pg_dsn: str) -> None:
    load_bank(pg_dsn)
    group = RefreshGroup(name="resynced", source_conn_id="bank_pg", catalog_conn_id="lakehouse",
                         namespace="resynced", members=[Mirror("accounts")])
    with DAG("resync_e2e", schedule=None, start_date=START) as dag:
        StreambedRefreshGroup(group, spark_conn_id="spark_missing")  # the refresh fails fast: no Spark here
    sync_dags(dag)
    ledger = Ledger(bank_connections["uri"])
    with psycopg.connect(pg_dsn) as conn:  # a cut made outside Airflow, then the slot is dropped
        first = capture_run(conn, group, ledger, "first", bank_connections["warehouse"])
        publish(conn, ledger, group, first)
    drop_slot(pg_dsn, group)

    failed = dag.test(logical_date=START)
    capture = "resynced.capture_watermark"
    assert {ti.task_id: ti.state for ti in failed.get_task_instances()}[capture] == "failed"
    resynced = dag.test(logical_date=START + dt.timedelta(hours=1), run_conf={"resync": True})
    assert {ti.task_id: ti.state for ti in resynced.get_task_instances()}[capture] == "success"
    run = ledger.get_run(group.name, make_run_key("resync_e2e", resynced.run_id))
    assert run is not None and run.watermark > first.watermark
    with psycopg.connect(pg_dsn) as conn:
        row = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                           (slot_name(group),)).fetchone()
    assert row is not None  # the run made a new slot (its copy is staged for the failed refresh to retry)
