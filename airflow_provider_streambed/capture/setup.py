"""Setting the source up for a run: the server checked, the mirrored tables described, the
group's publication created over them or kept covering them, and (outside the capture step)
the slot created."""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

import psycopg
from psycopg import sql

from airflow_provider_streambed.capture.names import mirror_table, publication_name, slot_name
from airflow_provider_streambed.capture.source import (
    SourceTable,
    check_server,
    check_slot_capacity,
    describe_table,
    slot_exists,
    source_conninfo,
)
from airflow_provider_streambed.capture.type_resolver import TypeResolver
from airflow_provider_streambed.capture.waits import (
    DEFAULT_TIMEOUT_SECONDS,
    lock_holders,
    run_watched,
    running_transactions,
)
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import SourceError

logger = logging.getLogger(__name__)


#: The tables a publication names (a partitioned table itself, whatever ``publish_via_partition_root``).
_PUBLISHED_TABLES = (
    "SELECT n.nspname::text || '.' || c.relname::text FROM pg_publication p "
    "JOIN pg_publication_rel r ON r.prpubid = p.oid JOIN pg_class c ON c.oid = r.prrelid "
    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE p.pubname = %s"
)


def sync_publication(
    conn: psycopg.Connection[Any], group: RefreshGroup, timeout: float = DEFAULT_TIMEOUT_SECONDS,
    published: Collection[str] = (),
) -> None:
    """Create the group's publication, or set its tables to the declared mirrors.

    The publication publishes a partitioned table's changes under the table's own name
    (``publish_via_partition_root``); otherwise they would come under each partition's name,
    which is no mirror's table, and be lost. The DDL waits for conflicting table locks at most
    ``timeout`` seconds, logging their holders (:func:`.waits.run_watched`).

    Args:
        conn: an autocommit connection to the source.
        group: the refresh group.
        timeout: seconds the DDL may wait for locks.
        published: the source tables (``schema.table``) of mirrors in the group's last cut: the
            publication must still cover them, or their changes since it stopped were never
            decoded.

    Raises:
        CaptureError: a statement waited ``timeout`` seconds (rolled back); names the lock holders.
        SourceError: the publication was dropped or lost a table of the last cut (altered by hand).
    """
    name = publication_name(group)

    def execute(statement: sql.Composed, what: str) -> None:
        run_watched(lambda: conn.execute(statement), what=f"group {group.name!r}: {what} publication {name}",
                    conninfo=source_conninfo(conn), waiter=conn.info.backend_pid, timeout=timeout, find=lock_holders)

    wanted = {m.qualified_table for m in group.mirrors}
    current = conn.execute(_PUBLISHED_TABLES, (name,)).fetchall()
    row = conn.execute("SELECT pubviaroot FROM pg_publication WHERE pubname = %s", (name,)).fetchone()
    if lost := sorted(set(published) - {table for (table,) in current}):
        what = "was dropped" if row is None else f"no longer covers {', '.join(lost)}"
        raise SourceError(
            f"group {group.name!r}: publication {name} {what} (altered by hand?): changes made since were never "
            "decoded, so the mirrors cannot follow; re-synchronise the group (trigger a run with the Param resync, "
            "or run `streambed resync --group ...`: it copies every table again into a new cut), or restore the "
            "publication and accept the gap"
        )
    tables = sql.SQL(", ").join(mirror_table(m) for m in group.mirrors)
    if row is None:
        execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE {} WITH (publish_via_partition_root = true)").format(
            sql.Identifier(name), tables), "creating")
        logger.info("group=%s: created publication %s over %d tables", group.name, name, len(wanted))
        return
    if not row[0]:
        execute(sql.SQL("ALTER PUBLICATION {} SET (publish_via_partition_root = true)").format(sql.Identifier(name)),
                "altering")
        logger.warning("group=%s: publication %s now publishes partitioned tables under their own name; if a mirror "
                       "is a partitioned table, the changes of its partitions were not captured before: resync the "
                       "group (the Param resync, or `streambed resync`)", group.name, name)
    if {table for (table,) in current} != wanted:
        execute(sql.SQL("ALTER PUBLICATION {} SET TABLE {}").format(sql.Identifier(name), tables), "altering")
        logger.info("group=%s: publication %s now covers %s", group.name, name, sorted(wanted))


def ensure_source(
    conn: psycopg.Connection[Any], group: RefreshGroup, *, create_slot: bool = True,
    wait_timeout: float = DEFAULT_TIMEOUT_SECONDS, published: Collection[str] = (),
) -> dict[str, SourceTable]:
    """Check the source and create (idempotently) the group's publication and slot.

    The connection must be in autocommit mode. The capture step passes ``create_slot=False`` and
    creates the slot itself, exporting its snapshot for the bootstrap copy.

    Args:
        conn: an autocommit connection to the source database.
        group: the refresh group.
        create_slot: create the ``pgoutput`` slot if it is missing (without two-phase decoding).
        wait_timeout: how long the publication DDL and the slot creation may wait for other
            sessions (:mod:`.waits`).
        published: source tables of the last cut's mirrors (see :func:`sync_publication`).

    Returns:
        The mirrored tables by member name.

    Raises:
        SourceError: a check failed (wal_level, rights, table, key, column types); SlotError for slots;
            CaptureError when the DDL or the slot creation waited ``wait_timeout`` seconds.
    """
    check_server(conn, group)
    resolver = TypeResolver(conn)
    tables = {m.name: describe_table(conn, group, m, resolver) for m in group.mirrors}
    sync_publication(conn, group, wait_timeout, published)
    if create_slot and not slot_exists(conn, group):
        check_slot_capacity(conn, group)
        statement = "SELECT lsn::text FROM pg_create_logical_replication_slot(%s, 'pgoutput', false, false)"
        row = run_watched(lambda: conn.execute(statement, (slot_name(group),)).fetchone(),
                          what=f"group {group.name!r}: creating slot {slot_name(group)}",
                          conninfo=source_conninfo(conn), waiter=conn.info.backend_pid, timeout=wait_timeout,
                          find=running_transactions)
        logger.info("group=%s: created slot %s at %s", group.name, slot_name(group), row[0] if row else "?")
    return tables
