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
