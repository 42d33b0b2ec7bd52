"""The source password never leaves the connection: not in a command line, log line, XCom,
rendered field, staged or warehouse file, nor the job spec, during a real ``dag.test()`` run of
the example bank DAG (spark-submit, Spark local[2], PostgreSQL, a SQLite catalog).

The test cluster trusts local connections, so the password is not checked by the server; it
still travels through every path the provider gives it (conninfo for the replication and copy
sessions, the hooks), which is what this test watches.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import DAG
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy import select

from airflow_provider_streambed import StreambedRefreshGroup
from airflow_provider_streambed.examples.bank import load_bank
from tests.integration.airflow.conftest import spark_kwargs, sync_dags
from tests.integration.airflow.observers import SECRET, Watch

pytestmark = pytest.mark.slow
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "dags"))


def test_the_source_password_appears_nowhere(
    bank_connections: dict[str, str], pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
) -> None:
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from example_bank import bank

    params = conninfo_to_dict(pg_dsn)
    monkeypatch.setenv("AIRFLOW_CONN_BANK_PG", json.dumps({
        "conn_type": "postgres", "host": params["host"], "port": int(str(params["port"])),
        "login": params["user"], "password": SECRET, "schema": params["dbname"],
    }))
    load_bank(pg_dsn)
    with DAG("bank_secrets", schedule=None, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)) as dag:
        StreambedRefreshGroup(bank, **spark_kwargs())
    sync_dags(dag)
    watch = Watch(Path(bank_connections["warehouse"].removeprefix("file://")))
    watch.start()
    try:
        dag_run = dag.test()
    finally:
        watch.stop.set()
        watch.join()
    watch.scan()
    assert dag_run.state == "success"
    assert watch.scans > 20 and not watch.found, watch.found

    output = capfd.readouterr()
    assert SECRET not in output.out + output.err + caplog.text
    with create_session() as session:
        xcoms: list[Any] = list(session.scalars(select(XComModel.value).where(XComModel.run_id == dag_run.run_id)))
        rendered = list(session.scalars(select(RenderedTaskInstanceFields.rendered_fields).where(
            RenderedTaskInstanceFields.run_id == dag_run.run_id)))
    assert xcoms and rendered
    assert SECRET not in json.dumps(xcoms, default=str) + json.dumps(rendered, default=str)
    assert os.environ["AIRFLOW_CONN_BANK_PG"].count(SECRET) == 1  # the test did hand it over
