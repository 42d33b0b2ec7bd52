"""Capture fault from DESIGN section 8: a PostgreSQL restart between pin and extraction.

(A duplicate trigger, a second run of the group while one is pending, is refused or supersedes
it: ``tests/unit/ledger/test_runs.py`` and ``tests/integration/test_ledger.py``.)

The truth is a journal table: every transaction the test commits writes its xid there, so an
aborted transaction (killed by the restart) leaves none. The WAL insert position read after the
last commit before the pin and before the first commit after it brackets W.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from airflow_provider_streambed.capture import run as capture_module
from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.capture.run_records import CaptureResult
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.staging import COMMIT_LSN
from airflow_provider_streambed.testing.postgres import ThrowawayCluster
from tests.integration.capture.conftest import Row, apply_changes, make_group, publish, read_changes, table_state, xids

pytestmark = pytest.mark.slow
Conn = psycopg.Connection[Any]
SCHEMA = "CREATE TABLE t (id int PRIMARY KEY, v int); CREATE TABLE journal (xid bigint PRIMARY KEY)"


@pytest.fixture(scope="module")
def private_cluster() -> Iterator[ThrowawayCluster]:
    """A cluster of this module's own: restarting it cannot break other tests' connections."""
    with ThrowawayCluster() as cluster:
        yield cluster


def insert_lsn(conn: Conn) -> Lsn:
    row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    return Lsn.parse(row[0])


def commit_transactions(conn: Conn, first_id: int, count: int) -> list[int]:
    """``count`` transactions, each inserting two rows, updating one and journaling its xid."""
    committed = []
    for n in range(first_id, first_id + count):
        with conn.transaction():
            row = conn.execute("SELECT txid_current()").fetchone()
            assert row is not None
            conn.execute("INSERT INTO t VALUES (%s, 0), (%s, 0)", (2 * n, 2 * n + 1))
            conn.execute("UPDATE t SET v = v + 1 WHERE id = %s", (2 * n,))
            conn.execute("INSERT INTO journal VALUES (%s)", (row[0],))
        committed.append(int(row[0]))
    return committed


def check_exact(result: CaptureResult, expected: set[int], rows: int) -> None:
    """The capture holds exactly ``expected`` transactions, whole (``rows`` changes), all below its W."""
    changes = read_changes(result.manifest, "t")
    assert xids(result.manifest) == expected
    assert result.manifest.transactions == len(expected)
    assert changes.num_rows == rows  # no transaction partial
    assert all(lsn < result.watermark.value for lsn in changes[COMMIT_LSN].to_pylist())


def test_postgres_restart_between_pin_and_extraction(
    private_cluster: ThrowawayCluster, ledger: Ledger, warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = private_cluster.dsn(private_cluster.create_database())
    group = make_group("t")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
        bootstrapped = set(commit_transactions(conn, 0, 5))
        first = capture_run(conn, group, ledger, "r0", warehouse)
        publish(conn, ledger, group, first)
        before_pin = set(commit_transactions(conn, 100, 40))
        last_before = insert_lsn(conn)
    open_conn = psycopg.connect(dsn, autocommit=True)  # a transaction open across the pin, killed by the restart
    open_conn.execute("BEGIN")
    open_conn.execute("INSERT INTO t VALUES (-1, -1)")
    open_conn.execute("INSERT INTO journal VALUES (txid_current())")
    with psycopg.connect(dsn, autocommit=True) as prepared:  # a prepared one survives it and commits after W
        prepared.execute("BEGIN")
        prepared.execute("INSERT INTO t VALUES (-2, -2)")
        prepared.execute("INSERT INTO journal VALUES (txid_current())")
        prepared.execute("PREPARE TRANSACTION 'across_the_restart'")

    real_extract = capture_module.extract_changes
    restarts = []

    def restart_then_extract(*args: Any, **kwargs: Any) -> Any:
        restarts.append(ledger.get_run(group.name, "r1"))  # W is pinned before extraction starts
        private_cluster.restart()
        return real_extract(*args, **kwargs)

    monkeypatch.setattr(capture_module, "extract_changes", restart_then_extract)
    with psycopg.connect(dsn) as conn, pytest.raises(psycopg.OperationalError):
        capture_run(conn, group, ledger, "r1", warehouse)
    monkeypatch.setattr(capture_module, "extract_changes", real_extract)
    pinned = ledger.get_run(group.name, "r1")
    assert len(restarts) == 1 and restarts[0] is not None and pinned is not None
    assert pinned.watermark == restarts[0].watermark >= last_before
    with pytest.raises(psycopg.OperationalError):
        open_conn.execute("COMMIT")  # its backend died with the restart: rolled back
    open_conn.close()

    with psycopg.connect(dsn, autocommit=True) as conn:
        after_pin = set(commit_transactions(conn, 200, 20))  # committed after the restart, so after W
        retried = capture_run(conn, group, ledger, "r1", warehouse)
        assert retried.watermark == pinned.watermark
        check_exact(retried, before_pin, 3 * len(before_pin))  # two inserts and an update each
        publish(conn, ledger, group, retried)
        conn.execute("COMMIT PREPARED 'across_the_restart'")
        following = capture_run(conn, group, ledger, "r2", warehouse)
        assert following.watermark > retried.watermark
        journal = {xid for (xid,) in conn.execute("SELECT xid FROM journal")}
        prepared_xid = journal - bootstrapped - before_pin - after_pin
        assert len(prepared_xid) == 1  # the open transaction journaled nothing: it was rolled back
        check_exact(following, after_pin | prepared_xid, 3 * len(after_pin) + 1)
        state: dict[tuple[Any, ...], Row] = {}
        for result in (first, retried, following):
            apply_changes(state, read_changes(result.manifest, "t"), ("id",))
        assert (-1,) not in state and (-2,) in state
        assert state == table_state(conn, "t", ("id",))  # nothing lost, nothing repeated
