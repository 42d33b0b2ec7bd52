"""A failed, unpublished run blocks the group's next runs until one is triggered to supersede it.

The refresh step fails fast here (its Spark connection is missing), so no Spark job runs: the
test is about the capture step's claim on the group under real ``dag.test()`` runs.
"""

from __future__ import annotations

import datetime as dt

import pytest
from airflow.sdk import DAG

from airflow_provider_streambed import Mirror, RefreshGroup, StreambedRefreshGroup
from airflow_provider_streambed.examples.bank import load_bank
from airflow_provider_streambed.ledger import Ledger, RunState
from airflow_provider_streambed.run_key import make_run_key
from tests.integration.airflow.conftest import sync_dags

pytestmark = pytest.mark.slow
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
CAPTURE, REFRESH = "blocked.capture_watermark", "blocked.refresh_group"


def test_a_pending_run_blocks_until_a_run_supersedes_it(bank_connections: dict[str, str], pg_dsn: str) -> None:
    load_bank(pg_dsn)
    group = RefreshGroup(name="blocked", source_conn_id="bank_pg", catalog_conn_id="lakehouse", namespace="blocked",
                         members=[Mirror("accounts")])
    with DAG("blocked_e2e", schedule=None, start_date=START) as dag:
        StreambedRefreshGroup(group, spark_conn_id="spark_missing")
    sync_dags(dag)

    def states(run: object) -> dict[str, str]:
        return {ti.task_id: ti.state for ti in run.get_task_instances()}  # type: ignore[attr-defined]

    failed = dag.test(logical_date=START)
    assert states(failed)[CAPTURE] == "success" and states(failed)[REFRESH] == "failed"
    blocked = dag.test(logical_date=START + dt.timedelta(hours=1))
    assert states(blocked)[CAPTURE] == "failed"
    superseding = dag.test(logical_date=START + dt.timedelta(hours=2), run_conf={"supersede_pending_runs": True})
    assert states(superseding)[CAPTURE] == "success"

    ledger = Ledger(bank_connections["uri"])
    first = ledger.get_run("blocked", make_run_key("blocked_e2e", failed.run_id))
    last = ledger.get_run("blocked", make_run_key("blocked_e2e", superseding.run_id))
    assert first is not None and first.state == RunState.SUPERSEDED
    assert last is not None and last.state == RunState.PINNED and last.watermark > first.watermark
    assert ledger.get_run("blocked", make_run_key("blocked_e2e", blocked.run_id)) is None  # refused before pinning
    assert ledger.last_cut("blocked") is None
