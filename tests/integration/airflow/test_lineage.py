"""OpenLineage and extra links under ``dag.test()``: the example bank DAG writes START and COMPLETE
events whose inputs and outputs name the group's source tables and member tables, with the cut's
facets, and its capture and publish tasks link to the group's Streambed page."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import psycopg
import pytest
from airflow.sdk import DAG

from airflow_provider_streambed import StreambedRefreshGroup
from airflow_provider_streambed.examples.bank import load_bank, move_money
from airflow_provider_streambed.read import CutReader
from tests.integration.airflow.conftest import spark_kwargs, sync_dags
from tests.integration.airflow.observers import events, stored_link, urlparse_path

pytestmark = pytest.mark.slow
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_each_step_names_what_it_read_and_wrote(
    bank_connections: dict[str, str], pg_dsn: str, lineage_file: Path
) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "dags"))
    from example_bank import bank

    load_bank(pg_dsn)
    with DAG("bank_lineage", schedule=None, start_date=START) as dag:
        StreambedRefreshGroup(bank, **spark_kwargs())
    sync_dags(dag)
    for run in range(2):
        with psycopg.connect(pg_dsn) as conn:
            import random

            move_money(conn, random.Random(run))
        dag_run = dag.test(logical_date=START + dt.timedelta(hours=run))
        assert dag_run.state == "success"

    host, port, database = (psycopg.conninfo.conninfo_to_dict(pg_dsn)[key] for key in ("host", "port", "dbname"))
    for task in ("capture_watermark", "refresh_group", "publish_cut"):
        assert len(events(lineage_file, task, "START")) == 2, task
        assert len(events(lineage_file, task, "COMPLETE")) == 2, task

    captured = events(lineage_file, "capture_watermark", "COMPLETE")[-1]
    assert {(d["namespace"], d["name"]) for d in captured["inputs"]} == {
        (f"postgres://{host}:{port}", f"{database}.public.accounts"),
        (f"postgres://{host}:{port}", f"{database}.public.transfers"),
    }
    assert captured["outputs"] == []
    cut = CutReader(bank_connections, bank).latest()
    run_facet = captured["run"]["facets"]["streambed"]
    assert (run_facet["group"], run_facet["watermark"]) == ("bank", str(cut.watermark))

    published = events(lineage_file, "publish_cut", "COMPLETE")[-1]
    facet = published["run"]["facets"]["streambed"]
    assert (facet["cutId"], facet["watermark"]) == (cut.cut_id, str(cut.watermark))
    warehouse = urlparse_path(bank_connections["warehouse"])
    outputs = {d["name"]: d for d in published["outputs"]}
    assert set(outputs) == {f"{warehouse}/bank/{name}" for name in ("accounts", "transfers", "balances")}
    rows = cut.row_counts()
    for name, member in cut.members.items():
        dataset = outputs[f"{warehouse}/bank/{name}"]
        assert dataset["namespace"] == "file"
        assert dataset["facets"]["version"]["datasetVersion"] == str(member.snapshot_id)
        assert dataset["facets"]["symlinks"]["identifiers"][0]["name"] == f"bank.{name}"
        assert dataset["outputFacets"]["outputStatistics"]["rowCount"] == rows[name]

    refreshed = events(lineage_file, "refresh_group", "COMPLETE")[-1]  # balances reads accounts and transfers
    assert {d["name"] for d in refreshed["inputs"]} == {f"{warehouse}/bank/accounts", f"{warehouse}/bank/transfers"}

    # The links Airflow stored for the UI (it builds them from XCom after each task).
    assert stored_link(dag_run, "bank.publish_cut", "CutLink") == f"/streambed/groups/lakehouse/bank?cut={cut.cut_id}"
    assert stored_link(dag_run, "bank.capture_watermark", "HoldbackLink") == "/streambed/groups/lakehouse/bank"

