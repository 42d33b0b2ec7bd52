"""Exactness under concurrency: every cut holds exactly the transactions committed before its W, whole.

Writer threads run multi-table transactions (interleaved, rolled back, with savepoints, large)
while cuts are pinned repeatedly. The truth is a journal table every committed transaction
writes its xid to, plus the WAL insert position each writer reads just before and just after
its COMMIT: a transaction whose commit ended by W must be in a cut up to that one, one whose
commit started at or after W must not.
"""

from __future__ import annotations

import itertools
import random
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.capture.run_records import CaptureResult
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.staging import COMMIT_LSN, XID
from tests.integration.capture.conftest import Row, apply_changes, make_group, publish, read_changes, table_state

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Committed:
    xid: int
    before: Lsn
    after: Lsn
    changes: int


class Writer(threading.Thread):
    """Runs random transactions until stopped; records what it committed and rolled back."""

    def __init__(self, dsn: str, seed: int, ids: itertools.count[int], lock: threading.Lock) -> None:
        super().__init__()
        self.dsn, self.random, self.ids, self.lock = dsn, random.Random(seed), ids, lock
        self.stop = threading.Event()
        self.committed: list[Committed] = []
        self.rolled_back: list[int] = []
        self.error: BaseException | None = None

    def next_id(self) -> int:
        with self.lock:
            return next(self.ids)

    def run(self) -> None:
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                while not self.stop.is_set():
                    self.transaction(conn)
        except BaseException as error:  # reported by the test
            self.error = error

    def transaction(self, conn: psycopg.Connection[Any]) -> None:
        kind = self.random.choice(["small", "small", "update", "savepoint", "rollback", "large"])
        conn.execute("BEGIN")
        xid = conn.execute("SELECT txid_current()").fetchone()[0]  # type: ignore[index]
        changes = 0
        own = self.next_id()
        conn.execute("INSERT INTO a VALUES (%s, 0)", (own,))
        changes += 1
        if kind == "update":
            changes += conn.execute("UPDATE a SET v = v + 1 WHERE id IN (SELECT id FROM a ORDER BY random() LIMIT 2)"
                                    ).rowcount
            changes += conn.execute("DELETE FROM h WHERE id = (SELECT min(id) FROM h)").rowcount
        if kind == "savepoint":
            conn.execute("SAVEPOINT s")
            conn.execute("INSERT INTO h (a, note) VALUES (%s, 'rolled back to savepoint')", (own,))
            conn.execute("ROLLBACK TO SAVEPOINT s")
        rows = 400 if kind == "large" else self.random.randint(1, 3)
        changes += conn.execute(
            "INSERT INTO h (a, note) SELECT %s, 'n' || g FROM generate_series(1, %s) g", (own, rows)
        ).rowcount
        if kind == "rollback":
            conn.execute("ROLLBACK")
            self.rolled_back.append(xid)
            return
        conn.execute("INSERT INTO journal VALUES (%s)", (xid,))
        before = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]  # type: ignore[index]
        conn.execute("COMMIT")
        after = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]  # type: ignore[index]
        self.committed.append(Committed(xid, Lsn.parse(before), Lsn.parse(after), changes))


def test_every_cut_holds_exactly_the_transactions_committed_before_w(
    source: psycopg.Connection[Any], ledger: Ledger, warehouse: str, pg_dsn: str
) -> None:
    source.execute("CREATE TABLE a (id int PRIMARY KEY, v int)")
    source.execute("CREATE TABLE h (id bigserial PRIMARY KEY, a int, note text)")
    source.execute("CREATE TABLE journal (xid bigint PRIMARY KEY)")
    group = make_group("a", "h")
    first = capture_run(source, group, ledger, "r0", warehouse)
    publish(source, ledger, group, first)
    ids, lock = itertools.count(1), threading.Lock()
    writers = [Writer(pg_dsn, seed, ids, lock) for seed in range(3)]
    for writer in writers:
        writer.start()
    cuts = []
    try:
        for run in range(1, 5):
            threading.Event().wait(0.2)
            result = capture_run(source, group, ledger, f"r{run}", warehouse)
            cuts.append(result)
            publish(source, ledger, group, result)
    finally:
        for writer in writers:
            writer.stop.set()
        for writer in writers:
            writer.join()
    assert all(writer.error is None for writer in writers), [writer.error for writer in writers]
    final = capture_run(source, group, ledger, "r-final", warehouse)
    cuts.append(final)

    committed = {c.xid: c for writer in writers for c in writer.committed}
    rolled_back = {xid for writer in writers for xid in writer.rolled_back}
    journal = {xid for (xid,) in source.execute("SELECT xid FROM journal")}
    assert journal == set(committed) and rolled_back and not rolled_back & journal
    assert any(c.changes > 400 for c in committed.values())

    cut_of = assign_cuts(cuts, committed)
    check_watermarks(cuts, committed, cut_of)
    assert set(cut_of) == set(committed)

    state: dict[str, dict[tuple[Any, ...], Row]] = {"a": {}, "h": {}}
    for cut in [first, *cuts]:
        for member in ("a", "h"):
            apply_changes(state[member], read_changes(cut.manifest, member), ("id",))
    assert state["a"] == table_state(source, "a", ("id",))
    assert state["h"] == table_state(source, "h", ("id",))


def assign_cuts(cuts: list[CaptureResult], committed: dict[int, Committed]) -> dict[int, int]:
    """The cut number of every captured xid, checking each is whole, in one cut, and below its W."""
    cut_of: dict[int, int] = {}
    for number, cut in enumerate(cuts):
        rows = [read_changes(cut.manifest, member) for member in ("a", "h")]
        counts = Counter(x for table in rows for x in table[XID].to_pylist())
        commit_lsns = {
            x: Lsn(lsn) for table in rows for x, lsn in zip(table[XID].to_pylist(), table[COMMIT_LSN].to_pylist(),
                                                             strict=True)
        }
        assert cut.manifest.transactions == len(counts)
        for xid, count in counts.items():
            assert xid not in cut_of, f"xid {xid} in cuts {cut_of.get(xid)} and {number}"
            cut_of[xid] = number
            assert count == committed[xid].changes, f"xid {xid} is partial in cut {number}"
            assert committed[xid].before <= commit_lsns[xid] < committed[xid].after
            assert commit_lsns[xid] < cut.watermark
    return cut_of


def check_watermarks(cuts: list[CaptureResult], committed: dict[int, Committed], cut_of: dict[int, int]) -> None:
    """A commit that ended by W_k is in a cut <= k; one that started at or after W_k is in a later cut."""
    for number, cut in enumerate(cuts):
        for xid, commit in committed.items():
            if commit.after <= cut.watermark:
                assert cut_of.get(xid, number + 1) <= number, f"xid {xid} committed before W_{number} is missing"
            if commit.before >= cut.watermark:
                assert cut_of.get(xid, number + 1) > number
