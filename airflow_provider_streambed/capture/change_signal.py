"""Whether a group's source tables have committed changes its last cut does not hold, read cheaply.

The event trigger (:mod:`airflow_provider_streambed.triggers.changes`) polls the source with
:func:`read_source_state` and decides with :func:`decide`; the decision is pure, so it is tested
without a database.

**The signal.** One statement per poll reads ``pg_current_wal_insert_lsn()`` and, for each of
the group's source tables (each leaf partition of a partitioned one), ``pg_stat_user_tables``'
``n_tup_ins + n_tup_upd + n_tup_del`` and ``pg_relation_filenode()`` (a ``TRUNCATE`` moves no
counter but gives the table a new file). It
takes no slot (a capture may hold it; a slot has one consumer at a time) and decodes no WAL.
The counters are per table, so a write to another table or database never fires; they are
flushed by a backend about once a second (up to 10 s after a burst), and count aborted
transactions too (a false fire costs one cheap run, never a wrong cut). The WAL position alone
was the other candidate: it moves on any WAL (other databases, the catalog's own publish when it
shares the cluster, checkpoints), so each run could cause the next.

**The decision.** The trigger remembers the counters it last saw, never a fired state it could
not rebuild. Counters are not LSN-stamped, so the ledger's last cut W places them: when they
change and the poll's LSN is beyond W, there are committed changes W does not hold, and the
trigger fires once with that LSN as its position; the same counters never fire again. When the
poll's LSN is at or below W, a run already published every change the counters hold (each
counted commit ended before the poll's LSN). A new trigger (a triggerer restart) has seen no
counters: it starts from the ledger and fires once if the WAL moved past the last cut's W, which
may be a false fire, and never misses a change committed while no trigger ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from airflow_provider_streambed.exceptions import ConfigurationError
from airflow_provider_streambed.lsn import Lsn

#: One poll: the WAL insert position and the counters of the group's tables (of each leaf
#: partition of a partitioned one: a partitioned table's own counters never move), found through
#: the catalog's name indexes, so the cost does not grow with the database's other tables. The
#: functions are those behind ``pg_stat_user_tables``' ``n_tup_ins``, ``n_tup_upd``, ``n_tup_del``.
POLL_QUERY = """
SELECT pg_current_wal_insert_lsn()::text AS lsn, t.schema || '.' || t.name AS name, l.leaf::bigint AS relid,
       pg_relation_filenode(l.leaf)::bigint,
       pg_stat_get_tuples_inserted(l.leaf) + pg_stat_get_tuples_updated(l.leaf) + pg_stat_get_tuples_deleted(l.leaf)
FROM unnest(%s::text[], %s::text[]) AS t(schema, name)
JOIN pg_namespace n ON n.nspname = t.schema
JOIN pg_class p ON p.relnamespace = n.oid AND p.relname = t.name
LEFT JOIN LATERAL pg_partition_tree(p.oid) AS tree ON true  -- no rows for a table that is not partitioned
CROSS JOIN LATERAL (SELECT coalesce(tree.relid, p.oid::regclass) AS leaf) AS l
WHERE coalesce(tree.isleaf, true)
UNION ALL SELECT pg_current_wal_insert_lsn()::text, NULL, NULL, NULL, NULL
ORDER BY name NULLS FIRST, relid
"""


@dataclass(frozen=True, slots=True)
class TableCounters:
    """One source table's write counters as ``pg_stat_user_tables`` shows them (per leaf partition).

    Attributes:
        table: ``schema.table`` (of the group; the partitioned table for a partition).
        relid: the table's (partition's) OID (a table dropped and created again has another).
        relfilenode: its file (``TRUNCATE``, ``VACUUM FULL`` and ``CLUSTER`` give it a new one).
        writes: rows inserted, updated and deleted since the statistics were reset.
    """

    table: str
    relid: int
    relfilenode: int
    writes: int


@dataclass(frozen=True, slots=True)
class SourceState:
    """One poll of the source: the WAL insert position and the group's tables' counters, by name."""

    lsn: Lsn
    tables: tuple[TableCounters, ...]


@dataclass(frozen=True, slots=True)
class Decision:
    """What a poll decided: fire or not, why, and the counters the next poll compares with."""

    fire: bool
    reason: str
    seen: tuple[TableCounters, ...]


def counters_moved(seen: tuple[TableCounters, ...] | None, state: SourceState) -> bool:
    """Whether ``state``'s counters differ from those seen last (always, for a trigger's first poll).

    Only then does a poll read the ledger and :func:`decide`.
    """
    return seen is None or state.tables != seen


def decide(seen: tuple[TableCounters, ...] | None, state: SourceState, last_cut: Lsn | None) -> Decision:
    """Whether ``state`` shows committed changes that neither the last cut nor an earlier event holds.

    Args:
        seen: the counters of the previous poll; ``None`` for a trigger's first poll.
        state: this poll.
        last_cut: the W of the group's last cut (read from the ledger), ``None`` before the first.

    Returns:
        A decision to fire at most once per new counter state (see the module docstring).
    """
    if not counters_moved(seen, state):
        return Decision(False, "no table of the group was written since the last poll", state.tables)
    if last_cut is None:
        return Decision(True, "the group has no cut yet: its first run copies the tables", state.tables)
    if state.lsn <= last_cut:
        return Decision(False, f"the last cut (W={last_cut}) holds every change up to LSN {state.lsn}", state.tables)
    if seen is None:
        return Decision(True, f"the WAL moved from the last cut's W={last_cut} to {state.lsn} while no trigger "
                              "watched the tables", state.tables)
    changed = sorted({table.table for table in set(state.tables) ^ set(seen)})
    return Decision(True, f"{', '.join(changed)} written after the last cut's W={last_cut} (LSN {state.lsn})",
                    state.tables)


def poll_parameters(tables: Sequence[str]) -> tuple[list[str], list[str]]:
    """:data:`POLL_QUERY`'s parameters: the schemas and the names of ``tables`` (``schema.table``)."""
    parts = [table.split(".", 1) for table in tables]
    return [schema for schema, _ in parts], [name for _, name in parts]


async def read_source_state(connection: psycopg.AsyncConnection[Any], tables: Sequence[str]) -> SourceState:
    """Poll the source once: its WAL insert position and the counters of ``tables``.

    Args:
        connection: an autocommit connection to the source database (each poll is its own
            transaction, so the statistics are read afresh).
        tables: the group's source tables as ``schema.table``.
    """
    async with connection.cursor() as cursor:
        await cursor.execute(POLL_QUERY, poll_parameters(tables))
        rows = await cursor.fetchall()
    counters = tuple(TableCounters(str(name), int(relid), int(node), int(writes))
                     for _, name, relid, node, writes in rows if name is not None)
    return SourceState(Lsn.parse(str(rows[0][0])), counters)


async def check_counters_tracked(connection: psycopg.AsyncConnection[Any], group: str) -> None:
    """Refuse a source whose table statistics are off: the counters would never move.

    Raises:
        ConfigurationError: ``track_counts`` is off on the source.
    """
    async with connection.cursor() as cursor:
        await cursor.execute("SELECT current_setting('track_counts')")
        row = await cursor.fetchone()
    if row is None or row[0] != "on":
        raise ConfigurationError(f"group {group!r}: the source has track_counts off, so its tables' write counters "
                                 "never move; set track_counts = on (the default) for the change trigger")
