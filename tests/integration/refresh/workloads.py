"""A random workload on a keyed table (``accounts``) and a keyless one with duplicates and NULLs
(``events``): inserts, updates, deletes, key changes, rows inserted and deleted between two cuts,
an added column (run 4) and a renamed one (run 6)."""

from __future__ import annotations

import random
from typing import Any

import psycopg

SCHEMA = """
CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric(12, 2));
INSERT INTO accounts SELECT g, 'o' || (g % 7), g * 10 FROM generate_series(1, 60) g;
CREATE TABLE events (kind text, n int);
ALTER TABLE events REPLICA IDENTITY FULL;
INSERT INTO events SELECT 'k' || (g % 3), g % 4 FROM generate_series(1, 20) g;
INSERT INTO events VALUES (NULL, NULL), (NULL, NULL), ('k1', 1);
"""


def keyed_transaction(conn: psycopg.Connection[Any], rng: random.Random) -> None:
    ids = [row[0] for row in conn.execute("SELECT id FROM accounts").fetchall()]
    pick, fresh = rng.choice(ids), max(ids) + rng.randint(1, 5)
    statement = rng.choice([
        ("INSERT INTO accounts VALUES (%s, 'new', 1)", (fresh,)),
        ("UPDATE accounts SET balance = balance + 1 WHERE id = %s", (pick,)),
        ("UPDATE accounts SET owner = NULL WHERE id = %s", (pick,)),
        ("DELETE FROM accounts WHERE id = %s", (pick,)),
        ("UPDATE accounts SET id = %s WHERE id = %s", (fresh, pick)),  # a key change
        ("UPDATE accounts SET balance = balance WHERE id = %s", (pick,)),  # changes nothing
    ])
    conn.execute(*statement)  # type: ignore[call-overload]  # a (query, params) pair


def keyless_transaction(conn: psycopg.Connection[Any], rng: random.Random) -> None:
    rows = conn.execute("SELECT ctid::text, kind, n FROM events").fetchall()
    ctid, kind, n = rng.choice(rows)
    statement = rng.choice([
        ("INSERT INTO events VALUES (%s, %s)", (kind, n)),  # a duplicate
        ("DELETE FROM events WHERE ctid = %s::tid", (ctid,)),  # one of several identical rows
        ("UPDATE events SET n = coalesce(n, 0) + 1 WHERE ctid = %s::tid", (ctid,)),
        ("INSERT INTO events VALUES (NULL, NULL)", ()),
    ])
    conn.execute(*statement)  # type: ignore[call-overload]  # a (query, params) pair


def workload(dsn: str, rng: random.Random, run: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(rng.randint(3, 12)):
            keyed_transaction(conn, rng)
        if run % 3 != 1:  # every third interval leaves 'events' alone: it is carried
            for _ in range(rng.randint(2, 8)):
                keyless_transaction(conn, rng)
        conn.execute("INSERT INTO accounts VALUES (100000, 'gone', 0)")  # inserted and deleted in between
        conn.execute("DELETE FROM accounts WHERE id = 100000")
        if run == 4:
            conn.execute("ALTER TABLE accounts ADD COLUMN note text")
            conn.execute("UPDATE accounts SET note = 'n' || id WHERE id % 5 = 0")
        if run == 6:  # the member is copied again; the column keeps its field id
            conn.execute("ALTER TABLE accounts RENAME COLUMN owner TO holder")


#: A fact table (``payments``) whose rows name a row of a dimension (``branches``, key ``id``) or
#: none (NULL, or a branch that does not exist yet); NULL regions among the branches.
JOIN_SCHEMA = """
CREATE TABLE branches (id int PRIMARY KEY, region text, active boolean);
INSERT INTO branches SELECT g, 'r' || (g % 4), g % 5 <> 0 FROM generate_series(1, 12) g;
INSERT INTO branches VALUES (13, NULL, true);
CREATE TABLE payments (id int PRIMARY KEY, branch int, kind text, amount numeric(12, 2));
INSERT INTO payments SELECT g, CASE WHEN g % 11 = 0 THEN NULL ELSE g % 15 + 1 END, 'k' || (g % 3), g
FROM generate_series(1, 200) g;
"""


def join_transaction(conn: psycopg.Connection[Any], rng: random.Random, branches_too: bool) -> None:
    """One random change: a payment inserted, moved to another branch (or none), changed or
    deleted; with ``branches_too`` also a branch's region or activity changed, a branch inserted,
    deleted or given another key."""
    payments = [row[0] for row in conn.execute("SELECT id FROM payments").fetchall()]
    branches = [row[0] for row in conn.execute("SELECT id FROM branches").fetchall()]
    payment, branch = rng.choice(payments), rng.choice([*branches, None, max(branches) + 1])
    fresh = max(branches) + rng.randint(1, 3)
    region = rng.choice(["r0", "r1", "r9", None])
    statements = [
        ("INSERT INTO payments VALUES (%s, %s, %s, %s)", (max(payments) + 1, branch, rng.choice(["k0", None]), 5)),
        ("UPDATE payments SET branch = %s WHERE id = %s", (branch, payment)),
        ("UPDATE payments SET amount = amount + 1, kind = %s WHERE id = %s", (rng.choice(["k1", None]), payment)),
        ("DELETE FROM payments WHERE id = %s", (payment,)),
    ]
    dimension = [
        ("UPDATE branches SET region = %s WHERE id = %s", (region, rng.choice(branches))),
        ("UPDATE branches SET active = NOT active WHERE id = %s", (rng.choice(branches),)),
        ("INSERT INTO branches VALUES (%s, %s, true)", (fresh, region)),
        ("DELETE FROM branches WHERE id = %s", (rng.choice(branches),)),
        ("UPDATE branches SET id = %s WHERE id = %s", (fresh, rng.choice(branches))),  # a key change
    ]
    statement = rng.choice(statements + dimension if branches_too else statements)
    conn.execute(*statement)  # type: ignore[call-overload]  # a (query, params) pair


def join_workload(dsn: str, rng: random.Random, run: int) -> None:
    """A run's changes: every third run leaves ``branches`` alone (it is carried); the others also
    move the only payment of the last run's new branch away while that branch changes its region
    (its old region loses a row that only the previous cut joins), and add a branch with a region
    of its own and move a payment there (a row that only W joins)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(rng.randint(4, 14)):
            join_transaction(conn, rng, run % 3 != 1)
        if run % 3 != 1:
            conn.execute("UPDATE payments SET branch = NULL WHERE branch < 0")
            conn.execute("UPDATE branches SET region = region || 'x' WHERE id < 0")
            conn.execute("INSERT INTO branches VALUES (%s, %s, true)", (-run, f"solo{run}"))
            conn.execute("UPDATE payments SET branch = %s WHERE id = (SELECT min(id) FROM payments WHERE amount > 3)",
                         (-run,))
