"""Resync after a dropped slot, end to end: the trigger-form Param under ``dag.test()``, and
``streambed resync`` publishing a consistent cut through Spark while the older cuts stay readable."""

from __future__ import annotations

import datetime as dt
import random
import sys
from pathlib import Path

import psycopg
import pytest
from airflow.sdk import DAG

from airflow_provider_streambed import Mirror, RefreshGroup, StreambedRefreshGroup
from airflow_provider_streambed.capture.names import slot_name
from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.cli import main
from airflow_provider_streambed.examples.bank import load_bank, move_money
from airflow_provider_streambed.exceptions import SlotError
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.local import refresh_once
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.run_key import make_run_key
from tests.integration.airflow.bank import check_cut
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


def test_streambed_resync_publishes_a_consistent_cut_after_the_slot_was_dropped(
    pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sys.path.insert(0, str(DAGS))
    from example_bank import bank

    load_bank(pg_dsn)
    properties = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    rng = random.Random(5)
    with psycopg.connect(pg_dsn) as conn:
        journal = {move_money(conn, rng) for _ in range(20)}
    first = refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties)
    drop_slot(pg_dsn, bank)
    with psycopg.connect(pg_dsn) as conn:
        journal |= {move_money(conn, rng) for _ in range(20)}  # decoded by no slot
    with pytest.raises(SlotError, match="streambed resync"):
        refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties)

    monkeypatch.setenv("STREAMBED_SOURCE_DSN", pg_dsn)
    code = main(["resync", "--group", f"{DAGS / 'example_bank.py'}:bank", "--catalog-uri", sqlite_catalog_uri,
                 "--warehouse", properties["warehouse"]])
    assert code == 0, capsys.readouterr().out
    reader = CutReader(properties, bank)
    resynced = reader.latest()
    assert resynced.cut_id == first.cut.cut_id + 1
    assert check_cut(resynced, journal) == journal  # every committed transfer, the undecoded ones too
    assert check_cut(reader.get(first.cut.cut_id), journal) < journal  # the older cut still reads

    with psycopg.connect(pg_dsn) as conn:
        journal |= {move_money(conn, rng) for _ in range(10)}
    following = refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties)
    assert following.cut.cut_id == resynced.cut_id + 1
    assert check_cut(reader.latest(), journal) == journal
