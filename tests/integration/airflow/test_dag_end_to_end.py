"""End to end under Airflow's ``dag.test()``: real PostgreSQL, Spark local[2] and a SQLite catalog.

The bank DAG under a writer is also where lineage, extra links and the source password are
checked (one set of runs serves all three)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import psycopg
import pytest
from airflow.sdk import DAG, Asset
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy import select

from airflow_provider_streambed import CutRetention, Mirror, PythonMember, RefreshGroup, StreambedRefreshGroup
from airflow_provider_streambed.examples.bank import load_bank, move_money
from airflow_provider_streambed.exceptions import CutExpiredError
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.run_key import make_run_key
from airflow_provider_streambed.staging import staging_root
from airflow_provider_streambed.staging.members import read_member_manifest
from tests.integration.airflow.bank import check_cut
from tests.integration.airflow.conftest import START, WriterRuns, rerun, spark_kwargs, sync_dags
from tests.integration.airflow.members import FLAKY_FLAG
from tests.integration.airflow.observers import SECRET, Watch, lineage_events, stored_link, urlparse_path

pytestmark = pytest.mark.slow
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "dags"))


def _asset_events(uri: str) -> list[dict[str, Any]]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = select(AssetEvent).join(AssetModel, AssetModel.id == AssetEvent.asset_id).where(AssetModel.uri == uri)
        events = session.scalars(query).all()
        return [dict(event.extra) for event in events]


def _queued(dag_id: str) -> int:
    from airflow.models.asset import AssetDagRunQueue
    from airflow.utils.session import create_session

    with create_session() as session:
        return len(session.scalars(select(AssetDagRunQueue).where(AssetDagRunQueue.target_dag_id == dag_id)).all())


def test_bank_runs_under_a_concurrent_writer(
    run_bank_under_writer: Callable[..., WriterRuns], bank_connections: dict[str, str], pg_dsn: str,
    lineage_file: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Four runs of the example bank DAG, three under a writer: every cut keeps the invariant and grows, one
    Asset event per cut; every step writes OpenLineage events naming what it read and wrote, the
    tasks link to the Streambed page; and the source password, given to the connection, appears
    in no command line, warehouse or staged file (the job spec too), log line, XCom or rendered field.

    The test cluster trusts local connections, so the password is not checked by the server; it
    still travels through every path the provider gives it (conninfo for the replication and copy
    sessions, the hooks), which is what the watch sees."""
    params = conninfo_to_dict(pg_dsn)
    monkeypatch.setenv("AIRFLOW_CONN_BANK_PG", json.dumps({
        "conn_type": "postgres", "host": params["host"], "port": int(str(params["port"])),
        "login": params["user"], "password": SECRET, "schema": params["dbname"],
    }))
    watch = Watch(Path(bank_connections["warehouse"].removeprefix("file://")))
    watch.start()
    try:
        ran = run_bank_under_writer("bank_e2e", 3, **spark_kwargs())  # cuts 1..4, each keeps the invariant
    finally:
        watch.stop.set()
        watch.join()

    seen: set[int] = set()
    for previous, cut, ids in zip([None, *ran.cuts], ran.cuts, ran.holdings, strict=False):
        assert previous is None or cut.watermark > previous.watermark
        assert seen <= ids, f"cut {cut.cut_id} lost transfers of the cut before"
        seen = ids
    assert seen == ran.journal and len(ran.journal) > 50
    events = _asset_events("streambed://lakehouse/bank/balances")
    assert sorted(event["cut_id"] for event in events) == [1, 2, 3, 4]
    assert {event["watermark_lsn"] for event in events} == {str(cut.watermark) for cut in ran.cuts}

    _check_lineage(lineage_file, ran, params, bank_connections["warehouse"])
    watch.scan()
    assert watch.scans > 20 and not watch.found, watch.found
    _check_no_secret(ran.dag.dag_id, capfd, caplog)


