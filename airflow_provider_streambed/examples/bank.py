"""The source side of the bank example: its schema, a money-moving writer and the invariant of a cut.

Shared by ``make demo`` and the end-to-end tests. Every transfer is one transaction that debits
one account, credits another and inserts the ``transfers`` row, so in a transaction-consistent
cut the total money is constant and every balance equals the initial balance plus the account's
net transfers.
"""

from __future__ import annotations

import random
import threading
import time
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
# [START balances_sql]
#: The query of the examples' derived ``balances`` member over the mirrored ``accounts`` and
#: ``transfers``: each account's balance and the net of its transfers.
BALANCES_SQL = (
    "SELECT a.id, a.balance, coalesce(sum(m.amount), 0) AS net_transfers "
    "FROM accounts a LEFT JOIN ("
    "  SELECT dst AS id, amount FROM transfers UNION ALL SELECT src, -amount FROM transfers"
    ") m ON m.id = a.id "  # an equi-join: an OR in the join condition would be a nested loop
    "GROUP BY a.id, a.balance"
)
# [END balances_sql]


def load_bank(dsn: str) -> None:
    """Create the bank tables with every account at the initial balance."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)


def move_money(conn: psycopg.Connection[Any], rng: random.Random) -> int:
    """One multi-table transaction: debit, credit and transfer row; returns the transfer id."""
    src, dst = rng.sample(range(1, ACCOUNTS + 1), 2)
    amount = rng.randint(1, 50)
    with conn.transaction():
        for account, change in sorted(((src, -amount), (dst, amount))):  # in id order: writers never deadlock
            conn.execute("UPDATE accounts SET balance = balance + %s WHERE id = %s", (change, account))
        row = conn.execute("INSERT INTO transfers (src, dst, amount) VALUES (%s, %s, %s) RETURNING id",
                           (src, dst, amount)).fetchone()
    if row is None:
        raise RuntimeError("INSERT ... RETURNING gave no row")
    return int(row[0])


class Writer(threading.Thread):
    """Moves money every ``pause`` seconds (default every few milliseconds) until stopped;
    ``journal`` holds every committed transfer id, ``committed_at`` the time
    (``time.monotonic()``) each committed."""

    def __init__(self, dsn: str, seed: int = 7, pause: float = 0.005) -> None:
        super().__init__(daemon=True)
        self.dsn = dsn
        self.pause = pause
        self.rng = random.Random(seed)
        self.journal: list[int] = []
        self.committed_at: dict[int, float] = {}
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        """Transfer until :meth:`stop`; an error ends the thread and is raised by :meth:`stop`."""
        try:
            with psycopg.connect(self.dsn) as conn:
                while not self.stopping.is_set():
                    transfer = move_money(conn, self.rng)
                    self.committed_at[transfer] = time.monotonic()
                    self.journal.append(transfer)
                    self.stopping.wait(self.pause)
        except BaseException as error:  # reported by stop()
            self.error = error

    def stop(self) -> set[int]:
        """Stop and return the journal.

        Raises:
            RuntimeError: the writer failed.
        """
        self.stopping.set()
        self.join(30)
        if self.error is not None:
            raise RuntimeError(f"the writer failed: {self.error}") from self.error
        return set(self.journal)


def cut_problems(cut: Cut, journal: set[int]) -> tuple[list[str], set[int]]:
    """The bank invariant on one cut: (what is wrong, empty when nothing; the transfer ids it holds).

    Checks that no transfer appears twice or was never committed (``journal``), that the total
    money is constant, that every balance equals its initial balance plus its net transfers, and
    that the ``balances`` member agrees with the mirrored tables of the same cut (when the cut
    has one: a group of the mirrors alone has not).
    """
    accounts = {row["id"]: row["balance"] for row in cut.to_arrow("accounts").to_pylist()}
    transfers = cut.to_arrow("transfers").to_pylist()
    ids = [row["id"] for row in transfers]
    problems = []
    total = sum(accounts.values())
    if len(accounts) != ACCOUNTS or total != ACCOUNTS * INITIAL_BALANCE:
        problems.append(f"total money {total} over {len(accounts)} accounts, expected {ACCOUNTS * INITIAL_BALANCE}")
    if len(ids) != len(set(ids)):
        problems.append("a transfer appears twice")
    if not set(ids) <= journal:
        problems.append(f"transfers never committed: {sorted(set(ids) - journal)[:5]}")
    net = dict.fromkeys(accounts, 0)
    for row in transfers:
        net[row["src"]] = net.get(row["src"], 0) - row["amount"]
        net[row["dst"]] = net.get(row["dst"], 0) + row["amount"]
    wrong = [account for account, balance in accounts.items() if balance != INITIAL_BALANCE + net[account]]
    if wrong:
        problems.append(f"balances inconsistent with the transfers for accounts {wrong[:5]}")
    balances = {row["id"]: (row["balance"], row["net_transfers"]) for row in cut.to_arrow("balances").to_pylist()} \
        if "balances" in cut.members else None
    if balances is not None and balances != {account: (accounts[account], net[account]) for account in accounts}:
        problems.append("the balances member disagrees with the mirrored tables")
    return problems, set(ids)
