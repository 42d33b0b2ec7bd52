"""Airflow end-to-end fixtures: a migrated SQLite metadata DB, connections, DAG sync, re-runs,
the bank DAG run under a concurrent writer, and an OpenLineage file transport."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from psycopg.conninfo import conninfo_to_dict

from airflow_provider_streambed.examples.bank import Writer, load_bank
from airflow_provider_streambed.read import Cut, CutReader
from airflow_provider_streambed.refresh.spark.submit import LOCAL_CONF
from tests.integration.airflow.bank import check_cut
from tests.integration.airflow.observers import clear_openlineage_config

#: The logical date of a test DAG's first run.
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
DAGS = Path(__file__).resolve().parents[3] / "dags"


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """A fresh Airflow metadata DB (SQLite, in the tests' AIRFLOW_HOME), migrated once per session."""
    from airflow.configuration import conf
    from airflow.utils import db

    Path(conf.get("core", "dags_folder")).mkdir(parents=True, exist_ok=True)
    db.resetdb()


@pytest.fixture
def bank_connections(
    airflow_db: None, pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """``bank_pg``, ``lakehouse`` and ``spark_local`` as ``AIRFLOW_CONN_*`` variables; returns catalog properties."""
    params = conninfo_to_dict(pg_dsn)
    monkeypatch.setenv("AIRFLOW_CONN_BANK_PG", json.dumps({
        "conn_type": "postgres", "host": params["host"], "port": int(str(params["port"])),
        "login": params["user"], "schema": params["dbname"],
    }))
    warehouse = (tmp_path / "warehouse").as_uri()
    monkeypatch.setenv("AIRFLOW_CONN_LAKEHOUSE", json.dumps({
        "conn_type": "streambed_catalog", "extra": {"uri": sqlite_catalog_uri, "warehouse": warehouse},
    }))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    return {"uri": sqlite_catalog_uri, "warehouse": warehouse}


@pytest.fixture
def lineage_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Events of this test, one JSON per line (the OpenLineage file transport).

    The provider's plugin registers its listener only if OpenLineage was configured when the
    plugin was imported; earlier tests of the session imported it unconfigured, so the listener is
    registered here with Airflow's listener managers (and removed after).
    """
    from airflow.providers.openlineage.plugins.listener import get_openlineage_listener

    from airflow_provider_streambed.compat.airflow import listener_managers

    path = tmp_path / "openlineage.jsonl"
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT",
                       json.dumps({"type": "file", "log_file_path": str(path), "append": True}))
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__NAMESPACE", "streambed-tests")
    clear_openlineage_config()
    listener = get_openlineage_listener()
    added = [manager for manager in listener_managers() if not manager.pm.is_registered(listener)]
    for manager in added:
        manager.add_listener(listener)
    yield path
    for manager in added:
        manager.pm.unregister(listener)
    monkeypatch.undo()
    clear_openlineage_config()


@dataclass(frozen=True)
class WriterRuns:
    """What :func:`run_bank_under_writer` ran: its DAG, its last DAG run, the cuts, the transfer ids
    each cut holds (in cut order) and every transfer the writer committed."""

    dag: Any
    last_run: Any
    cuts: list[Cut]
    holdings: list[set[int]]
    journal: set[int]


@pytest.fixture
def run_bank_under_writer(
    bank_connections: dict[str, str], pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., WriterRuns]:
    """Run the bank DAG (``dags/example_bank.py``) under a writer: ``run(dag_id, runs, **task_group_kwargs)``.

    The DAG runs ``runs`` times while a writer moves money, then once after the writer stopped.
    Asserts that every DAG run succeeds, that each published one cut, that every cut keeps the
    bank invariant, and that the last cut holds every committed transfer.
    """
    monkeypatch.syspath_prepend(str(DAGS))

    def run(dag_id: str, runs: int, **task_group_kwargs: Any) -> WriterRuns:
        from airflow.sdk import DAG
        from example_bank import bank

        from airflow_provider_streambed import StreambedRefreshGroup

        load_bank(pg_dsn)
        with DAG(dag_id, schedule=None, start_date=START, max_active_runs=1) as dag:
            StreambedRefreshGroup(bank, **task_group_kwargs)
        sync_dags(dag)
        writer = Writer(pg_dsn)
        writer.start()
        try:
            for hour in range(runs):
                dag_run = dag.test(logical_date=START + dt.timedelta(hours=hour))
                assert dag_run.state == "success", [(ti.task_id, ti.state) for ti in dag_run.get_task_instances()]
        finally:
            journal = set(writer.stop())
        last_run = dag.test(logical_date=START + dt.timedelta(hours=runs))
        assert last_run.state == "success"
        cuts = CutReader(bank_connections, bank).list()
        assert [cut.cut_id for cut in cuts] == list(range(1, runs + 2))
        holdings = [check_cut(cut, journal) for cut in cuts]
        assert holdings[-1] == journal, "the last cut after the writer stopped misses or invents transfers"
        return WriterRuns(dag, last_run, cuts, holdings, journal)

    return run


def spark_kwargs() -> dict[str, Any]:
    """StreambedRefreshGroup arguments that run the job with this venv's Spark and Python."""
    bin_dir = Path(sys.executable).parent
    env = {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(path for path in sys.path if path),
        "PATH": os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]),
    }
    return {
        "spark_conn_id": "spark_local",
        "spark_conf": dict(LOCAL_CONF),
        "spark_options": {"env_vars": env, "spark_binary": str(bin_dir / "spark-submit")},
    }


