"""Run outcomes on real PostgreSQL, Spark and a SQLite catalog: ``refresh_once``, ``streambed runs``, ``dag.test``.

A quiet source: no WAL since the last cut, so W equals its W; such runs succeed as ``unchanged``
and never wedge the group. Failures: a retryable one keeps the run's W and claim, a final one
frees the group at once, and the next run takes over.

These tests run on a cluster of their own with autovacuum off: autovacuum writes WAL at moments
a test cannot choose, and a source with no WAL at all is the case under test.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_provider_streambed.capture import run as capture_module
from airflow_provider_streambed.capture.slot import check_slot
from airflow_provider_streambed.cli import main
from airflow_provider_streambed.examples.bank import load_bank, move_money
from airflow_provider_streambed.exceptions import (
    GroupBusyError,
    InvalidWatermarkError,
    RunSupersededError,
    SlotError,
    SourceUnavailableError,
)
from airflow_provider_streambed.ledger import Ledger, RunState
from airflow_provider_streambed.local import StepTimes, refresh_once
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.run_key import make_run_key
from airflow_provider_streambed.testing.postgres import ThrowawayCluster, wait_for_quiet_wal
from airflow_provider_streambed.testing.spark import EventLogs
from tests.integration.airflow.bank import check_cut
from tests.integration.airflow.conftest import rerun, spark_kwargs, sync_dags, task_xcom
from tests.integration.airflow.members import FLAKY_FLAG

pytestmark = pytest.mark.slow
DAGS = Path(__file__).resolve().parents[3] / "dags"
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
BALANCES = "streambed://lakehouse/quiet/balances"


@pytest.fixture(scope="module")
def quiet_cluster() -> Iterator[ThrowawayCluster]:
    """A cluster of this module's own, with autovacuum off (see the module docstring)."""
    with ThrowawayCluster(settings={"autovacuum": "off"}) as cluster:
        yield cluster


@pytest.fixture
def pg_dsn(quiet_cluster: ThrowawayCluster) -> Iterator[str]:
    """A fresh database on the quiet cluster (overrides the shared cluster's fixture)."""
    name = quiet_cluster.create_database()
    yield quiet_cluster.dsn(name)
    quiet_cluster.drop_database(name)


@pytest.fixture
def bank() -> Any:
    sys.path.insert(0, str(DAGS))
    from example_bank import bank

    return bank


def slot_position(dsn: str, group: Any) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return str(check_slot(conn, group).confirmed_flush)


