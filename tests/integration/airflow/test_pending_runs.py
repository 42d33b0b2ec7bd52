"""A pending run that Airflow may still retry blocks the group's next runs; one that ended does not.

The refresh step fails fast here (its Spark connection is missing), so no Spark job runs: the
test is about the capture step's claim on the group under real ``dag.test()`` runs.
"""

from __future__ import annotations

import datetime as dt

import psycopg
import pytest
from airflow.sdk import DAG

from airflow_provider_streambed import Mirror, RefreshGroup, StreambedRefreshGroup
from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.examples.bank import load_bank
from airflow_provider_streambed.ledger import Ledger, RunState
from airflow_provider_streambed.run_key import make_run_key
from tests.integration.airflow.conftest import sync_dags

pytestmark = pytest.mark.slow
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
CAPTURE, REFRESH = "blocked.capture_watermark", "blocked.refresh_group"


def states(run: object) -> dict[str, str]:
    return {ti.task_id: ti.state for ti in run.get_task_instances()}  # type: ignore[attr-defined]


def test_a_pending_run_blocks_until_a_run_supersedes_it(bank_connections: dict[str, str], pg_dsn: str) -> None:
    load_bank(pg_dsn)
    group = RefreshGroup(name="blocked", source_conn_id="bank_pg", catalog_conn_id="lakehouse", namespace="blocked",
                         members=[Mirror("accounts")])
    with DAG("blocked_e2e", schedule=None, start_date=START) as dag:
        StreambedRefreshGroup(group, spark_conn_id="spark_missing")
    sync_dags(dag)
    ledger = Ledger(bank_connections["uri"])

    # A run still in the hands of its orchestrator (here: pinned outside Airflow, as by refresh_once).
    with psycopg.connect(pg_dsn) as conn:
        capture_run(conn, group, ledger, "elsewhere", bank_connections["warehouse"])
    blocked = dag.test(logical_date=START)
    assert states(blocked)[CAPTURE] == "failed"
    assert ledger.get_run("blocked", make_run_key("blocked_e2e", blocked.run_id)) is None  # refused before pinning
    superseding = dag.test(logical_date=START + dt.timedelta(hours=1), run_conf={"supersede_pending_runs": True})
    assert states(superseding)[CAPTURE] == "success" and states(superseding)[REFRESH] == "failed"
    elsewhere = ledger.get_run("blocked", "elsewhere")
    assert elsewhere is not None and elsewhere.state == RunState.SUPERSEDED
    last_key = make_run_key("blocked_e2e", superseding.run_id)
    assert elsewhere.replaced_by == last_key

    # The refresh failed on a missing connection (final: a retry reads it again): the run released the group.
    last = ledger.get_run("blocked", last_key)
    assert last is not None and last.state == RunState.FAILED and last.last_error == "ConnectionConfigError"
    assert last.watermark > elsewhere.watermark and last.dag_run is not None
    # A worker killed on its last try records nothing: put the run back to pinned to play that.
    ledger.set_run_state("blocked", last_key, RunState.PINNED)
    after_kill = dag.test(logical_date=START + dt.timedelta(hours=2))
    assert states(after_kill)[CAPTURE] == "success", "a run whose DAG run ended still blocked the group"
    killed = ledger.get_run("blocked", last_key)
    assert killed is not None and killed.state == RunState.FAILED and killed.last_error == "ConnectionConfigError"
    assert killed.replaced_by == make_run_key("blocked_e2e", after_kill.run_id)
    assert ledger.last_cut("blocked") is None
