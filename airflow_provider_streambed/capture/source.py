"""Checks the source database can serve a group, and keeps the group's publication in step.

:func:`ensure_source` is idempotent: it checks ``wal_level``, replication rights, every mirrored
table and its key, then creates the group's publication or sets its tables to the declaration's
(``ALTER PUBLICATION ... SET TABLE``). A table added later to a publication is captured only from
the ALTER on (publication membership is evaluated at each change's LSN), which is why a mirror
without a previous cut gets a bootstrap copy (see :mod:`.bootstrap`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from airflow_provider_streambed.capture.names import slot_name
from airflow_provider_streambed.capture.pgoutput import Column
from airflow_provider_streambed.capture.type_resolver import TypeResolver
from airflow_provider_streambed.capture.typemap import PgType
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import SlotError, SourceError
from airflow_provider_streambed.member_declarations import Mirror
from airflow_provider_streambed.staging.capture_manifest import row_identity

logger = logging.getLogger(__name__)

#: The storage of a partitioned table without partitions (not empty: a partition attached later
#: with its rows must read as a change).
NO_PARTITIONS = "none"
#: A partitioned table's storage (of ``pg_class c``) as a text: ``oid:relfilenode`` of each leaf
#: partition, by OID, or :data:`NO_PARTITIONS`; null for a plain table. A partition attached,
#: detached or dropped, and a partition truncated or rewritten, change it: PostgreSQL publishes
#: none of these through the partitioned table.
_STORAGE = f"""CASE WHEN c.relkind = 'p' THEN coalesce((SELECT string_agg(p.oid || ':' || p.relfilenode, ','
          ORDER BY p.oid) FROM pg_partition_tree(c.oid) t JOIN pg_class p ON p.oid = t.relid WHERE t.isleaf),
          '{NO_PARTITIONS}') END"""

#: A partitioned table's leaf partitions' replica identities (of ``pg_class c``) as a text:
#: ``oid:relreplident:xmin`` of each, by OID; null for a plain table. ``ALTER TABLE ... REPLICA
#: IDENTITY`` that changes a partition's identity updates its ``pg_class`` row, whose ``xmin`` then
#: never comes back (freezing keeps it): two equal readings mean no partition's identity changed
#: in between (any other update of the row, a GRANT or a rename, reads as one too).
_LEAVES = """CASE WHEN c.relkind = 'p' THEN (SELECT string_agg(p.oid || ':' || p.relreplident::text || ':'
          || p.xmin::text, ',' ORDER BY p.oid) FROM pg_partition_tree(c.oid) t JOIN pg_class p ON p.oid = t.relid
          WHERE t.isleaf) END"""

_TABLE_QUERY = """
SELECT c.oid::int8, c.relreplident::text, c.relpersistence::text,
       (SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a
         WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '') AS columns,
       (SELECT array_agg(a.atttypid::int8 ORDER BY a.attnum) FROM pg_attribute a
         WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '') AS types,
       (SELECT array_agg(a.atttypmod ORDER BY a.attnum) FROM pg_attribute a
         WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '') AS modifiers,
       (SELECT array_agg(a.attnum::int ORDER BY a.attnum) FROM pg_attribute a
         WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '') AS attnums,
       (SELECT array_agg(a.attname::text ORDER BY array_position(i.indkey::int2[], a.attnum))
          FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey::int2[])
         WHERE i.indrelid = c.oid AND i.indisprimary) AS primary_key,
       (SELECT bool_or(NOT i.indimmediate) FROM pg_index i
         WHERE i.indrelid = c.oid AND i.indisprimary) AS primary_key_deferrable,
       (SELECT array_agg(a.attname::text ORDER BY array_position(i.indkey::int2[], a.attnum))
          FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey::int2[])
         WHERE i.indrelid = c.oid AND i.indisreplident) AS identity_index,
       (SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a
         WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
           AND NOT has_column_privilege(c.oid, a.attnum, 'SELECT')) AS unreadable,
       (SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a
         WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
           AND (a.atthasmissing OR a.atthasdef)) AS filled,
       current_user::text,
       """ + _STORAGE + """ AS storage,
       """ + _LEAVES + """ AS leaves
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')
"""


@dataclass(frozen=True, slots=True)
class SourceTable:
    """A mirrored source table as the catalog describes it.

    Attributes:
        member: the Mirror member's name.
        qualified_name: ``schema.table``.
        oid: the table's OID.
        layout: live, non-generated columns in attribute order, as a Relation message lists them.
        key_columns: primary key, else replica identity index; empty for a keyless or an
            append-only table.
        types: the layout's column types, as :mod:`.typemap` carries them.
        filled_columns: columns with a default: rows from before an ``ADD COLUMN ... DEFAULT``
            read it from the catalog (``pg_attribute.atthasmissing``), or a volatile default
            (``DEFAULT now()``) was written into them by a table rewrite; no change record carries
            either. (A default set after the column was added gives older rows nothing; such a
            column, when it is new to the mirror, is copied anyway: exact, if needless.)
        keyless: no key names one row (``REPLICA IDENTITY FULL`` without a primary key, not
            append-only): the mirror is a multiset of whole rows, and a change's old image is
            its identity.
        storage: of a partitioned table, ``oid:relfilenode`` of each leaf partition (a partition
            attached, detached, dropped, truncated or rewritten changes it), :data:`NO_PARTITIONS`
            without any; empty for a plain table.
        attnums: each column's ``pg_attribute.attnum``, in layout order: a column's identity,
            which a rename keeps.
        leaves: of a partitioned table, its leaf partitions' identities (``oid:relreplident:xmin``
            of each): equal readings mean no partition's identity changed in between; empty for
            a plain table.
    """

    member: str
    qualified_name: str
    oid: int
    layout: tuple[Column, ...]
    key_columns: tuple[str, ...]
    types: tuple[PgType, ...]
    filled_columns: tuple[str, ...] = ()
    keyless: bool = False
    storage: str = ""
    attnums: tuple[int, ...] = ()
    leaves: str = ""

    @property
    def leaves_full(self) -> bool:
        """Whether every leaf partition has ``REPLICA IDENTITY FULL`` (by :attr:`leaves`; true for
        a plain table). PostgreSQL marks an old row whole (``O``) by the partitioned table's
        identity but logs it by its partition's, which ``ALTER TABLE ... REPLICA IDENTITY`` on the
        partitioned table does not change: only then are its old rows marked whole whole."""
        return all(leaf.split(":")[1] == "f" for leaf in self.leaves.split(",") if leaf)

    @property
    def partitioned(self) -> bool:
        """Whether the table is a partitioned one (its :attr:`storage` is recorded)."""
        return bool(self.storage)

    @property
    def columns(self) -> tuple[str, ...]:
        """The column names in source order."""
        return tuple(column.name for column in self.layout)

    @property
    def identity(self) -> str:
        """What names one row (:func:`~airflow_provider_streambed.staging.capture_manifest.row_identity`)."""
        return row_identity(self.key_columns, self.keyless)


def source_conninfo(conn: psycopg.Connection[Any], **overrides: str) -> str:
    """The parameters of ``conn`` (password included) for another session to the source, with ``overrides``.

    Secret: never log the result.
    """
    parameters = dict(conn.info.get_parameters())
    if conn.info.password:
        parameters["password"] = conn.info.password
    return make_conninfo("", **{**parameters, **overrides})


def check_server(conn: psycopg.Connection[Any], group: RefreshGroup) -> None:
    """Fail unless ``wal_level`` is logical and the role may use replication slots.

    Raises:
        SourceError: the setting or the right is missing; the message says how to fix it.
    """
    row = conn.execute(
        "SELECT current_setting('wal_level'), r.rolsuper OR r.rolreplication, current_user::text "
        "FROM pg_roles r WHERE r.rolname = current_user"
    ).fetchone()
    assert row is not None
    wal_level, may_replicate, role = row
    if wal_level != "logical":
        raise SourceError(
            f"group {group.name!r}: the source has wal_level={wal_level!r}; logical decoding needs "
            "wal_level=logical (ALTER SYSTEM SET wal_level = logical, then restart PostgreSQL)"
        )
    if not may_replicate:
        raise SourceError(
            f"group {group.name!r}: role {role!r} lacks replication rights; "
            f"grant them with ALTER ROLE {role} REPLICATION"
        )


def describe_table(
    conn: psycopg.Connection[Any], group: RefreshGroup, mirror: Mirror, resolver: TypeResolver | None = None
) -> SourceTable:
    """The catalog description of a mirrored table, checking it exists and has a usable key.

    Raises:
        SourceError: the table is missing, the role may not read it (or some of its columns), it
            is UNLOGGED (its changes never reach the WAL), or it has no primary key nor usable
            replica identity (or replica identity NOTHING), or its key is a DEFERRABLE primary
            key, while the mirror is not append-only; UnsupportedTypeError for a column whose type
            the type mapping does not carry.
    """
    row = conn.execute(_TABLE_QUERY, (mirror.schema, mirror.table)).fetchone()
    where = f"group {group.name!r}, member {mirror.name!r}"
    if row is None:
        raise SourceError(f"{where}: source table {mirror.qualified_table!r} does not exist")
    (oid, identity, persistence, names, types, modifiers, attnums, primary_key, deferrable, identity_index, unreadable,
     filled, role, storage, leaves) = row
    columns = tuple(names or ())
    if unreadable:
        what = "" if len(unreadable) == len(columns) else f" columns {', '.join(unreadable)} of"
        raise SourceError(
            f"{where}: role {role!r} lacks the SELECT privilege on{what} source table {mirror.qualified_table!r} "
            f"(bootstrap copies and resyncs read it); GRANT SELECT ON {mirror.qualified_table} TO {role}"
        )
    if persistence != "p":
        raise SourceError(
            f"{where}: source table {mirror.qualified_table!r} is UNLOGGED (or temporary): its changes are not "
            "written to the WAL, so logical decoding never sees them and the mirror would silently miss them; make "
            f"it logged (ALTER TABLE {mirror.qualified_table} SET LOGGED) or leave it out of the group"
        )
    if identity == "n" and not mirror.append_only:
        raise SourceError(
            f"{where}: source table {mirror.qualified_table!r} has REPLICA IDENTITY NOTHING: its updates and deletes "
            "carry no key, so the mirror cannot find the rows they change; set REPLICA IDENTITY DEFAULT (with a "
            "primary key), USING INDEX or FULL, or declare the mirror append_only=True"
        )
    if identity == "i" and identity_index:
        key = tuple(identity_index)
    elif identity in ("d", "f") and primary_key:
        key = tuple(primary_key)
    else:
        key = ()
    keyless = identity == "f" and not key and not mirror.append_only
    if deferrable and primary_key and key == tuple(primary_key) and not mirror.append_only:
        raise SourceError(
            f"{where}: source table {mirror.qualified_table!r} has a DEFERRABLE primary key: one statement may "
            "move keys through each other (UPDATE ... SET id = id + 1), which the mirror cannot follow and would "
            f"lose rows; re-create it not deferrable (ALTER TABLE {mirror.qualified_table} DROP CONSTRAINT ..., ADD "
            f"PRIMARY KEY ({', '.join(primary_key)})), set REPLICA IDENTITY USING INDEX on a unique index that is "
            "not deferrable, or declare the mirror append_only=True"
        )
    if not key and not keyless and not mirror.append_only:
        raise SourceError(
            f"{where}: source table {mirror.qualified_table!r} has neither a primary key nor a usable "
            "replica identity; add a primary key, set REPLICA IDENTITY USING INDEX/FULL, "
            "or declare the mirror append_only=True"
        )
    identity_columns = columns if identity == "f" else key  # as pgoutput's Relation flags them
    layout = tuple(
        Column(name, int(type_oid), int(modifier), name in identity_columns)
        for name, type_oid, modifier in zip(columns, types or (), modifiers or (), strict=True)
    )
    types = (resolver or TypeResolver(conn)).column_types(
        f"{where}, table {mirror.qualified_table!r}", ((c.name, c.type_oid, c.type_modifier) for c in layout)
    )
    return SourceTable(mirror.name, mirror.qualified_table, int(oid), layout, key, types, tuple(filled or ()), keyless,
                       storage or "", tuple(attnums or ()), leaves or "")


def table_partitions(conn: psycopg.Connection[Any], oid: int) -> tuple[str, str]:
    """A table's :attr:`SourceTable.storage` and :attr:`SourceTable.leaves` now (empty: a plain
    table, or gone)."""
    row = conn.execute(f"SELECT {_STORAGE}, {_LEAVES} FROM pg_class c WHERE c.oid = %s", (oid,)).fetchone()
    return ("", "") if row is None else (row[0] or "", row[1] or "")


def slot_exists(conn: psycopg.Connection[Any], group: RefreshGroup) -> bool:
    """Whether the group's replication slot exists in this database."""
    query = "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s AND database = current_database()"
    return conn.execute(query, (slot_name(group),)).fetchone() is not None


def check_slot_capacity(conn: psycopg.Connection[Any], group: RefreshGroup) -> None:
    """Fail if no replication slot is free for the group's new slot.

    Raises:
        SlotError: every slot is in use; names the setting to raise.
    """
    row = conn.execute(
        "SELECT count(*), current_setting('max_replication_slots')::int FROM pg_replication_slots"
    ).fetchone()
    assert row is not None
    used, total = row
    if used >= total:
        raise SlotError(
            f"group {group.name!r}: all {total} replication slots are in use; drop an unused slot or raise "
            "max_replication_slots (restart needed)"
        )