def _check_lineage(path: Path, ran: WriterRuns, source: dict[str, Any], warehouse_uri: str) -> None:
    """Each run's steps wrote START and COMPLETE; the last run's events name the source tables, the
    member tables at the last cut, and its tasks stored the links to the group's page."""
    job = f"{ran.dag.dag_id}.bank"
    for task in ("capture_watermark", "refresh_group", "publish_cut"):
        assert len(lineage_events(path, f"{job}.{task}", "START")) == len(ran.cuts), task
        assert len(lineage_events(path, f"{job}.{task}", "COMPLETE")) == len(ran.cuts), task

    host, port, database = source["host"], source["port"], source["dbname"]
    captured = lineage_events(path, f"{job}.capture_watermark", "COMPLETE")[-1]
    assert {(d["namespace"], d["name"]) for d in captured["inputs"]} == {
        (f"postgres://{host}:{port}", f"{database}.public.accounts"),
        (f"postgres://{host}:{port}", f"{database}.public.transfers"),
    }
    assert captured["outputs"] == []
    cut = ran.cuts[-1]
    run_facet = captured["run"]["facets"]["streambed"]
    assert (run_facet["group"], run_facet["watermark"]) == ("bank", str(cut.watermark))

    published = lineage_events(path, f"{job}.publish_cut", "COMPLETE")[-1]
    facet = published["run"]["facets"]["streambed"]
    assert (facet["cutId"], facet["watermark"]) == (cut.cut_id, str(cut.watermark))
    warehouse = urlparse_path(warehouse_uri)
    outputs = {d["name"]: d for d in published["outputs"]}
    assert set(outputs) == {f"{warehouse}/bank/{name}" for name in ("accounts", "transfers", "balances")}
    rows = cut.row_counts()
    for name, member in cut.members.items():
        dataset = outputs[f"{warehouse}/bank/{name}"]
        assert dataset["namespace"] == "file"
        assert dataset["facets"]["version"]["datasetVersion"] == str(member.snapshot_id)
        assert dataset["facets"]["symlinks"]["identifiers"][0]["name"] == f"bank.{name}"
        assert dataset["outputFacets"]["outputStatistics"]["rowCount"] == rows[name]

    refreshed = lineage_events(path, f"{job}.refresh_group", "COMPLETE")[-1]  # balances reads accounts, transfers
    assert {d["name"] for d in refreshed["inputs"]} == {f"{warehouse}/bank/accounts", f"{warehouse}/bank/transfers"}

    # The links Airflow stored for the UI (it builds them from XCom after each task).
    last = ran.last_run
    assert stored_link(last, "bank.publish_cut", "CutLink") == f"/streambed/groups/lakehouse/bank?cut={cut.cut_id}"
    assert stored_link(last, "bank.capture_watermark", "HoldbackLink") == "/streambed/groups/lakehouse/bank"


