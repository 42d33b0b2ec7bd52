"""``ExpireCutsOperator`` in a maintenance DAG under real ``dag.test()``: a dry run, then the expiry."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

import pytest
from airflow.sdk import DAG
from pyiceberg.catalog.sql import SqlCatalog

from airflow_provider_streambed.catalog import open_catalog
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.operators.retention import ExpireCutsOperator
from airflow_provider_streambed.read import CutReader
from tests.integration.airflow.conftest import sync_dags, task_xcom
from tests.integration.publish.test_retention import GROUP, check_cut, publish_run

pytestmark = pytest.mark.slow


def test_a_maintenance_dag_expires_a_backlog_after_a_dry_run(
    airflow_db: None, sqlite_catalog_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    props = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    monkeypatch.setenv("AIRFLOW_CONN_LAKEHOUSE", json.dumps({"conn_type": "streambed_catalog", "extra": props}))
    group = dataclasses.replace(GROUP, catalog_conn_id="lakehouse")
    catalog = open_catalog(props)
    assert isinstance(catalog, SqlCatalog)
    ledger = Ledger(catalog.engine)
    ledger.create()
    for k in range(1, 7):
        publish_run(catalog, ledger, dataclasses.replace(group, retention=None), k)

    with DAG("bank_retention", schedule=None, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)) as dag:
        ExpireCutsOperator(task_id="dry_run", group=group, dry_run=True) >> ExpireCutsOperator(
            task_id="expire", group=group)
    sync_dags(dag)
    run = dag.test()

    assert run.state == "success"
    dry, done = task_xcom(run, "dry_run"), task_xcom(run, "expire")
    assert dry["dry_run"] is True and dry["expired_cuts"] == [1, 2, 3] and dry["deleted_files"] > 0
    assert done["expired_cuts"] == [1, 2, 3] and done["deleted_files"] == dry["deleted_files"]
    assert [cut.cut_id for cut in ledger.list_cuts("bank")] == [4, 5, 6]
    for cut in CutReader(catalog, "bank").list():
        check_cut(cut)
