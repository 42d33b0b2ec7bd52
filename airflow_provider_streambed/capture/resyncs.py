"""Which mirrors a run copies again (a *resync* of the member), and why.

A mirror follows its source table change by change, and follows its columns in place: a column
dropped, renamed (a column's identity is its ``attnum``, :func:`renamed_columns`), added without
a default, or widened in a way Iceberg promotes (int to bigint, real to double precision, a
numeric's precision raised) evolves the mirror's schema by field id in the same cut, its files
kept (:func:`column_aliases` tells the merges each column's older names). Some changes of a table
no change record carries, so a mirror cannot follow them:

- a column added with a default: the rows from before the ``ALTER TABLE`` read a constant one
  from the source's catalog (``pg_attribute.atthasmissing``), and a volatile one (``DEFAULT
  now()``) was written into them by a table rewrite, which logical decoding does not carry;
- a column whose type changed in a way Iceberg cannot promote (compared as Iceberg types:
  ``smallint`` and ``integer`` are both Iceberg ``int``), ``USING`` rewrites included. A ``USING``
  that changes values within a type Iceberg promotes (``TYPE bigint USING id * 100``) cannot be
  told from a widening by the catalog: that member needs a resync asked for by hand;
- a column that takes a name the mirror's files hold for another column (the same name under
  another ``attnum``, an older name of a renamed column, or a name of a dropped column): the
  older files would read as the new column;
- what names one row changed (the primary key, the replica identity, or a key dropped so the
  table became keyless): changes before and after name rows differently;
- a partitioned table's partitions changed (``oid:relfilenode`` of each leaf): a partition
  attached with its rows, detached, dropped or truncated. PostgreSQL publishes none of these
  through the partitioned table. A ``TRUNCATE`` of the partitioned table itself, a ``VACUUM
  FULL`` or ``CLUSTER`` of a partition change it too: the member is then copied again
  needlessly, never wrongly.

Under ``on_schema_change="evolve"`` (the default) the run copies such a member again at a
snapshot consistent with its W, exactly as it copies a member added to the group, and publishes
the copy (with the changes after it) as the member's whole table in the same cut; the other
members keep merging. Under ``"fail"`` the run fails with a final
:class:`~airflow_provider_streambed.exceptions.SchemaChangeError` naming the member and the
command that resyncs it. A user may ask for a resync of any member (``resync_members``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from airflow_provider_streambed.capture.source import NO_PARTITIONS, SourceTable
from airflow_provider_streambed.exceptions import SchemaChangeError, resync_member_fix
from airflow_provider_streambed.staging.column_changes import columns_change, iceberg_type, types_change
from airflow_provider_streambed.staging.iceberg_fields import FIELD_ID

#: A resync the user asked for.
REQUESTED = "requested"


@dataclass(frozen=True, slots=True)
class LastCutMirror:
    """A mirror as the group's last cut has it.

    Attributes:
        columns: its columns, with the Arrow types Iceberg reads them as.
        storage: its source table's partitions when that snapshot was captured (empty: a plain
            table, or recorded by an older release, which read a partitioned table without
            partitions as empty too).
        leaves: its source table's partitions' replica identities then, when they held through
            that run (:attr:`~airflow_provider_streambed.staging.TableCapture.leaves`; empty: a
            plain table, they changed, or recorded by an older release).
        identity: what named one of its rows then (``key:<columns>`` or ``keyless``; empty: an
            append-only table, or recorded by an older release; not compared).
        attnums: each column's ``attnum`` by name then (empty: recorded by an older release;
            renames are then not told from drops).
        names: each column's names in the mirror's files, by its name then (the table's name
            mapping: a renamed column keeps its older names; a column missing here has only its own).
        retired: names the mirror's files may hold for columns dropped since (the name mapping's
            names of fields no longer in the schema).
    """

    columns: pa.Schema
    storage: str = ""
    identity: str = ""
    attnums: Mapping[str, int] = field(default_factory=dict)
    names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    retired: frozenset[str] = frozenset()
    leaves: str = ""

    @classmethod
    def of(
        cls, columns: pa.Schema, source: Mapping[str, str], names: Mapping[str, tuple[str, ...]] | None = None,
        retired: Collection[str] = (),
    ) -> LastCutMirror:
        """From the mirror's columns, what the capture recorded of its source table
        (:meth:`~airflow_provider_streambed.staging.TableCapture.source_record`) and its files'
        column names (``names``, ``retired``)."""
        attnums = json.loads(source["attnums"]) if source.get("attnums") else {}
        return cls(columns, source.get("storage", ""), source.get("identity", ""),
                   {str(name): int(attnum) for name, attnum in attnums.items()}, dict(names or {}), frozenset(retired),
                   source.get("leaves", ""))

    @property
    def field_ids(self) -> dict[str, int]:
        """Each column's Iceberg field id, by name (columns read without one are left out)."""
        return {column.name: int(column.metadata[FIELD_ID]) for column in self.columns
                if column.metadata and FIELD_ID in column.metadata}


