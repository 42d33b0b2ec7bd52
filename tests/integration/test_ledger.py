"""The run ledger on real SQLite and PostgreSQL catalog databases."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import create_engine
from sqlalchemy.exc import IntegrityError

from airflow_provider_streambed.exceptions import CutExpiredError, CutNotFoundError, LedgerError
from airflow_provider_streambed.ledger import CutMember, Ledger, RunState
from airflow_provider_streambed.lsn import Lsn

pytestmark = pytest.mark.slow


@pytest.fixture
def ledger(catalog_uri: str) -> Ledger:
    ledger = Ledger(catalog_uri)
    ledger.create()
    return ledger


def member(name: str, snapshot_id: int) -> CutMember:
    return CutMember(name, f"bank.{name}", snapshot_id, f"file:///w/bank/{name}/metadata/{snapshot_id}.json")


def test_create_is_idempotent(catalog_uri: str) -> None:
    Ledger(catalog_uri).create()
    Ledger(catalog_uri).create()


def test_concurrent_creates(catalog_uri: str) -> None:
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: Ledger(catalog_uri).create(), range(4)))
    assert Ledger(catalog_uri).list_cuts("bank") == []


def test_a_ledger_of_the_first_release_gains_the_new_run_columns(catalog_uri: str) -> None:
    old_runs = (
        "CREATE TABLE streambed_runs (group_name VARCHAR(64) NOT NULL, run_key VARCHAR(200) NOT NULL, "
        "watermark NUMERIC(20, 0) NOT NULL, state VARCHAR(16) NOT NULL, pinned_at TIMESTAMP NOT NULL, "
        "updated_at TIMESTAMP NOT NULL, PRIMARY KEY (group_name, run_key))"
    )
    with create_engine(catalog_uri).begin() as connection:
        connection.exec_driver_sql(old_runs)
        connection.exec_driver_sql(
            "INSERT INTO streambed_runs VALUES ('bank', 'old', 100, 'pinned', '2026-01-01 00:00:00', "
            "'2026-01-01 00:00:00')"
        )
    ledger = Ledger(catalog_uri)
    ledger.create()
    ledger.create()
    old = ledger.get_run("bank", "old")
    assert old is not None and old.state == RunState.PINNED and old.last_error is None and old.dag_run is None
    ledger.record_failure("bank", "old", OSError("down"), release=True)
    failed = ledger.get_run("bank", "old")
    assert failed is not None and failed.state == RunState.FAILED and failed.last_error == "OSError"


def test_pin_keeps_the_first_watermark(ledger: Ledger) -> None:
    first = ledger.pin_run("bank", "run-1", Lsn.parse("0/100"))
    again = ledger.pin_run("bank", "run-1", Lsn.parse("0/200"))
    assert first.watermark == again.watermark == Lsn.parse("0/100")
    assert again.state is RunState.PINNED
    assert ledger.pin_run("other", "run-1", Lsn.parse("0/300")).watermark == Lsn.parse("0/300")
    assert ledger.get_run("bank", "missing") is None


def test_concurrent_pins_of_one_run_agree(catalog_uri: str) -> None:
    Ledger(catalog_uri).create()
    start = threading.Barrier(8)

    def pin(index: int) -> Lsn:
        ledger = Ledger(catalog_uri)
        start.wait()
        return ledger.pin_run("bank", "run-1", Lsn(1000 + index)).watermark

    with ThreadPoolExecutor(8) as pool:
        pinned = set(pool.map(pin, range(8)))
    assert len(pinned) == 1
    assert Ledger(catalog_uri).get_run("bank", "run-1").watermark in pinned  # type: ignore[union-attr]


def test_run_state(ledger: Ledger) -> None:
    ledger.pin_run("bank", "run-1", Lsn(10))
    ledger.set_run_state("bank", "run-1", RunState.PUBLISHED)
    assert ledger.get_run("bank", "run-1").state is RunState.PUBLISHED  # type: ignore[union-attr]
    with pytest.raises(LedgerError, match="group 'bank', run 'nope': no pinned run"):
        ledger.set_run_state("bank", "nope", RunState.PUBLISHED)


def test_cuts_are_numbered_and_read_back(ledger: Ledger) -> None:
    assert ledger.last_cut("bank") is None
    with ledger.begin() as connection:
        first = ledger.record_cut(connection, "bank", "run-1", Lsn(100), {"a": member("a", 1), "b": member("b", 2)})
    with ledger.begin() as connection:
        second = ledger.record_cut(connection, "bank", "run-2", Lsn(200), {"a": member("a", 3), "b": member("b", 4)})
    assert (first.cut_id, first.prev_watermark) == (1, None)
    assert (second.cut_id, second.prev_watermark) == (2, Lsn(100))
    last = ledger.last_cut("bank")
    assert last is not None and last.cut_id == 2 and last.members["b"].snapshot_id == 4
    assert last.published_at.tzinfo is not None
    assert ledger.get_cut("bank", 1).members == first.members
    assert ledger.cut_for_run("bank", "run-2").cut_id == 2  # type: ignore[union-attr]
    assert ledger.cut_for_run("bank", "run-3") is None
    assert ledger.cut_as_of("bank", Lsn(150)).cut_id == 1
    assert ledger.cut_as_of("bank", Lsn(200)).cut_id == 2
    assert [c.cut_id for c in ledger.list_cuts("bank")] == [1, 2]
    with pytest.raises(CutNotFoundError, match="group 'bank' has no cut 7"):
        ledger.get_cut("bank", 7)
    with pytest.raises(CutNotFoundError, match="no cut at or before LSN 0/63"):
        ledger.cut_as_of("bank", Lsn(99))


def test_watermarks_must_increase(ledger: Ledger) -> None:
    with ledger.begin() as connection:
        ledger.record_cut(connection, "bank", "run-1", Lsn(100), {})
    with pytest.raises(LedgerError, match="watermark 0/64 must be greater than cut 1's 0/64"), ledger.begin() as c:
        ledger.record_cut(c, "bank", "run-2", Lsn(100), {})
    assert [c.cut_id for c in ledger.list_cuts("bank")] == [1]


def test_failed_transaction_leaves_no_cut(ledger: Ledger) -> None:
    with pytest.raises(RuntimeError, match="boom"), ledger.begin() as connection:
        ledger.record_cut(connection, "bank", "run-1", Lsn(100), {"a": member("a", 1)})
        raise RuntimeError("boom")
    assert ledger.list_cuts("bank") == []


def test_concurrent_publishers_of_one_run_make_one_cut(catalog_uri: str) -> None:
    Ledger(catalog_uri).create()
    start = threading.Barrier(6)

    def publish(index: int) -> str:
        ledger = Ledger(catalog_uri)
        start.wait()
        try:
            with ledger.begin() as connection:
                if ledger.cut_for_run("bank", "run-1", connection) is not None:
                    return "found"
                ledger.record_cut(connection, "bank", "run-1", Lsn(100), {"a": member("a", index)})
                return "recorded"
        except (IntegrityError, LedgerError):
            return "conflict"  # a concurrent publisher of the same run committed first

    with ThreadPoolExecutor(6) as pool:
        outcomes = list(pool.map(publish, range(6)))
    assert outcomes.count("recorded") == 1, outcomes
    cuts = Ledger(catalog_uri).list_cuts("bank")
    assert len(cuts) == 1 and cuts[0].cut_id == 1 and len(cuts[0].members) == 1


def test_expired_cuts_leave_a_tombstone_that_says_when(ledger: Ledger) -> None:
    for k in (1, 2, 3):
        with ledger.begin() as connection:
            ledger.record_cut(connection, "bank", f"run-{k}", Lsn(100 * k), {"a": member("a", k), "b": member("b", 9)})
    assert ledger.snapshots_in_use("bank", {"bank.a": {1}, "bank.b": {9}}, excluding=[1]) == {"bank.b": {9}}
    with ledger.begin() as connection:
        ledger.expire_cuts(connection, "bank", [1])
    assert [head.cut_id for head in ledger.cut_heads("bank")] == [2, 3]
    assert ledger.published_run_keys("bank") == {"run-1", "run-2", "run-3"}  # expired runs' files back later cuts
    with pytest.raises(CutExpiredError, match=r"group 'bank': cut 1 \(W=0/64\), which expired at ") as raised:
        ledger.get_cut("bank", 1)
    assert raised.value.expired_at is not None
    with pytest.raises(CutExpiredError, match="the newest cut at or before LSN 0/96 is cut 1"):
        ledger.cut_as_of("bank", Lsn(150))
    assert ledger.cut_as_of("bank", Lsn(250)).cut_id == 2
    with pytest.raises(CutExpiredError):
        ledger.pin_cut("bank", 1)
    with pytest.raises(CutNotFoundError, match="has no cut 4"):
        ledger.pin_cut("bank", 4)


def test_a_pinned_cut_does_not_expire_and_a_pin_waits_for_an_expiry(ledger: Ledger) -> None:
    for k in (1, 2, 3):
        with ledger.begin() as connection:
            ledger.record_cut(connection, "bank", f"run-{k}", Lsn(100 * k), {"a": member("a", k)})
    assert ledger.pin_cut("bank", 2).pinned_at is not None
    with pytest.raises(LedgerError, match=r"cuts \[2\] were pinned meanwhile; nothing was expired"), \
            ledger.begin() as connection:
        ledger.expire_cuts(connection, "bank", [1, 2])
    assert [(head.cut_id, head.pinned) for head in ledger.cut_heads("bank")] == [(1, False), (2, True), (3, False)]

    expiring, outcome = threading.Event(), []

    def pin() -> None:
        expiring.wait()
        try:
            ledger.pin_cut("bank", 1)
            outcome.append("pinned")
        except CutExpiredError:
            outcome.append("expired")

    thread = threading.Thread(target=pin)
    thread.start()
    with ledger.begin() as connection:
        ledger.expire_cuts(connection, "bank", [1])
        expiring.set()
        time.sleep(0.5)  # the pin runs now and must wait for this transaction
    thread.join()
    assert outcome == ["expired"]


def test_a_ledger_without_pins_gains_the_column(catalog_uri: str) -> None:
    old_cuts = (
        "CREATE TABLE streambed_cuts (group_name VARCHAR(64) NOT NULL, cut_id BIGINT NOT NULL, "
        "watermark NUMERIC(20, 0) NOT NULL, prev_watermark NUMERIC(20, 0), run_key VARCHAR(200) NOT NULL, "
        "published_at TIMESTAMP NOT NULL, PRIMARY KEY (group_name, cut_id))"
    )
    with create_engine(catalog_uri).begin() as connection:
        connection.exec_driver_sql(old_cuts)
        connection.exec_driver_sql(
            "INSERT INTO streambed_cuts VALUES ('bank', 1, 100, NULL, 'old', '2026-01-01 00:00:00')")
    ledger = Ledger(catalog_uri)
    ledger.create()
    assert ledger.pin_cut("bank", 1).pinned_at is not None