def asset_event_cuts(uri: str) -> list[int]:
    """The cut ids of every Asset event for ``uri``."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        query = select(AssetEvent).join(AssetModel, AssetModel.id == AssetEvent.asset_id).where(AssetModel.uri == uri)
        return sorted(event.extra["cut_id"] for event in session.scalars(query).all())


def test_a_quiet_source_runs_unchanged_and_the_next_write_publishes(
    bank_connections: dict[str, str], pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path, bank: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Both faces on one quiet source (one wait for the WAL to settle): ``refresh_once`` of the bank
    group, and ``dag.test()`` of the same group named ``quiet``. Each catches up once, then runs
    unchanged twice (no Spark, no slot move, no cut, no Asset event), then publishes the next write.
    Then an ``ADD COLUMN ... DEFAULT`` under ``dag.test()``: the member is copied again, its older rows
    read the default, and the bank invariant holds."""
    from airflow.sdk import DAG

    from airflow_provider_streambed import StreambedRefreshGroup

    load_bank(pg_dsn)
    event_logs = EventLogs(tmp_path / "spark-events")
    properties = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    options: dict[str, Any] = {"source_dsn": pg_dsn, "catalog_properties": properties, "spark_conf": event_logs.conf()}
    # A group of its own (name, namespace, Asset alias): other tests' DAGs run the bank group too.
    quiet = dataclasses.replace(bank, name="quiet", namespace="quiet")
    dag_event_logs = EventLogs(tmp_path / "dag-spark-events")
    dag_options = spark_kwargs()
    dag_options["spark_conf"].update(dag_event_logs.conf())
    with DAG("quiet_e2e", schedule=None, start_date=START, max_active_runs=1) as dag:
        StreambedRefreshGroup(quiet, **dag_options)
    sync_dags(dag)
    assert refresh_once(bank, **options).cut.cut_id == 1
    assert dag.test(logical_date=START).state == "success"
    wait_for_quiet_wal(pg_dsn)
    # The server wrote WAL of its own after the bootstraps' W (the checkpoint just taken, the
    # background writer's running-transactions record): each face's first run catches up to it
    # with a cut of the same snapshots, carried over without Spark. From then on nothing moves.
    first = refresh_once(bank, **options)
    assert first.outcome == "published" and first.cut.cut_id == 2 and event_logs.applications() == 1
    assert dag.test(logical_date=START + dt.timedelta(minutes=30)).state == "success"
    slot, dag_slot = slot_position(pg_dsn, bank), slot_position(pg_dsn, quiet)
    assert asset_event_cuts(BALANCES) == [1, 2]
    ledger = Ledger(sqlite_catalog_uri)

    for _ in range(2):
        times = StepTimes()
        result = refresh_once(bank, times=times, **options)
        assert result.outcome == RunState.UNCHANGED and result.cut.cut_id == 2
        assert result.message().startswith(f"group bank: unchanged since cut 2 (W={first.cut.watermark}), checked at")
        record = ledger.get_run("bank", result.run_key)
        assert record is not None and record.state == RunState.UNCHANGED and record.cut_id == 2
        assert record.watermark == first.cut.watermark and times.refresh == 0.0
    assert event_logs.applications() == 1, "an unchanged run started Spark"
    assert [cut.cut_id for cut in ledger.list_cuts("bank")] == [1, 2]
    assert slot_position(pg_dsn, bank) == slot, "an unchanged run moved the slot"
    status = CutReader(properties, bank).status()
    assert status.latest is not None and status.latest.cut_id == 2
    assert status.checked_by == result.run_key and status.checked_at is not None
    assert status.checked_at > status.latest.published_at

    for hour in (1, 2):
        dag_run = dag.test(logical_date=START + dt.timedelta(hours=hour))
        assert {ti.task_id: ti.state for ti in dag_run.get_task_instances()} == {
            "quiet.capture_watermark": "success", "quiet.refresh_group": "success", "quiet.publish_cut": "success"}
        for task in ("capture_watermark", "refresh_group", "publish_cut"):
            told = task_xcom(dag_run, f"quiet.{task}")
            assert told["outcome"] == "unchanged" and told["cut_id"] == 2, told
            assert told["message"].startswith("unchanged since cut 2 (W=")
    assert [cut.cut_id for cut in ledger.list_cuts("quiet")] == [1, 2]
    assert dag_event_logs.applications() == 1, "an unchanged DAG run started Spark"
    assert asset_event_cuts(BALANCES) == [1, 2], "an unchanged DAG run emitted Asset events"
    assert slot_position(pg_dsn, quiet) == dag_slot

    with psycopg.connect(pg_dsn) as conn:
        transfer = move_money(conn, random.Random(7))
    second = refresh_once(bank, **options)
    assert second.outcome == "published" and second.cut.cut_id == 3
    assert second.cut.watermark > first.cut.watermark and event_logs.applications() == 2
    assert transfer in check_cut(CutReader(properties, bank).latest(), {transfer})
    assert dag.test(logical_date=START + dt.timedelta(hours=4)).state == "success"
    assert [cut.cut_id for cut in ledger.list_cuts("quiet")] == [1, 2, 3]
    assert asset_event_cuts(BALANCES) == [1, 2, 3]
    assert transfer in check_cut(CutReader(bank_connections, quiet).latest(), {transfer})

    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # the older rows read 'eu' from the catalog only
        conn.execute("ALTER TABLE accounts ADD COLUMN region text NOT NULL DEFAULT 'eu'")
        later = move_money(conn, random.Random(12))
    assert dag.test(logical_date=START + dt.timedelta(hours=5)).state == "success"  # the member is copied again
    latest = CutReader(bank_connections, quiet).latest()
    assert latest.cut_id == 4 and set(latest.to_arrow("accounts")["region"].to_pylist()) == {"eu"}
    assert later in check_cut(latest, {transfer, later})
    summary = latest.table("accounts").snapshot_by_id(latest.member("accounts").snapshot_id).summary
    assert summary.get("streambed.resync-reason", "").startswith("columns ['region'] were added with a DEFAULT")

    capsys.readouterr()  # the DAG runs' log lines
    assert main(["runs", "list", "--group", "bank", "--catalog-uri", sqlite_catalog_uri, "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [run["outcome"] for run in runs] == ["published cut 3", *["unchanged since cut 2"] * 2, "published cut 2",
                                                "published cut 1"]
    assert main(["runs", "list", "--group", "bank", "--catalog-uri", sqlite_catalog_uri]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0].split() == ["run_key", "state", "watermark", "pinned_at", "cut", "outcome", "last_error"]
    assert main(["runs", "supersede", second.run_key, "--group", "bank", "--catalog-uri", sqlite_catalog_uri]) == 1
    assert "published cut 3; only unpublished runs can be superseded" in capsys.readouterr().out
    assert main(["cuts", "list", "--group", "bank", "--catalog-uri", sqlite_catalog_uri,
                 "--warehouse", properties["warehouse"]]) == 0
    assert capsys.readouterr().out.startswith("group bank: cut 3 (W=")


def test_retryable_failures_keep_the_run_final_ones_free_the_group(
    pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path, bank: Any, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    load_bank(pg_dsn)
    properties = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    ledger = Ledger(sqlite_catalog_uri)
    assert refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties).cut.cut_id == 1
    journal: set[int] = set()
    real_extract = capture_module.extract_changes

    def source_dies_after_the_pin(conn: psycopg.Connection[Any], *args: Any, **kwargs: Any) -> Any:
        with psycopg.connect(pg_dsn, autocommit=True) as killer:
            killer.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        return real_extract(conn, *args, **kwargs)

    def write() -> None:
        with psycopg.connect(pg_dsn) as conn:
            journal.add(move_money(conn, random.Random(len(journal))))

    # Retryable: the source connection dies between pin and extraction; the run keeps W and claim.
    write()
    monkeypatch.setattr(capture_module, "extract_changes", source_dies_after_the_pin)
    with pytest.raises(SourceUnavailableError, match=r"source database .*terminating connection"):
        refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties, run_key="run-a")
    monkeypatch.setattr(capture_module, "extract_changes", real_extract)
    pinned = ledger.get_run("bank", "run-a")
    assert pinned is not None and pinned.state == RunState.PINNED and pinned.last_error == "AdminShutdown"
    with pytest.raises(GroupBusyError, match=r"run 'run-a' pinned W=.* last failure AdminShutdown"):
        refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties, run_key="run-b")
    retried = refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties, run_key="run-a")
    assert retried.cut.cut_id == 2 and retried.cut.watermark == pinned.watermark
    assert check_cut(CutReader(properties, bank).latest(), journal) == journal

    # Final: run C's W falls behind the slot (someone advanced it by hand) and can never make a cut.
    write()
    monkeypatch.setattr(capture_module, "extract_changes", source_dies_after_the_pin)
    with pytest.raises(SourceUnavailableError):
        refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties, run_key="run-c")
    monkeypatch.setattr(capture_module, "extract_changes", real_extract)
    write()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_replication_slot_advance(slot_name, pg_current_wal_lsn()) FROM pg_replication_slots")
    with pytest.raises(InvalidWatermarkError, match="is behind the slot"):
        refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties, run_key="run-c")
    failed = ledger.get_run("bank", "run-c")
    assert failed is not None and failed.state == RunState.FAILED and failed.last_error == "InvalidWatermarkError"
    write()
    # The slot skipped changes after the last cut: an incremental run would miss them.
    with pytest.raises(SlotError, match=r"starts at .*, after the last cut's W.*Param resync"):
        refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties, run_key="run-d")
    taken_over = refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties, run_key="run-e", resync=True)
    assert taken_over.cut.cut_id == 3 and taken_over.cut.watermark > retried.cut.watermark
    assert check_cut(CutReader(properties, bank).latest(), journal) == journal
    replaced = ledger.get_run("bank", "run-c")
    assert replaced is not None and replaced.replaced_by == "run-e"
    with pytest.raises(RunSupersededError, match=r"run 'run-c' .* failed and was replaced by run run-e"):
        refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties, run_key="run-c")
    assert main(["runs", "list", "--group", "bank", "--catalog-uri", sqlite_catalog_uri, "--json"]) == 0
    outcomes = {run["run_key"]: run["outcome"] for run in json.loads(capsys.readouterr().out)}
    assert outcomes["run-c"] == "replaced by run-e" and outcomes["run-a"] == "published cut 2"