def sync_dags(*dags: Any) -> None:
    """Serialize DAGs into the metadata DB, as the DAG processor would (``dag.test`` needs it)."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.collection import update_dag_parsing_results_in_db
    from airflow.serialization.serialized_objects import LazyDeserializedDAG
    from airflow.utils.session import create_session

    DagBundlesManager().sync_bundles_to_db()
    with create_session() as session:
        update_dag_parsing_results_in_db(
            "dags-folder", None, [LazyDeserializedDAG.from_dag(d) for d in dags], {}, None, set(), session=session
        )


def rerun(dag: Any, dag_run: Any, task_ids: list[str]) -> str:
    """Clear ``task_ids`` of an existing run and run it to the end again (as "Clear" in the UI does).

    ``dag.test`` cannot resume a run; this drives the same loop with Airflow's (private) task runner.
    Returns the run's final state.
    """
    from airflow.models.taskinstance import clear_task_instances
    from airflow.sdk.definitions.dag import _run_task
    from airflow.settings import Session
    from airflow.utils.state import DagRunState, TaskInstanceState

    from airflow_provider_streambed.compat.airflow import serialized_round_trip

    session = Session()
    run = session.merge(dag_run)
    run.dag = serialized_round_trip(dag)
    cleared = [ti for ti in run.get_task_instances(session=session) if ti.task_id in task_ids]
    clear_task_instances(cleared, session, dag_run_state=DagRunState.RUNNING)
    session.commit()
    while run.state == DagRunState.RUNNING:
        session.expire_all()
        schedulable, _ = run.update_state(session=session)
        for ti in schedulable:
            ti.try_number += 1
            ti.state = TaskInstanceState.SCHEDULED
        session.commit()
        for ti in [t for t in run.get_task_instances(session=session) if t.state == TaskInstanceState.SCHEDULED]:
            _run_task(ti=ti, task=dag.task_dict[ti.task_id])
    state = str(run.state)
    session.close()
    return state


def task_xcom(dag_run: Any, task_id: str) -> Any:
    """The return value a task of ``dag_run`` pushed to XCom."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        value = session.scalar(select(XComModel.value).where(
            XComModel.dag_id == dag_run.dag_id, XComModel.run_id == dag_run.run_id,
            XComModel.task_id == task_id, XComModel.key == "return_value",
        ))
    return json.loads(value) if isinstance(value, str) else value
