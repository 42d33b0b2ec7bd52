"""Statements that wait for other sessions: say whom they wait for, and give up in time.

Creating a logical replication slot waits until every transaction running when it started has
ended, prepared (two-phase) ones included, in every database of the cluster; creating or
altering the group's publication waits for conflicting table locks (its ``SHARE UPDATE
EXCLUSIVE`` lock does not queue ordinary writers). Either can wait forever. :func:`run_watched`
runs such a statement while a watcher, on a connection of its own, logs every
:data:`LOG_INTERVAL_SECONDS` which transactions it waits for (pid, xid, prepared gid, age,
client) and, after the timeout, cancels it (``pg_cancel_backend``): PostgreSQL then drops the
slot it had begun (a slot is kept only once created) and rolls the DDL back, and the caller gets
a :class:`~airflow_provider_streambed.exceptions.CaptureError` naming the blockers.

:func:`wait_for_running` waits the same way, polling, for the transactions running at a moment
to end: a member added to a group is copied only once those that were running when its table
joined the publication have ended (their earlier writes are neither decoded nor in an older copy).
:func:`older_transactions_ended` waits, briefly and without failing, for the transactions running
at a moment to end and their commits to be visible.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg

from airflow_provider_streambed.exceptions import CaptureError

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: How often a waiting statement logs whom it waits for.
LOG_INTERVAL_SECONDS = 15.0
#: How long slot creation, publication DDL and added copies may wait by default (``slot_create_timeout_seconds``).
DEFAULT_TIMEOUT_SECONDS = 600.0
#: How often :func:`wait_for_running` looks whether the transactions it waits for have ended.
POLL_SECONDS = 0.1
_RUNNING_XIDS = "SELECT xid::text FROM pg_snapshot_xip(pg_current_snapshot()) xid"
_STILL_RUNNING = "SELECT xid FROM unnest(%s::text[]) xid WHERE pg_xact_status(xid::xid8) = 'in progress'"
_XID_LOCKS = ("SELECT transactionid::text FROM pg_locks WHERE locktype = 'transactionid' AND mode = 'ExclusiveLock' "
              "AND granted")
_XID_LOCKS_HELD = f"SELECT EXISTS ({_XID_LOCKS} AND transactionid::text = ANY(%s))"


@dataclass(frozen=True, slots=True)
class Blocker:
    """A transaction a statement waits for.

    Attributes:
        pid: its backend (``None``: a prepared transaction, which has none).
        xid: its transaction id, when it has one.
        gid: a prepared transaction's global id.
        since: when it began (prepared: when it was prepared).
        who: user, client address and application, or owner and database of a prepared one.
    """

    pid: int | None
    xid: str | None
    gid: str | None
    since: dt.datetime | None
    who: str

    def describe(self, now: dt.datetime) -> str:
        """One line, e.g. ``prepared transaction gid='t1' xid=750 (owner app, database shop), 42 s old``."""
        age = "" if self.since is None else f", {(now - self.since).total_seconds():.0f} s old"
        if self.pid is None:
            return f"prepared transaction gid={self.gid!r} xid={self.xid} ({self.who}){age}"
        return f"pid {self.pid} xid={self.xid or '-'} ({self.who}){age}"


_ACTIVITY = (
    "SELECT a.pid, a.backend_xid::text, a.xact_start, concat_ws(', ', 'user ' || a.usename, "
    "'client ' || host(a.client_addr), nullif('application ' || a.application_name, 'application '), a.state) "
    "FROM pg_stat_activity a "
)
_PREPARED = (
    "SELECT transaction::text, gid, prepared, concat_ws(', ', 'owner ' || owner, 'database ' || database) "
    "FROM pg_prepared_xacts "
)


def _prepared(monitor: psycopg.Connection[Any], since: dt.datetime | None) -> list[Blocker]:
    rows = monitor.execute(_PREPARED + ("WHERE prepared < %s " if since else "") + "ORDER BY prepared",
                           (since,) if since else ()).fetchall()
    return [Blocker(None, xid, gid, prepared, who) for xid, gid, prepared, who in rows]


def running_transactions(monitor: psycopg.Connection[Any], waiter: int, since: dt.datetime) -> list[Blocker]:
    """The transactions a new slot waits for: those with an xid running since before ``since``,
    prepared ones included (every database)."""
    rows = monitor.execute(
        _ACTIVITY + "WHERE a.backend_xid IS NOT NULL AND a.pid <> %s AND a.xact_start < %s ORDER BY a.xact_start",
        (waiter, since),
    ).fetchall()
    return [Blocker(pid, xid, None, started, who) for pid, xid, started, who in rows] + _prepared(monitor, since)


def lock_holders(monitor: psycopg.Connection[Any], waiter: int, since: dt.datetime) -> list[Blocker]:
    """The sessions whose locks ``waiter`` waits for (``pg_blocking_pids``; prepared transactions,
    which it reports as pid 0, from ``pg_prepared_xacts``)."""
    rows = monitor.execute(
        _ACTIVITY + "WHERE a.pid = ANY(pg_blocking_pids(%s)) ORDER BY a.xact_start", (waiter,)
    ).fetchall()
    found = [Blocker(pid, xid, None, started, who) for pid, xid, started, who in rows]
    prepared_blocks = monitor.execute("SELECT 0 = ANY(pg_blocking_pids(%s))", (waiter,)).fetchone()
    return found + (_prepared(monitor, None) if prepared_blocks and prepared_blocks[0] else [])


Finder = Callable[[psycopg.Connection[Any], int, dt.datetime], list[Blocker]]


def run_watched(
    run: Callable[[], T], *, what: str, conninfo: str, waiter: int, timeout: float, find: Finder
) -> T:
    """Run ``run()`` (a statement on the backend ``waiter``), logging its blockers while it waits.

    Args:
        run: executes the statement and returns its result.
        what: the statement for people, e.g. ``"group 'bank': creating slot streambed_bank"``.
        conninfo: where the watcher connects (the same server; secret, never logged).
        waiter: the backend pid running the statement.
        timeout: seconds before the statement is cancelled.
        find: lists the blockers (:func:`running_transactions` or :func:`lock_holders`).

    Raises:
        CaptureError: the statement waited ``timeout`` seconds and was cancelled; names the blockers.
    """
    started, clock = dt.datetime.now(dt.UTC), time.monotonic()
    finished, lock = threading.Event(), threading.Lock()
    gave_up: list[list[Blocker]] = []

    def watch() -> None:
        with psycopg.connect(conninfo, autocommit=True) as monitor:
            while not finished.wait(min(LOG_INTERVAL_SECONDS, max(0.0, clock + timeout - time.monotonic()))):
                blockers = find(monitor, waiter, started)
                waited = time.monotonic() - clock
                if waited >= timeout:
                    with lock:
                        if not finished.is_set():
                            gave_up.append(blockers)
                            monitor.execute("SELECT pg_cancel_backend(%s)", (waiter,))
                    return
                logger.warning("%s has waited %.0f s for: %s", what, waited, _listing(blockers))

    watcher = threading.Thread(target=watch, name="streambed-wait-watcher", daemon=True)
    watcher.start()
    try:
        return run()
    except psycopg.errors.QueryCanceled as error:
        if not gave_up:
            raise
        raise _gave_up(what, timeout, gave_up[0], "nothing was created") from error
    finally:
        with lock:
            finished.set()
        watcher.join()


def wait_for_running(conn: psycopg.Connection[Any], *, what: str, timeout: float) -> None:
    """Wait until every transaction holding an xid now has ended (prepared ones and those of other
    databases included, as for a new slot), logging them every :data:`LOG_INTERVAL_SECONDS`.

    Args:
        conn: an autocommit connection to the source.
        what: what waits, for people, e.g. ``"group 'bank': copying added members ['b']"``.
        timeout: seconds before giving up.

    Raises:
        CaptureError: they had not all ended after ``timeout`` seconds; names them.
    """
    started, clock = dt.datetime.now(dt.UTC), time.monotonic()
    logged = clock
    pending = [row[0] for row in conn.execute(_RUNNING_XIDS).fetchall()]
    while pending := [row[0] for row in conn.execute(_STILL_RUNNING, (pending,)).fetchall()]:
        now = time.monotonic()
        if now - clock >= timeout:
            raise _gave_up(what, timeout, running_transactions(conn, conn.info.backend_pid, started),
                           "nothing was copied")
        if now - logged >= LOG_INTERVAL_SECONDS:
            blockers = running_transactions(conn, conn.info.backend_pid, started)
            logger.warning("%s has waited %.0f s for: %s", what, now - clock, _listing(blockers))
            logged = now
        time.sleep(POLL_SECONDS)


def older_transactions_ended(conn: psycopg.Connection[Any], timeout: float) -> bool:
    """Whether every transaction that holds an xid now ends, its commit visible to new snapshots,
    within ``timeout`` seconds (polling); ``False`` past it, for a caller that does without.

    A commit's WAL record precedes its visibility (a synchronous standby's reply may come
    between), so a reading taken after a WAL position may miss a commit before it; one taken
    after this returns ``True`` sees every commit before the call. A transaction holds the lock
    on its own xid (``pg_locks``, seen by every role; prepared ones too) until after its commit is
    visible. The wait writes no WAL: it takes no xid of its own, whose commit record would move
    the WAL past a quiet source's last cut. It waits for every such transaction of the cluster
    (every database, idle sessions holding an xid, autovacuum's). ``conn`` must hold no xid (an
    autocommit connection outside a transaction), or it waits for itself until ``timeout``.
    """
    held = [row[0] for row in conn.execute(_XID_LOCKS).fetchall()]
    clock = time.monotonic()
    while held and conn.execute(_XID_LOCKS_HELD, (held,)).fetchone() != (False,):
        if time.monotonic() - clock >= timeout:
            return False
        time.sleep(POLL_SECONDS)
    return True


def _gave_up(what: str, timeout: float, blockers: list[Blocker], outcome: str) -> CaptureError:
    return CaptureError(
        f"{what} gave up after waiting {timeout:g} s for: {_listing(blockers)}; {outcome}. "
        "End those transactions (COMMIT PREPARED or ROLLBACK PREPARED '<gid>' for prepared ones) and retry"
    )


def _listing(blockers: list[Blocker]) -> str:
    now = dt.datetime.now(dt.UTC)
    return "; ".join(blocker.describe(now) for blocker in blockers) or "no transaction visible any more"
