"""Captured changes against the source's truth: DML kinds, TOAST, NULLs, retries, open transactions."""

from __future__ import annotations

import os
import threading
from typing import Any

import psycopg
import pyarrow as pa
import pytest

from airflow_provider_streambed.capture import copy as copy_module
from airflow_provider_streambed.capture import partition_readings as partition_readings_module
from airflow_provider_streambed.capture import run as capture_run_module
from airflow_provider_streambed.capture.bootstrap import CopyOptions
from airflow_provider_streambed.capture.resyncs import LastCutMirror
from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.capture.run_records import CaptureResult, CaptureSettings
from airflow_provider_streambed.exceptions import WatermarkError
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.staging import OP, TOAST_MARKER_PREFIX, TableCapture
from tests.integration.capture.conftest import (
    Row,
    apply_changes,
    make_group,
    publish,
    read_changes,
    table_state,
    xids,
)

pytestmark = pytest.mark.slow
Conn = psycopg.Connection[Any]
BIG = "".join(f"{i:05d}-chunk-of-a-long-text-value " for i in range(2000))  # ~60 kB: stored out of line


def test_a_partitioned_table_is_copied_in_ranges_and_its_partitions_changes_captured(
    source: Conn, ledger: Ledger, warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(copy_module, "MIN_RANGE_BLOCKS", 2)  # split these small partitions
    source.execute("CREATE TABLE pt (id int PRIMARY KEY, v int) PARTITION BY RANGE (id)")
    source.execute("CREATE TABLE pt_low PARTITION OF pt FOR VALUES FROM (0) TO (100)")
    source.execute("CREATE TABLE pt_high PARTITION OF pt FOR VALUES FROM (100) TO (10000)")
    source.execute("INSERT INTO pt SELECT g, g FROM generate_series(0, 4999) g")
    group = make_group("pt")
    first = capture_run(source, group, ledger, "r1", warehouse, CaptureSettings(copy=CopyOptions(parallelism=2)))
    assert isinstance(first, CaptureResult) and len(first.manifest.tables[0].copy_files) > 1
    state: dict[tuple[Any, ...], Row] = {}
    apply_changes(state, read_changes(first.manifest, "pt"), ("id",))
    assert state == table_state(source, "pt", ("id",))
    publish(source, ledger, group, first)
    source.execute("UPDATE pt SET v = -1 WHERE id IN (5, 150)")  # one row in each partition
    source.execute("UPDATE pt SET id = 5007 WHERE id = 7")  # moves the row to the other partition
    source.execute("DELETE FROM pt WHERE id = 160")
    second = capture_run(source, group, ledger, "r2", warehouse)
    assert second.manifest.tables[0].changes >= 4
    apply_changes(state, read_changes(second.manifest, "pt"), ("id",))
    assert state == table_state(source, "pt", ("id",))


def test_a_partitioned_tables_changes_carry_old_rows_while_no_partitions_identity_changed(
    source: Conn, ledger: Ledger, warehouse: str, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Old rows marked whole are logged by each partition's identity: the capture promises them
    (``old_images``) only when every partition was FULL with no identity changed since the last
    cut (as its snapshot recorded them) until after W, and records a reading for the next run
    only when it was taken before W."""
    source.execute("CREATE TABLE pf (id int PRIMARY KEY, v text) PARTITION BY RANGE (id)")
    source.execute("CREATE TABLE pf_low PARTITION OF pf FOR VALUES FROM (0) TO (100)")
    source.execute("CREATE TABLE pf_high PARTITION OF pf FOR VALUES FROM (100) TO (1000)")
    for table in ("pf", "pf_low", "pf_high"):
        source.execute(f"ALTER TABLE {table} REPLICA IDENTITY FULL")
    source.execute("INSERT INTO pf SELECT g, 'v' || g FROM generate_series(0, 199) g")
    group = make_group("pf")
    columns = pa.schema([pa.field("id", pa.int32()), pa.field("v", pa.string())])
    state: dict[tuple[Any, ...], Row] = {}
    last: dict[str, LastCutMirror] = {}

    def run(key: str, now: bool = True) -> TableCapture:
        """Capture and publish run ``key``; its changes bring the state up to the source's (``now``)."""
        result = capture_run(source, group, ledger, key, warehouse, previous=last)
        assert isinstance(result, CaptureResult)
        apply_changes(state, read_changes(result.manifest, "pf"), ("id",))
        assert (state == table_state(source, "pf", ("id",))) == now, key
        publish(source, ledger, group, result)
        captured = result.manifest.tables[0]
        last["pf"] = LastCutMirror.of(columns, captured.source_record())
        return captured

    first = run("r1")
    assert first.leaves.count(":f:") == 2
    source.execute("UPDATE pf SET v = 'x' WHERE id IN (5, 150)")
    source.execute("DELETE FROM pf WHERE id = 151")
    assert run("r2").old_images
    source.execute("ALTER TABLE pf_low REPLICA IDENTITY DEFAULT")
    source.execute("DELETE FROM pf WHERE id = 6")  # its old row logged with the key only, marked whole
    source.execute("UPDATE pf SET id = 6 WHERE id = 9")  # a key change: the same
    source.execute("ALTER TABLE pf_low REPLICA IDENTITY FULL")  # FULL again when the run begins
    source.execute("UPDATE pf SET v = 'y' WHERE id = 152")
    third = run("r3")
    assert not third.old_images and third.leaves.count(":f:") == 2
    source.execute("UPDATE pf SET v = 'z' WHERE id IN (7, 153)")
    assert run("r4").old_images  # the identities held since the last cut read them

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("killed after the pin")

    monkeypatch.setattr(capture_run_module, "extract_changes", fail)
    source.execute("UPDATE pf SET v = 'k' WHERE id = 10")
    with pytest.raises(RuntimeError):
        run("r5")  # pins W, then fails
    monkeypatch.undo()
    source.execute("ALTER TABLE pf_high REPLICA IDENTITY DEFAULT")
    source.execute("DELETE FROM pf WHERE id = 154")  # after r5's W: in r6's range, with the key only
    source.execute("ALTER TABLE pf_high REPLICA IDENTITY FULL")
    retried = run("r5", now=False)  # described after its W: its reading may not vouch for r6's range
    assert not retried.old_images and retried.leaves == ""
    assert not run("r6").old_images
    source.execute("UPDATE pf SET v = 'w' WHERE id = 8")
    assert run("r7").old_images
    monkeypatch.setattr(partition_readings_module, "SETTLE_SECONDS", 0.2)
    with psycopg.connect(pg_dsn) as other:  # a transaction older than the pin, still open after it
        other.execute("SELECT pg_current_xact_id()")
        source.execute("UPDATE pf SET v = 'v' WHERE id = 8")
        unsettled = run("r8")
    assert not unsettled.old_images and unsettled.leaves
    source.execute("UPDATE pf SET v = 'u' WHERE id = 8")
    assert run("r9").old_images


def test_dml_kinds_toast_and_nulls_replay_to_the_source_state(source: Conn, ledger: Ledger, warehouse: str) -> None:
    source.execute("CREATE TABLE t (id int PRIMARY KEY, small text, big text, n int)")
    source.execute("ALTER TABLE t ALTER COLUMN big SET STORAGE EXTERNAL")
    source.execute("INSERT INTO t VALUES (1, 'a', %s, 1), (2, NULL, NULL, NULL), (3, 'c', %s, 3)", (BIG, BIG + "x"))
    group = make_group("t")
    first = capture_run(source, group, ledger, "r1", warehouse)
    state: dict[tuple[Any, ...], Row] = {}
    apply_changes(state, read_changes(first.manifest, "t"), ("id",))
    publish(source, ledger, group, first)
    source.execute("UPDATE t SET small = 'changed', n = NULL WHERE id = 1")  # big stays: unchanged TOAST
    source.execute("UPDATE t SET id = 10 WHERE id = 2")  # key update
    source.execute("DELETE FROM t WHERE id = 3")
    source.execute("INSERT INTO t VALUES (4, NULL, %s, NULL)", (BIG,))
    second = capture_run(source, group, ledger, "r2", warehouse)
    changes = read_changes(second.manifest, "t")
    marked = [row for row in changes.to_pylist() if row[TOAST_MARKER_PREFIX + "big"]]
    assert [(row["id"], row["big"], row[OP]) for row in marked] == [(1, None, "U")]
    apply_changes(state, changes, ("id",))
    assert state == table_state(source, "t", ("id",))
    publish(source, ledger, group, second)
    source.execute("BEGIN")
    source.execute("INSERT INTO t VALUES (5, 'e', NULL, 5)")
    source.execute("TRUNCATE t")
    source.execute("INSERT INTO t VALUES (6, 'f', NULL, 6)")
    source.execute("COMMIT")
    third = capture_run(source, group, ledger, "r3", warehouse)
    assert read_changes(third.manifest, "t")[OP].to_pylist() == ["I", "T", "I"]
    apply_changes(state, read_changes(third.manifest, "t"), ("id",))
    assert state == table_state(source, "t", ("id",)) == {(6,): {"id": 6, "small": "f", "big": None, "n": 6}}


def test_retry_reuses_w_and_writes_the_same_segments(source: Conn, ledger: Ledger, warehouse: str) -> None:
    source.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    group = make_group("t")
    publish(source, ledger, group, capture_run(source, group, ledger, "r1", warehouse))
    source.execute("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 500) g")
    source.execute("UPDATE t SET v = 'w' WHERE id % 7 = 0")
    first = capture_run(source, group, ledger, "r2", warehouse)
    source.execute("INSERT INTO t VALUES (1000, 'after the pin')")
    again = capture_run(source, group, ledger, "r2", warehouse)
    assert again.watermark == first.watermark and again.manifest == first.manifest
    before = read_changes(first.manifest, "t")
    os.remove(first.manifest_uri.removeprefix("file://"))  # a crash before the manifest: extract again at W
    redone = capture_run(source, group, ledger, "r2", warehouse)
    assert redone.watermark == first.watermark and redone.manifest == first.manifest
    assert read_changes(redone.manifest, "t").equals(before)
    assert before.num_rows == 500 + 71
    publish(source, ledger, group, redone)
    with pytest.raises(WatermarkError, match=r"group 'g', run 'r2': already published as cut 2 .*not captured again"):
        capture_run(source, group, ledger, "r2", warehouse)  # a cleared, published run: no second capture


def test_async_commits_before_the_pin_are_not_lost(source: Conn, ledger: Ledger, warehouse: str,
                                                    pg_dsn: str) -> None:
    source.execute("CREATE TABLE t (id int PRIMARY KEY)")
    group = make_group("t")
    publish(source, ledger, group, capture_run(source, group, ledger, "r0", warehouse))
    committed: list[int] = []
    stop = threading.Event()

    def write() -> None:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("SET synchronous_commit = off")
            next_id = 0
            while not stop.is_set():
                next_id += 1
                conn.execute("INSERT INTO t VALUES (%s)", (next_id,))
                committed.append(next_id)

    writer = threading.Thread(target=write)
    writer.start()
    seen: set[int] = set()
    try:
        for run in range(1, 6):
            before = set(committed)
            result = capture_run(source, group, ledger, f"r{run}", warehouse)
            ids = set(read_changes(result.manifest, "t")["id"].to_pylist())
            assert before - seen <= ids, "a commit made before the pin is missing"
            assert not seen & ids
            seen |= ids
            publish(source, ledger, group, result)
    finally:
        stop.set()
        writer.join()
    last = capture_run(source, group, ledger, "r-last", warehouse)
    seen |= set(read_changes(last.manifest, "t")["id"].to_pylist())
    assert seen == set(committed)


def test_open_and_prepared_transactions_across_the_pin(source: Conn, ledger: Ledger, warehouse: str,
                                                       pg_dsn: str) -> None:
    source.execute("CREATE TABLE t (id int PRIMARY KEY, who text)")
    group = make_group("t")
    publish(source, ledger, group, capture_run(source, group, ledger, "r0", warehouse))
    with psycopg.connect(pg_dsn, autocommit=True) as open_conn, psycopg.connect(pg_dsn, autocommit=True) as prep:
        open_conn.execute("BEGIN")
        open_conn.execute("INSERT INTO t VALUES (1, 'open')")
        prep.execute("BEGIN")
        prep.execute("INSERT INTO t VALUES (2, 'prepared')")
        prep.execute("PREPARE TRANSACTION 'streambed_2pc'")
        open_conn.execute("INSERT INTO t VALUES (3, 'open')")
        source.execute("INSERT INTO t VALUES (4, 'committed')")
        result = capture_run(source, group, ledger, "r1", warehouse, CaptureSettings(holdback_warn_seconds=0))
        open_conn.execute("INSERT INTO t VALUES (5, 'open')")
        open_conn.execute("COMMIT")
        source.execute("COMMIT PREPARED 'streambed_2pc'")
    assert read_changes(result.manifest, "t")["id"].to_pylist() == [4]
    assert result.holdback.count == 2 and result.summary()["holdback_count"] == 2
    assert result.summary()["watermark_lsn"] == result.summary()["watermark"] == str(result.watermark)
    assert sorted(detail["prepared"] for detail in result.holdback.details) == [False, True]
    assert ledger.get_run("g", "r1").holdback == (2, result.holdback.oldest_age_seconds)  # the page shows it
    publish(source, ledger, group, result)
    following = capture_run(source, group, ledger, "r2", warehouse)
    assert sorted(read_changes(following.manifest, "t")["id"].to_pylist()) == [1, 2, 3, 5]
    assert len(xids(following.manifest)) == 2 == following.manifest.transactions


def test_the_run_records_when_its_newest_transaction_committed(source: Conn, ledger: Ledger, warehouse: str) -> None:
    source.execute("CREATE TABLE t (id int PRIMARY KEY)")
    group = make_group("t")
    publish(source, ledger, group, capture_run(source, group, ledger, "r0", warehouse))
    before = source.execute("SELECT clock_timestamp()").fetchone()[0]
    source.execute("INSERT INTO t VALUES (1)")
    source.execute("INSERT INTO t VALUES (2)")
    after = source.execute("SELECT clock_timestamp()").fetchone()[0]
    capture_run(source, group, ledger, "r1", warehouse)
    run = ledger.get_run(group.name, "r1")
    assert run is not None and run.newest_commit_at is not None
    assert before <= run.newest_commit_at <= after <= run.pinned_at  # the second insert's commit, before W
    assert ledger.get_run(group.name, "r0").newest_commit_at is None  # the first run kept no transaction