def test_a_run_airflow_will_not_retry_frees_the_group(bank_connections: dict[str, str], pg_dsn: str,
                                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capfd: pytest.CaptureFixture[str], bank: Any) -> None:
    from airflow.sdk import DAG

    from airflow_provider_streambed import Mirror, PythonMember, RefreshGroup, StreambedRefreshGroup

    flag = tmp_path / "flaky-ok"
    monkeypatch.setenv(FLAKY_FLAG, str(flag))
    load_bank(pg_dsn)
    journal = set()
    with psycopg.connect(pg_dsn) as conn:
        journal |= {move_money(conn, random.Random(n)) for n in range(10)}
    group = RefreshGroup(
        name="bank_once", source_conn_id="bank_pg", catalog_conn_id="lakehouse", namespace="once",
        members=[Mirror("accounts"), Mirror("transfers"), bank.member("balances"),
                 PythonMember("counts", "tests.integration.airflow.members:flaky_counts", sources=["transfers"])],
    )
    with DAG("once_e2e", schedule=None, start_date=START, default_args={"retries": 0}) as dag:
        StreambedRefreshGroup(group, **spark_kwargs())
    sync_dags(dag)

    failed = dag.test(logical_date=START)
    assert failed.state == "failed"
    ledger = Ledger(bank_connections["uri"])
    failed_key = make_run_key("once_e2e", failed.run_id)
    released = ledger.get_run("bank_once", failed_key)
    assert released is not None and released.state == RunState.FAILED and released.last_error

    flag.touch()
    with psycopg.connect(pg_dsn) as conn:
        journal |= {move_money(conn, random.Random(n)) for n in range(10, 15)}
    replacement = dag.test(logical_date=START + dt.timedelta(hours=1))
    assert replacement.state == "success", "the next DAG run needed a manual step"
    latest = CutReader(bank_connections, group).latest()
    assert latest.cut_id == 1 and latest.run_key == make_run_key("once_e2e", replacement.run_id)
    assert check_cut(latest, journal) == journal
    replaced = ledger.get_run("bank_once", failed_key)
    assert replaced is not None and replaced.replaced_by == latest.run_key

    capfd.readouterr()
    assert rerun(dag, failed, ["bank_once.refresh_group", "bank_once.publish_cut"]) == "failed"
    logged = "".join(capfd.readouterr())
    assert f"run {failed_key!r} (W={released.watermark}) failed and was replaced by run {latest.run_key}" in logged
    again = ledger.get_run("bank_once", failed_key)
    assert again is not None and again.state == RunState.FAILED and again.replaced_by == latest.run_key
    assert [cut.cut_id for cut in ledger.list_cuts("bank_once")] == [1]