def _check_no_secret(dag_id: str, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    """The source password is in no output or log line of the test, nor in any XCom or rendered field of the DAG."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    output = capfd.readouterr()
    assert SECRET not in output.out + output.err + caplog.text
    with create_session() as session:
        xcoms: list[Any] = list(session.scalars(select(XComModel.value).where(XComModel.dag_id == dag_id)))
        rendered = list(session.scalars(select(RenderedTaskInstanceFields.rendered_fields).where(
            RenderedTaskInstanceFields.dag_id == dag_id)))
    assert xcoms and rendered
    assert SECRET not in json.dumps(xcoms, default=str) + json.dumps(rendered, default=str)
    assert os.environ["AIRFLOW_CONN_BANK_PG"].count(SECRET) == 1  # the test did hand it over


def test_failed_member_retry_and_cleared_publish(bank_connections: dict[str, str], pg_dsn: str,
                                                tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flag = tmp_path / "flaky-ok"
    monkeypatch.setenv(FLAKY_FLAG, str(flag))
    load_bank(pg_dsn)
    with psycopg.connect(pg_dsn) as conn:
        for _ in range(10):
            move_money(conn, random.Random(3))
    group = RefreshGroup(
        name="bank_flaky", source_conn_id="bank_pg", catalog_conn_id="lakehouse", namespace="flaky",
        members=[Mirror("accounts"), Mirror("transfers"),
                 PythonMember("counts", "tests.integration.airflow.members:flaky_counts", sources=["transfers"])],
    )
    with DAG("flaky_e2e", schedule=None, start_date=START) as dag:
        StreambedRefreshGroup(group, **spark_kwargs())
    accounts_asset = Asset(uri="streambed://lakehouse/flaky/accounts", name="streambed://lakehouse/flaky/accounts")
    with DAG("flaky_downstream", schedule=[accounts_asset], start_date=START, is_paused_upon_creation=False) as down:
        pass
    sync_dags(dag, down)

    dag_run = dag.test(logical_date=START)
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert dag_run.state == "failed"
    assert states == {"bank_flaky.capture_watermark": "success", "bank_flaky.refresh_group": "failed",
                      "bank_flaky.publish_cut": "upstream_failed"}
    ledger = Ledger(bank_connections["uri"])
    run_key = make_run_key("flaky_e2e", dag_run.run_id)
    pinned = ledger.get_run("bank_flaky", run_key)
    assert pinned is not None and ledger.last_cut("bank_flaky") is None
    assert _asset_events(accounts_asset.uri) == [] and _queued("flaky_downstream") == 0
    root = staging_root(bank_connections["warehouse"], "bank_flaky", run_key)
    staged = {name: read_member_manifest(root, name) for name in ("accounts", "transfers", "counts")}
    assert staged["counts"] is None and staged["accounts"] is not None and staged["transfers"] is not None

    flag.touch()
    assert rerun(dag, dag_run, ["bank_flaky.refresh_group", "bank_flaky.publish_cut"]) == "success"
    again = ledger.get_run("bank_flaky", run_key)
    assert again is not None and again.watermark == pinned.watermark
    published = CutReader(bank_connections, group).latest()
    for name, manifest in staged.items():
        if manifest is None:
            continue
        files = {task.file.file_path.rsplit("/", 1)[-1] for task in published.table(name).scan().plan_files()}
        assert files == {path.rsplit("/", 1)[-1] for path in manifest.files}, f"{name} was recomputed"
    cut = ledger.last_cut("bank_flaky")
    assert cut is not None and (cut.cut_id, cut.watermark, cut.run_key) == (1, pinned.watermark, run_key)
    assert [event["cut_id"] for event in _asset_events(accounts_asset.uri)] == [1]
    assert _queued("flaky_downstream") == 1

    assert rerun(dag, dag_run, ["bank_flaky.publish_cut"]) == "success"
    assert [c.cut_id for c in ledger.list_cuts("bank_flaky")] == [1]
    assert [event["cut_id"] for event in _asset_events(accounts_asset.uri)] == [1], "a cleared publish emitted again"

    assert not Path(urlparse(root).path).exists(), "publish left the run's staging behind"
    with psycopg.connect(pg_dsn) as conn:
        move_money(conn, random.Random(5))  # changes that a second capture of the run would stage
    whole_run = ["bank_flaky.capture_watermark", "bank_flaky.refresh_group", "bank_flaky.publish_cut"]
    assert rerun(dag, dag_run, whole_run) == "success"  # "Clear" on the published run: nothing is redone
    assert [c.cut_id for c in ledger.list_cuts("bank_flaky")] == [1]
    assert not Path(urlparse(root).path).exists(), "a cleared published run captured or refreshed again"
    assert [event["cut_id"] for event in _asset_events(accounts_asset.uri)] == [1]


def test_bank_under_a_retention_keeps_the_newest_cut_through_spark_refreshes(
    bank_connections: dict[str, str], pg_dsn: str
) -> None:
    from example_bank import bank

    group = dataclasses.replace(bank, name="bank_kept",
                                retention=CutRetention(1, keep_newer_than=dt.timedelta(0),
                                                       delete_files_after=dt.timedelta(0)))
    load_bank(pg_dsn)
    with DAG("bank_kept_e2e", schedule=None, start_date=START, max_active_runs=1) as dag:
        StreambedRefreshGroup(group, **spark_kwargs())
    sync_dags(dag)
    journal: set[int] = set()
    rng = random.Random(11)
    for run in range(3):
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            journal |= {move_money(conn, rng) for _ in range(20)}  # every run has changes to publish
        dag_run = dag.test(logical_date=START + dt.timedelta(hours=run))
        assert dag_run.state == "success", [(ti.task_id, ti.state) for ti in dag_run.get_task_instances()]
    reader = CutReader(bank_connections, group)
    assert [cut.cut_id for cut in reader.list()] == [3]
    for cut in reader.list():
        assert cut.verify() == []
    assert check_cut(reader.latest(), journal) == journal
    with pytest.raises(CutExpiredError, match="cut 2 "):
        reader.get(2)
