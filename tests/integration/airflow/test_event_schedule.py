"""The event-scheduled bank example in a real Airflow: its Asset's watcher is the change trigger.

No triggerer process runs: the test does its part. It rebuilds the trigger from the row the DAG
processor stored (as the triggerer does), runs it, and hands its event to Airflow
(``Trigger.submit_event``), which queues the DAG for the scheduler. The DAG then runs with
``dag.test()``; after its cut, a commit fires the trigger again, placed against that cut.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_provider_streambed.examples.bank import load_bank, move_money
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.triggers.changes import GroupChangesTrigger
from tests.integration.airflow.conftest import sync_dags
from tests.integration.triggers.test_changes import EVENT_TIMEOUT, watching

pytestmark = pytest.mark.slow
DAGS = Path(__file__).resolve().parents[3] / "dags"


def stored_trigger(dag_id: str) -> tuple[int, GroupChangesTrigger]:
    """The id of the trigger watching ``dag_id``'s schedule Asset, and the trigger rebuilt from its row."""
    from airflow.models.asset import AssetModel, DagScheduleAssetReference
    from airflow.sdk.module_loading import import_string
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_provider_streambed.compat.airflow import decode_trigger_kwargs

    with create_session() as session:
        asset = session.scalars(select(AssetModel).join(DagScheduleAssetReference)
                                .where(DagScheduleAssetReference.dag_id == dag_id)).one()
        [row] = asset.triggers
        trigger = import_string(row.classpath)(**{k: decode_trigger_kwargs(v) for k, v in row.kwargs.items()})
        return row.id, trigger


def queued_runs(dag_id: str) -> list[Any]:
    """The asset events queued for ``dag_id`` (the scheduler creates a run from them)."""
    from airflow.models.asset import AssetDagRunQueue
    from airflow.utils.session import create_session
    from sqlalchemy import select


    with create_session() as session:
        return list(session.scalars(select(AssetDagRunQueue).where(AssetDagRunQueue.target_dag_id == dag_id)))


def test_a_commit_queues_the_event_scheduled_dag_through_its_asset_watcher(
    bank_connections: dict[str, str], pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.models.dag import DagModel
    from airflow.models.trigger import Trigger
    from airflow.triggers.base import TriggerEvent
    from airflow.utils.session import create_session

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    sys.path.insert(0, str(DAGS))
    from example_bank_events import bank_live, dag

    load_bank(pg_dsn)
    sync_dags(dag)
    with create_session() as session:  # the DAG processor registers watchers of unpaused DAGs only
        session.get(DagModel, dag.dag_id).is_paused = False
    sync_dags(dag)
    trigger_id, trigger = stored_trigger(dag.dag_id)
    assert trigger.serialize() == GroupChangesTrigger.for_group(bank_live).serialize()
    assert "password" not in str(trigger.serialize()) and "host" not in str(trigger.serialize())

    async def first_event() -> dict[str, Any] | None:
        async with watching(trigger) as events:
            return await events.next(EVENT_TIMEOUT)

    event = asyncio.run(first_event())  # the group has no cut yet: its first run copies the tables
    assert event is not None and event["last_cut_lsn"] is None
    Trigger.submit_event(trigger_id=trigger_id, event=TriggerEvent(event))
    assert [queued.target_dag_id for queued in queued_runs(dag.dag_id)] == [dag.dag_id]

    assert dag.test().state == "success"
    cut = CutReader(bank_connections, bank_live).latest()
    with psycopg.connect(pg_dsn) as conn:
        move_money(conn, random.Random(3))

    async def after_the_cut() -> dict[str, Any] | None:
        async with watching(stored_trigger(dag.dag_id)[1]) as events:
            return await events.next(EVENT_TIMEOUT)

    again = asyncio.run(after_the_cut())  # a restarted trigger: from the ledger's cut 1
    assert again is not None and again["last_cut_lsn"] == str(cut.watermark)
    assert Lsn.parse(again["lsn"]) > cut.watermark


def test_a_deferrable_capture_waits_in_the_triggerer_then_publishes(
    bank_connections: dict[str, str], pg_dsn: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``dag.test()`` runs the deferred trigger in line, as a triggerer would, then resumes the capture."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    from airflow.sdk import DAG

    from airflow_provider_streambed import StreambedRefreshGroup
    sys.path.insert(0, str(DAGS))
    from example_bank_events import bank_live

    with DAG("streambed_bank_deferrable", schedule=None, max_active_runs=1) as dag:
        StreambedRefreshGroup(bank_live, capture_options={"deferrable": True, "poll_interval": 0.5})
    load_bank(pg_dsn)
    with psycopg.connect(pg_dsn) as conn:
        move_money(conn, random.Random(3))  # transfers is not empty at the first cut (an empty one merges by Spark)
    sync_dags(dag)
    assert dag.test().state == "success"  # no cut yet: the trigger fires at once
    with psycopg.connect(pg_dsn) as conn:
        transfer = move_money(conn, random.Random(4))
    caplog.clear()
    assert dag.test().state == "success"
    assert "resumed at source LSN" in caplog.text
    cuts = CutReader(bank_connections, bank_live).list()
    assert [cut.cut_id for cut in cuts] == [1, 2]
    assert transfer in cuts[1].to_arrow("transfers").column("id").to_pylist()
