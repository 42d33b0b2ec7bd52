"""The change trigger's ``run()`` against a real PostgreSQL source and a real ledger.

``transfers`` is partitioned: its writes are counted on its partitions.

The trigger polls every 0.2 s; "no event" means none within 15 polls, which outlasts the source's
statistics flush of a closed session (at its exit). A run that published is a cut recorded in
the ledger at the source's current WAL position, as publish records it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from airflow_provider_streambed import Mirror, RefreshGroup
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.triggers.changes import GroupChangesTrigger

POLL = 0.2
QUIET_SECONDS = 15 * POLL
EVENT_TIMEOUT = 60.0
GROUP = RefreshGroup(name="bank", source_conn_id="trigger_source", catalog_conn_id="trigger_catalog",
                     namespace="bank", members=[Mirror("public.accounts"), Mirror("public.transfers")])


@pytest.fixture
def ledger(pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Ledger]:
    """The group's source tables, the two Airflow connections, and the catalog's (empty) ledger."""
    params = conninfo_to_dict(pg_dsn)
    monkeypatch.setenv("AIRFLOW_CONN_TRIGGER_SOURCE", json.dumps({
        "conn_type": "postgres", "host": params["host"], "port": int(str(params["port"])),
        "login": params["user"], "schema": params["dbname"]}))
    catalog_uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_TRIGGER_CATALOG", json.dumps({
        "conn_type": "streambed_catalog", "extra": {"uri": catalog_uri, "warehouse": (tmp_path / "wh").as_uri()}}))
    execute(pg_dsn, "CREATE TABLE accounts (id int PRIMARY KEY, balance bigint);"
                    "CREATE TABLE transfers (id int PRIMARY KEY) PARTITION BY RANGE (id);"
                    "CREATE TABLE transfers_low PARTITION OF transfers FOR VALUES FROM (MINVALUE) TO (1000);"
                    "CREATE TABLE transfers_high PARTITION OF transfers FOR VALUES FROM (1000) TO (MAXVALUE);"
                    "CREATE TABLE audit (id int);"
                    "INSERT INTO accounts SELECT g, 100 FROM generate_series(1, 5) g")
    ledger = Ledger(catalog_uri)
    ledger.create()
    yield ledger
    ledger.engine.dispose()


def execute(dsn: str, sql: str) -> Lsn:
    """Run ``sql`` in its own session (closed, so its statistics are flushed); the WAL insert position after it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql)
        row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    return Lsn.parse(row[0])


def publish(ledger: Ledger, dsn: str, run: str) -> Lsn:
    """Record a cut at the source's current WAL position, as a published run leaves the ledger."""
    watermark = execute(dsn, "SELECT 1")
    with ledger.begin() as connection:
        ledger.record_cut(connection, GROUP.name, run, watermark, {})
    return watermark


class Watch:
    """A trigger running as the triggerer runs it; its event payloads arrive in a queue."""

    def __init__(self, trigger: GroupChangesTrigger) -> None:
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.task = asyncio.create_task(self._consume(trigger))

    async def _consume(self, trigger: GroupChangesTrigger) -> None:
        async for event in trigger.run():
            await self.events.put(event.payload)

    async def next(self, seconds: float) -> dict[str, Any] | None:
        """The next event's payload, or ``None`` when none comes within ``seconds``.

        Raises:
            Exception: whatever ended the trigger (a trigger that died fires nothing, which is no quiet).
        """
        getting = asyncio.ensure_future(self.events.get())
        done, _ = await asyncio.wait([getting, self.task], timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        if getting in done:
            return getting.result()
        getting.cancel()
        if self.task in done:
            raise AssertionError("the trigger ended") from self.task.exception()
        return None


@asynccontextmanager
async def watching(trigger: GroupChangesTrigger | None = None) -> AsyncIterator[Watch]:
    """``trigger`` (default: a new one of the group) running until the block ends."""
    watch = Watch(trigger or GroupChangesTrigger.for_group(GROUP, poll_interval=POLL))
    try:
        yield watch
    finally:
        watch.task.cancel()
        await asyncio.gather(watch.task, return_exceptions=True)


@pytest.mark.slow
def test_the_trigger_fires_once_per_new_commit_state_and_restarts_from_the_ledger(pg_dsn: str, ledger: Ledger) -> None:
    async def scenario() -> None:
        first_w = publish(ledger, pg_dsn, "run-1")
        async with watching() as events:
            assert await events.next(QUIET_SECONDS) is None  # a quiet source
            execute(pg_dsn, "INSERT INTO audit VALUES (1)")  # not a group table: WAL moves, no event
            assert await events.next(QUIET_SECONDS) is None
            committed = execute(pg_dsn, "UPDATE accounts SET balance = balance + 1 WHERE id = 1")
            event = await events.next(EVENT_TIMEOUT)
            assert event is not None and event["group"] == "bank" and event["last_cut_lsn"] == str(first_w)
            assert Lsn.parse(event["lsn"]) >= committed and "public.accounts" in event["reason"]
            assert await events.next(QUIET_SECONDS) is None  # the same state: no second event
            execute(pg_dsn, "INSERT INTO transfers VALUES (1)")
            again = await events.next(EVENT_TIMEOUT)
            assert again is not None and Lsn.parse(again["lsn"]) > Lsn.parse(event["lsn"])
            assert "public.transfers" in again["reason"]
            execute(pg_dsn, "TRUNCATE transfers")
            truncated = await events.next(EVENT_TIMEOUT)
            assert truncated is not None and "public.transfers" in truncated["reason"]
        async with watching() as events:  # a restart: the changes after cut 1 are not in a cut
            restarted = await events.next(EVENT_TIMEOUT)
            assert restarted is not None and restarted["last_cut_lsn"] == str(first_w)
            assert await events.next(QUIET_SECONDS) is None
        second_w = publish(ledger, pg_dsn, "run-2")  # the run it caused published them
        async with watching() as events:
            assert await events.next(QUIET_SECONDS) is None
            execute(pg_dsn, "DELETE FROM accounts WHERE id = 5")
            event = await events.next(EVENT_TIMEOUT)
            assert event is not None and event["last_cut_lsn"] == str(second_w)

    asyncio.run(scenario())
