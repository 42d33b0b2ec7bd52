"""Which mirrors a run copies again (a *resync* of the member), and why.

A mirror follows its source table change by change while the table's columns are those of its
previous cut. Some changes of a table no change record carries, so a mirror cannot follow them:

- a column dropped or renamed (a column's identity is its ``attnum``: the copy's column keeps its
  field id under its new name, :func:`renamed_columns`);
- a column added with a ``DEFAULT``: the rows from before the ``ALTER TABLE`` read it from the
  source's catalog (``pg_attribute.atthasmissing``), and no WAL record holds it;
- a column whose type changed, compared as Iceberg types (``smallint`` and ``integer`` are both
  Iceberg ``int``);
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

from airflow_provider_streambed.capture.source import SourceTable
from airflow_provider_streambed.column_changes import columns_change, types_change
from airflow_provider_streambed.exceptions import SchemaChangeError

#: A resync the user asked for.
REQUESTED = "requested"


@dataclass(frozen=True, slots=True)
class LastCutMirror:
    """A mirror as the group's last cut has it.

    Attributes:
        columns: its columns, with the Arrow types Iceberg reads them as.
        storage: its source table's partitions when that snapshot was captured (empty: a plain
            table, or recorded by an older release; not compared).
        identity: what named one of its rows then (``key:<columns>`` or ``keyless``; empty: an
            append-only table, or recorded by an older release; not compared).
        attnums: each column's ``attnum`` by name then (empty: recorded by an older release;
            renames are then not told from drops).
    """

    columns: pa.Schema
    storage: str = ""
    identity: str = ""
    attnums: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, columns: pa.Schema, source: Mapping[str, str]) -> LastCutMirror:
        """From the mirror's columns and what the capture recorded of its source table
        (:meth:`~airflow_provider_streambed.staging.TableCapture.source_record`)."""
        attnums = json.loads(source["attnums"]) if source.get("attnums") else {}
        return cls(columns, source.get("storage", ""), source.get("identity", ""),
                   {str(name): int(attnum) for name, attnum in attnums.items()})


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


def source_change(table: SourceTable, previous: LastCutMirror) -> str:
    """How ``table`` changed since the mirror's ``previous`` cut in a way no change record
    carries (empty: it did not)."""
    if previous.identity and table.identity and table.identity != previous.identity:
        return (f"what names one row changed from {previous.identity} to {table.identity} (primary key or replica "
                "identity)")
    if previous.storage and table.storage != previous.storage:
        return "its partitions changed (a partition attached, detached, dropped, truncated or rewritten)"
    if renamed := renamed_columns(table, previous):
        return f"columns {list(renamed)} were renamed to {list(renamed.values())}"
    return columns_change(table.columns, table.filled_columns, previous.columns.names) or types_change(
        [(name, pg_type.arrow) for name, pg_type in zip(table.columns, table.types, strict=True)], previous.columns)


def renamed_columns(table: SourceTable, previous: LastCutMirror) -> dict[str, str]:
    """The columns renamed since the mirror's previous cut (old name -> new), told by ``attnum``
    (none without recorded attnums: a rename then reads as a drop and an add)."""
    names = {attnum: name for name, attnum in previous.attnums.items()}
    return {names[attnum]: name for name, attnum in zip(table.columns, table.attnums, strict=False)
            if attnum in names and names[attnum] != name}


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
                f"mirror cannot follow change by change, and the group's on_schema_change is 'fail'; resync the "
                f"member (`streambed resync --group {group} --member {member}`, or the Param 'resync_members' "
                f"['{member}']) to copy it again in the next cut"
            )
