"""A lost or dropped slot: the next run fails naming the resync, and a resync run copies every table
again into a consistent capture that later runs continue incrementally (issue 15, item 2)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_provider_streambed.capture import run as capture_run_module
from airflow_provider_streambed.capture.names import slot_name
from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.capture.run_records import CaptureResult, CaptureSettings
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import InvalidWatermarkError, SlotError
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.staging import capture_manifest_uri, staging_root
from airflow_provider_streambed.testing.postgres import ThrowawayCluster
from tests.integration.capture.conftest import Row, apply_changes, make_group, publish, read_changes, table_state
from tests.integration.capture.test_faults import SCHEMA, commit_transactions

pytestmark = pytest.mark.slow
Conn = psycopg.Connection[Any]


@pytest.fixture(scope="module")
def lossy_cluster() -> Iterator[ThrowawayCluster]:
    """A cluster whose slots lose their WAL once they hold back more than 1 MB of it."""
    with ThrowawayCluster(settings={"max_slot_wal_keep_size": "'1MB'", "wal_keep_size": "0"}) as cluster:
        yield cluster


def lose_slot(conn: Conn, group: RefreshGroup) -> None:
    """Write and switch WAL segments, with checkpoints, until the group's slot reads ``wal_status = 'lost'``."""
    conn.execute("CREATE TABLE filler (x text)")
    for _ in range(20):
        conn.execute("INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 100)")
        conn.execute("SELECT pg_switch_wal()")
        conn.execute("CHECKPOINT")
        row = conn.execute("SELECT wal_status FROM pg_replication_slots WHERE slot_name = %s",
                           (slot_name(group),)).fetchone()
        if row is not None and row[0] == "lost":
            return
    raise AssertionError("the slot never lost its WAL")


def replay(state: dict[tuple[Any, ...], Row], *results: CaptureResult) -> dict[tuple[Any, ...], Row]:
    """``state`` after each capture's copy and changes, in order."""
    for result in results:
        apply_changes(state, read_changes(result.manifest, "t"), ("id",))
    return state


def test_a_lost_slot_fails_the_run_until_a_resync_copies_every_table_again(
    lossy_cluster: ThrowawayCluster, ledger: Ledger, warehouse: str
) -> None:
    dsn = lossy_cluster.dsn(lossy_cluster.create_database())
    group = make_group("t")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
        commit_transactions(conn, 0, 5)
        first = capture_run(conn, group, ledger, "r0", warehouse)
        publish(conn, ledger, group, first)
        commit_transactions(conn, 100, 10)  # never decoded: their WAL goes with the slot's
        lose_slot(conn, group)
        with pytest.raises(SlotError, match=r"lost required WAL.*Param resync.*streambed resync"):
            capture_run(conn, group, ledger, "r1", warehouse)
        assert ledger.get_run(group.name, "r1") is None  # refused before pinning

        resynced = capture_run(conn, group, ledger, "r2", warehouse, CaptureSettings(resync=True))
        assert isinstance(resynced, CaptureResult) and resynced.bootstrap
        assert resynced.watermark > first.watermark
        assert replay({}, resynced) == table_state(conn, "t", ("id",))  # the copy alone: no write since
        publish(conn, ledger, group, resynced)
        status = conn.execute("SELECT wal_status, confirmed_flush_lsn::text FROM pg_replication_slots "
                              "WHERE slot_name = %s", (slot_name(group),)).fetchone()
        assert status == ("reserved", str(resynced.watermark))
        assert ledger.get_cut(group.name, 1).watermark == first.watermark  # the older cut is kept

        after = set(commit_transactions(conn, 200, 10))
        following = capture_run(conn, group, ledger, "r3", warehouse)
        assert isinstance(following, CaptureResult) and not following.bootstrap
        assert following.manifest.start == resynced.watermark and following.manifest.transactions == len(after)
        assert replay({}, resynced, following) == table_state(conn, "t", ("id",))


def test_a_resync_not_yet_published_blocks_incremental_runs_and_its_retry_reuses_the_copies(
    source: Conn, ledger: Ledger, warehouse: str
) -> None:
    group = make_group("t", name="dropped")
    source.execute(SCHEMA)
    commit_transactions(source, 0, 5)
    publish(source, ledger, group, capture_run(source, group, ledger, "r0", warehouse))
    source.execute("SELECT pg_drop_replication_slot(%s)", (slot_name(group),))  # dropped by someone
    commit_transactions(source, 100, 5)
    with pytest.raises(SlotError, match=r"does not exist.*Param resync"):
        capture_run(source, group, ledger, "r1", warehouse)

    resync = capture_run(source, group, ledger, "r2", warehouse, CaptureSettings(resync=True))
    assert isinstance(resync, CaptureResult)
    commit_transactions(source, 200, 5)
    # Its refresh failed, say: a new incremental run would skip what the old slot never decoded.
    with pytest.raises(SlotError, match=r"starts at .*after the last cut's W.*resync"):
        capture_run(source, group, ledger, "r3", warehouse)
    # The resync's retry, after a crash between the copy and the manifest, reuses copies and W.
    Path(capture_manifest_uri(staging_root(warehouse, group.name, "r2")).removeprefix("file://")).unlink()
    retried = capture_run(source, group, ledger, "r2", warehouse, CaptureSettings(resync=True))
    assert isinstance(retried, CaptureResult) and retried.watermark == resync.watermark
    assert [t.copy_files for t in retried.manifest.tables] == [t.copy_files for t in resync.manifest.tables]
    publish(source, ledger, group, retried)

    following = capture_run(source, group, ledger, "r4", warehouse)
    assert isinstance(following, CaptureResult) and not following.bootstrap
    assert following.manifest.transactions == 5
    assert replay({}, retried, following) == table_state(source, "t", ("id",))


def test_a_slot_re_created_while_a_run_reads_it_fails_that_run(
    source: Conn, ledger: Ledger, warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = make_group("t", name="raced")
    source.execute(SCHEMA)
    commit_transactions(source, 0, 5)
    publish(source, ledger, group, capture_run(source, group, ledger, "r0", warehouse))
    commit_transactions(source, 100, 5)
    real_extract = capture_run_module.extract_changes

    def resync_meanwhile(*args: Any, **kwargs: Any) -> Any:  # what a concurrent resync does to the slot
        source.execute("SELECT pg_drop_replication_slot(%s)", (slot_name(group),))
        commit_transactions(source, 200, 1)
        source.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot_name(group),))
        return real_extract(*args, **kwargs)

    monkeypatch.setattr(capture_run_module, "extract_changes", resync_meanwhile)
    with pytest.raises(SlotError, match=r"moved from .* while the changes were read"):
        capture_run(source, group, ledger, "r1", warehouse)
    monkeypatch.setattr(capture_run_module, "extract_changes", real_extract)
    with pytest.raises(InvalidWatermarkError, match="is behind the slot"):  # final: its W lost changes
        capture_run(source, group, ledger, "r1", warehouse)
