"""A capture whose slot creation or publication DDL waits for other sessions says whom it waits
for and gives up in time, leaving no slot behind; the retry succeeds once they ended.

Each blocker is cleaned up in ``finally``: a prepared transaction left behind would hold every
later slot creation of the session's cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from airflow_provider_streambed.capture import waits
from airflow_provider_streambed.capture.names import publication_name, slot_name
from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.capture.run_records import CaptureResult, CaptureSettings
from airflow_provider_streambed.exceptions import CaptureError
from airflow_provider_streambed.ledger import Ledger
from tests.integration.capture.conftest import make_group

pytestmark = pytest.mark.slow

GID = "streambed-test-prepared"


@pytest.fixture(autouse=True)
def quick_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waits, "LOG_INTERVAL_SECONDS", 0.3)


@pytest.fixture
def accounts(source: psycopg.Connection[Any]) -> None:
    source.execute("CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)")
    source.execute("INSERT INTO accounts VALUES (1, 10), (2, 20)")


@contextmanager
def prepared_transaction(dsn: str) -> Iterator[None]:
    """A prepared (two-phase) transaction that inserted a row, rolled back on exit if still there."""
    with psycopg.connect(dsn) as blocker:
        blocker.execute("INSERT INTO accounts VALUES (3, 30)")
        blocker.execute(f"PREPARE TRANSACTION '{GID}'")
    try:
        yield
    finally:
        with psycopg.connect(dsn, autocommit=True) as cleanup:
            if cleanup.execute("SELECT 1 FROM pg_prepared_xacts WHERE gid = %s", (GID,)).fetchone():
                cleanup.execute(f"ROLLBACK PREPARED '{GID}'")


def slots(source: psycopg.Connection[Any]) -> list[str]:
    return [row[0] for row in source.execute("SELECT slot_name FROM pg_replication_slots").fetchall()]


def test_a_prepared_transaction_fails_the_first_capture_in_time_and_names_it(
    source: psycopg.Connection[Any], pg_dsn: str, ledger: Ledger, warehouse: str, accounts: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    group = make_group("accounts")
    with prepared_transaction(pg_dsn):
        with pytest.raises(CaptureError, match=(
                rf"group 'g': creating slot {slot_name(group)} gave up after waiting 2 s for: prepared transaction "
                rf"gid='{GID}' xid=\d+ \(owner \w+, database \w+\), \d+ s old; nothing was created")):
            capture_run(source, group, ledger, "r1", warehouse, CaptureSettings(slot_create_timeout_seconds=2))
        assert f"creating slot {slot_name(group)} has waited" in caplog.text and GID in caplog.text
        assert slot_name(group) not in slots(source)
        source.execute(f"COMMIT PREPARED '{GID}'")
    captured = capture_run(source, group, ledger, "r1", warehouse, CaptureSettings(slot_create_timeout_seconds=2))
    assert isinstance(captured, CaptureResult) and captured.manifest.tables[0].copied_rows == 3


def test_an_open_write_transaction_is_named_by_its_session(
    source: psycopg.Connection[Any], pg_dsn: str, ledger: Ledger, warehouse: str, accounts: None
) -> None:
    group = make_group("accounts")
    with psycopg.connect(pg_dsn, application_name="streambed-blocker") as blocker:
        blocker.execute("UPDATE accounts SET balance = 11 WHERE id = 1")  # holds an xid, not committed
        pid = blocker.info.backend_pid
        with pytest.raises(CaptureError, match=rf"pid {pid} xid=\d+ \(user \w+, client [\d.:]+, "
                                               r"application streambed-blocker, idle in transaction\), \d+ s old"):
            capture_run(source, group, ledger, "r1", warehouse, CaptureSettings(slot_create_timeout_seconds=1))
        blocker.rollback()
    assert slot_name(group) not in slots(source)
    assert isinstance(capture_run(source, group, ledger, "r1", warehouse), CaptureResult)


def test_publication_ddl_waiting_for_a_table_lock_names_the_holder(
    source: psycopg.Connection[Any], pg_dsn: str, ledger: Ledger, warehouse: str, accounts: None
) -> None:
    group = make_group("accounts")
    with psycopg.connect(pg_dsn, application_name="streambed-locker") as blocker:
        blocker.execute("LOCK TABLE accounts IN SHARE UPDATE EXCLUSIVE MODE")  # no xid: only the DDL waits
        pid = blocker.info.backend_pid
        with pytest.raises(CaptureError, match=rf"creating publication {publication_name(group)} gave up after "
                                               rf"waiting 1 s for: pid {pid} .*application streambed-locker"):
            capture_run(source, group, ledger, "r1", warehouse, CaptureSettings(slot_create_timeout_seconds=1))
        blocker.rollback()
    assert source.execute("SELECT count(*) FROM pg_publication WHERE pubname = %s",
                          (publication_name(group),)).fetchone() == (0,)
    assert isinstance(capture_run(source, group, ledger, "r1", warehouse), CaptureResult)



def test_waiting_for_the_transactions_running_now_takes_no_xid_of_its_own(source: psycopg.Connection[Any],
                                                                         pg_dsn: str) -> None:
    """An xid of its own would write a commit record: a quiet source would never give an
    unchanged run again."""
    def next_xid() -> str:
        row = source.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text").fetchone()
        assert row is not None
        return str(row[0])

    before = next_xid()
    assert waits.older_transactions_ended(source, 1.0)
    assert next_xid() == before
    with psycopg.connect(pg_dsn) as other:  # an open transaction holding an xid
        other.execute("SELECT pg_current_xact_id()")
        assert not waits.older_transactions_ended(source, 0.2)
        other.commit()
        assert waits.older_transactions_ended(source, 1.0)
