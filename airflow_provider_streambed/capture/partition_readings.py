"""What a run reads of its partitioned tables' partitions around the pin of W, and how far it trusts it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import psycopg

from airflow_provider_streambed.capture.resyncs import LastCutMirror
from airflow_provider_streambed.capture.source import SourceTable, table_partitions
from airflow_provider_streambed.capture.waits import older_transactions_ended
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import SchemaChangeError

logger = logging.getLogger(__name__)

#: How long a run waits after the pin of W for the transactions running then to end, before
#: it reads its partitioned tables' partitions again, when their old rows could be promised whole
#: (the deletes would carry them); past it, the run's deletes carry no rows.
SETTLE_SECONDS = 2.0


def check_partitions_held(conn: psycopg.Connection[Any], group: RefreshGroup, tables: dict[str, SourceTable]) -> None:
    """Check that no partitioned table's partitions changed between its description and the pin of W.

    Raises:
        SchemaChangeError: (final) one did: a partition attached, detached, dropped or truncated
            then is in no change record before W, so this run cannot publish the table exactly;
            the next run compares it with the last cut and copies it again.
    """
    for member, table in tables.items():
        if table.partitioned and table_partitions(conn, table.oid)[0] != table.storage:
            raise SchemaChangeError(
                f"group {group.name!r}, member {member!r}: the partitions of source table {table.qualified_name} "
                "changed while the run captured it (a partition attached, detached, dropped or truncated), which no "
                "change record before W holds; this run cannot publish it exactly: the next run copies it again"
            )


def _may_hold(table: SourceTable, last: LastCutMirror | None) -> bool:
    """Whether a partitioned table's old rows may be promised whole this run, as far as its
    description tells: every partition FULL, the reading equal to the last cut's."""
    return table.leaves_full and bool(table.leaves) and last is not None and last.leaves == table.leaves


@dataclass(frozen=True, slots=True)
class PartitionReadings:
    """What a run read of its partitioned tables' partitions after the pin of W, and how far it is
    trusted.

    Attributes:
        after_pin: each one's partitions' identities (:attr:`.SourceTable.leaves`), by member.
        settled: every transaction running at the pin had ended before, so the reading saw every
            commit before W (a commit's WAL record precedes its visibility).
        fresh: the tables were described before W, or with no WAL written in between (the WAL
            insert position read right after the description is not past W); a retry, which
            reuses its first W, an explicit W and another attempt's pin meanwhile may fail it.
    """

    after_pin: Mapping[str, str]
    settled: bool
    fresh: bool

    def old_rows_held(self, member: str, table: SourceTable, last: LastCutMirror | None) -> bool:
        """Whether the old rows the table's changes mark whole (``O``) were whole over the run's
        range: always for a plain table (PostgreSQL marks them by its own identity, change by
        change). A partitioned table's are marked by its identity but logged by each partition's:
        whole when every partition was FULL and no partition's ``pg_class`` row changed from the
        last cut's reading (taken before that run's W and held past it) until after this run's W."""
        if not table.partitioned:
            return True
        return _may_hold(table, last) and self.settled and self.after_pin.get(member) == table.leaves

    def recorded(self, member: str, table: SourceTable) -> str:
        """What the mirror's snapshot records for the next run (:attr:`.TableCapture.leaves`): the
        reading taken when the run began, when that was before W and held past it; else empty."""
        return table.leaves if self.fresh and self.after_pin.get(member) == table.leaves else ""


def read_partitions(
    conn: psycopg.Connection[Any], group: RefreshGroup, tables: dict[str, SourceTable],
    previous: Mapping[str, LastCutMirror], fresh: bool,
) -> PartitionReadings:
    """The partitioned tables' partitions' identities read again after the pin of W, first waiting
    up to :data:`SETTLE_SECONDS` for the transactions running then to end when some table's old
    rows could be promised whole (a run that captures changes: an unchanged one needs none)."""
    promising = [member for member, table in tables.items()
                 if table.partitioned and _may_hold(table, previous.get(member))]
    settled = bool(promising) and older_transactions_ended(conn, SETTLE_SECONDS)
    if promising and not settled:
        logger.info("group=%s: transactions running after the pin of W had not ended after %g s; the deletes of %s "
                    "carry no rows this run", group.name, SETTLE_SECONDS, ", ".join(promising))
    readings = {member: table_partitions(conn, table.oid)[1] for member, table in tables.items() if table.partitioned}
    return PartitionReadings(readings, settled, fresh)