def resync_reasons(
    tables: Mapping[str, SourceTable], previous: Mapping[str, LastCutMirror], requested: Collection[str] = ()
) -> dict[str, str]:
    """Per member to copy again this run, why.

    Args:
        tables: the mirrored tables as the source describes them now, by member.
        previous: each mirror as the group's last cut has it (a member without one is copied
            anyway: it is new to the group).
        requested: members the user asked to resync (names as declared).
    """
    wanted = {name.lower() for name in requested}
    reasons = {}
    for member, table in tables.items():
        if member.lower() in wanted:
            reasons[member] = REQUESTED
        elif member in previous and (why := source_change(table, previous[member])):
            reasons[member] = why
    return reasons


def _partitions_since_none(table: SourceTable, previous: LastCutMirror) -> bool:
    """Whether a partitioned table recorded without partitions by a release that read an empty
    storage for it (recorded ``attnums``, which came with ``storage``, but no ``storage``) has
    partitions now: one attached with its rows, which no change record holds."""
    return not previous.storage and bool(previous.attnums) and table.partitioned and table.storage != NO_PARTITIONS


def source_change(table: SourceTable, previous: LastCutMirror) -> str:
    """How ``table`` changed since the mirror's ``previous`` cut in a way the mirror cannot follow
    in place (empty: it did not)."""
    if previous.identity and table.identity and table.identity != previous.identity:
        return (f"what names one row changed from {previous.identity} to {table.identity} (primary key or replica "
                "identity)")
    if (previous.storage and table.storage != previous.storage) or _partitions_since_none(table, previous):
        return "its partitions changed (a partition attached, detached, dropped, truncated or rewritten)"
    held = {other: previous.attnums[field] for field, names in previous.names.items() if field in previous.attnums
            for other in names}  # every name the mirror's files hold a live column under, its attnum
    held.update(previous.attnums)
    reused = [name for name, attnum in zip(table.columns, table.attnums, strict=False)
              if held.get(name, attnum) != attnum or name in previous.retired]
    if reused:
        return (f"columns {reused} take a name the mirror's older files hold for another column (a dropped or "
                "renamed one)")
    renamed = renamed_columns(table, previous)
    return columns_change(table.columns, table.filled_columns, previous.columns.names, renamed) or types_change(
        [(name, pg_type.arrow) for name, pg_type in zip(table.columns, table.types, strict=True)], previous.columns,
        renamed)


def renamed_columns(table: SourceTable, previous: LastCutMirror) -> dict[str, str]:
    """The columns renamed since the mirror's previous cut (old name -> new), told by ``attnum``
    (none without recorded attnums: a rename then reads as a drop and an add)."""
    names = {attnum: name for name, attnum in previous.attnums.items()}
    return {names[attnum]: name for name, attnum in zip(table.columns, table.attnums, strict=False)
            if attnum in names and names[attnum] != name}


def column_aliases(table: SourceTable, previous: LastCutMirror) -> dict[str, tuple[str, ...]]:
    """Each column's other names in the mirror's files and this run's changelog (a column renamed
    since, or before, the last cut), by its name now; columns without other names are left out."""
    earlier = {new: old for old, new in renamed_columns(table, previous).items()}
    aliases = {}
    for name in table.columns:
        then = earlier.get(name, name)
        if others := tuple(dict.fromkeys(other for other in (then, *previous.names.get(then, ())) if other != name)):
            aliases[name] = others
    return aliases


def reshaped(table: SourceTable, previous: LastCutMirror) -> bool:
    """Whether ``table``'s columns (names, order or Iceberg types) differ from its mirror's in the
    last cut (a rename included): the next cut evolves the mirror's schema, even without a change
    of its rows."""
    now = [(name, iceberg_type(pg_type.arrow)) for name, pg_type in zip(table.columns, table.types, strict=True)]
    return now != [(field.name, iceberg_type(field.type)) for field in previous.columns]


def check_policy(group: str, policy: str, reasons: Mapping[str, str], tables: Mapping[str, SourceTable]) -> None:
    """Refuse the resyncs a source change calls for under ``on_schema_change="fail"``.

    Raises:
        SchemaChangeError: (final) a member's table changed and the policy is ``"fail"``; names
            the table, the change and the command that resyncs the member.
    """
    if policy != "fail":
        return
    for member, why in reasons.items():
        if why != REQUESTED:
            raise SchemaChangeError(
                f"group {group!r}, member {member!r}: source table {tables[member].qualified_name}: {why}, which the "
                f"mirror cannot follow in place, and the group's on_schema_change is 'fail'; "
                f"{resync_member_fix(group, member)}"
            )
