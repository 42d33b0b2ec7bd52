"""The bank source used by the end-to-end tests: schema, a money-moving writer and the invariant."""

from __future__ import annotations

import random
import threading
from typing import Any

import psycopg

from airflow_provider_streambed.read import Cut

ACCOUNTS = 20
INITIAL_BALANCE = 1000

SCHEMA = f"""
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
CREATE TABLE transfers (id bigserial PRIMARY KEY, src int NOT NULL, dst int NOT NULL, amount bigint NOT NULL);
INSERT INTO accounts SELECT g, {INITIAL_BALANCE} FROM generate_series(1, {ACCOUNTS}) g;
"""


def load_bank(dsn: str) -> None:
    """Create the bank tables with every account at the initial balance."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)


def move_money(conn: psycopg.Connection[Any], rng: random.Random) -> int:
    """One multi-table transaction: debit, credit and journal row; returns the transfer id."""
    src, dst = rng.sample(range(1, ACCOUNTS + 1), 2)
    amount = rng.randint(1, 50)
    with conn.transaction():
        conn.execute("UPDATE accounts SET balance = balance - %s WHERE id = %s", (amount, src))
        conn.execute("UPDATE accounts SET balance = balance + %s WHERE id = %s", (amount, dst))
        row = conn.execute("INSERT INTO transfers (src, dst, amount) VALUES (%s, %s, %s) RETURNING id",
                           (src, dst, amount)).fetchone()
    assert row is not None
    return int(row[0])


class Writer(threading.Thread):
    """Moves money until stopped; ``journal`` holds the id of every committed transfer."""

    def __init__(self, dsn: str, seed: int = 7) -> None:
        super().__init__(daemon=True)
        self.dsn = dsn
        self.rng = random.Random(seed)
        self.journal: list[int] = []
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with psycopg.connect(self.dsn) as conn:
                while not self.stopping.is_set():
                    self.journal.append(move_money(conn, self.rng))
                    self.stopping.wait(0.005)
        except BaseException as error:  # reported by stop()
            self.error = error

    def stop(self) -> list[int]:
        self.stopping.set()
        self.join(30)
        assert self.error is None, self.error
        return list(self.journal)


def check_cut(cut: Cut, journal: set[int]) -> set[int]:
    """Assert the bank invariant on one cut; returns the transfer ids it holds."""
    accounts = {row["id"]: row["balance"] for row in cut.to_arrow("accounts").to_pylist()}
    transfers = cut.to_arrow("transfers").to_pylist()
    ids = [row["id"] for row in transfers]
    assert len(ids) == len(set(ids)), f"cut {cut.cut_id}: a transfer appears twice"
    assert set(ids) <= journal, f"cut {cut.cut_id}: transfers never committed {sorted(set(ids) - journal)[:5]}"
    assert len(accounts) == ACCOUNTS
    assert sum(accounts.values()) == ACCOUNTS * INITIAL_BALANCE, f"cut {cut.cut_id}: money is not constant"
    net = dict.fromkeys(accounts, 0)
    for row in transfers:
        net[row["src"]] -= row["amount"]
        net[row["dst"]] += row["amount"]
    for account, balance in accounts.items():
        assert balance == INITIAL_BALANCE + net[account], f"cut {cut.cut_id}: account {account} inconsistent"
    balances = {row["id"]: (row["balance"], row["net_transfers"]) for row in cut.to_arrow("balances").to_pylist()}
    assert balances == {account: (accounts[account], net[account]) for account in accounts}, (
        f"cut {cut.cut_id}: balances member disagrees with the mirrors"
    )
    return set(ids)
