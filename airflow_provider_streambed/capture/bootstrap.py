"""Bootstrap copies: a mirrored table's full content, taken so that the changelog completes it to W.

**First run of a group.** The slot is created over a replication connection with
``EXPORT_SNAPSHOT`` (:func:`.slot.create_slot_with_snapshot`); its consistent point is ``L0``.
Every mirrored table is copied (:mod:`.copy`: binary ``COPY`` into Arrow through ADBC, over
``copy_parallelism`` connections) in ``REPEATABLE READ`` transactions that all import that
snapshot, so the copy holds exactly the transactions with commit LSN < L0, and the slot decodes
exactly those with commit LSN >= L0. W is pinned after the copy; extraction
then writes the changes of ``[L0, W)``. The merge applies them on top of the copy in commit order,
idempotently (upsert by key, delete if present, truncate drops what came before), which gives:
copy state at L0 + every transaction in [L0, W) in commit order = the state containing exactly the
transactions with commit LSN < W. The copy and the decoded changes are disjoint, so each change
reaches the mirror once (an append-only or keyless mirror counts rows: a repeat would show).

**A mirror added to a group that already has cuts.** Its table is added to the publication
(``ALTER PUBLICATION ... SET TABLE``, committed by :func:`.setup.ensure_source`) and then copied
at a snapshot exported (``pg_export_snapshot()``) after that commit. Changes committed after the ALTER
are decoded; those committed before it are in the copy; those committed between the ALTER and
the copy's snapshot would be in both. So the export also reads the snapshot's visibility
(``pg_current_snapshot()`` in the same transaction: xmin, xmax, the xids in progress), recorded
with each copy as a :class:`.copy_snapshot.CopySnapshot`, and extraction drops the member's
changes of every transaction that snapshot holds: each change reaches the mirror once, which an
append-only or keyless mirror needs (a keyed merge absorbs a repeat; they would count it twice).
The snapshot is exported once the transactions running after the ALTER have ended
(:func:`.waits.wait_for_running`): a write made before the ALTER by a transaction committing
after it is not decoded (the table was not published yet), so the copy must hold it.

The copy files have the mirror's columns only, typed as the changelog's are: the refresh takes
them as the mirror's starting snapshot and applies the changes to it merge-on-read, and the
first cut references them as data files (no second pass over the rows).

A small record, ``_capture/bootstrap.json`` (:mod:`.bootstrap_marker`), is written after the
copies; a retried run whose slot still sits at the recorded consistent point reuses them instead
of copying again, and a retry reusing added members' copies filters by their recorded snapshot.
An older release's record of added copies has no snapshot and is not reused (unfiltered, they
would repeat changes): they are copied again, at a recorded snapshot, which is exact while W is
not pinned yet. A pinned run whose copies are gone or unusable fails instead, as a first run
does, naming a new run as the fix: a copy taken after W would hold the next run's transactions.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import psycopg

from airflow_provider_streambed import storage
from airflow_provider_streambed.capture.bootstrap_marker import BootstrapCopy, read_marker, write_marker
from airflow_provider_streambed.capture.copy import (
    COPY_PREFIX,
    DEFAULT_PROGRESS_INTERVAL,
    CopyRange,
    RangeOutput,
    TableProgress,
    run_copies,
    split_ranges,
)
from airflow_provider_streambed.capture.copy_snapshot import CopySnapshot
from airflow_provider_streambed.capture.names import slot_name
from airflow_provider_streambed.capture.slot import (
    REMEDY,
    advance_slot,
    check_slot,
    create_slot_with_snapshot,
    drop_slot,
    slot_position,
)
from airflow_provider_streambed.capture.source import SourceTable, check_slot_capacity, source_conninfo
from airflow_provider_streambed.capture.waits import wait_for_running
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import DeclarationError, SlotError, SourceError
from airflow_provider_streambed.ledger import CutRecord, RunRecord
from airflow_provider_streambed.staging import delete_files, join

logger = logging.getLogger(__name__)

DEFAULT_COPY_PARALLELISM = 2


@dataclass(frozen=True, slots=True)
class CopyOptions:
    """How bootstrap copies run.

    Attributes:
        parallelism: copy connections (``copy_parallelism``); a large table is split into ctid
            ranges copied concurrently, all at one snapshot.
        progress_interval: seconds between progress lines of a long copy.
        on_progress: called with a table's progress at every interval and at the end (gauges).

    Raises:
        DeclarationError: ``parallelism`` is below 1 or ``progress_interval`` is not positive
            (checked when a DAG file makes the capture task).
    """

    parallelism: int = DEFAULT_COPY_PARALLELISM
    progress_interval: float = DEFAULT_PROGRESS_INTERVAL
    on_progress: Callable[[TableProgress], None] | None = None

    def __post_init__(self) -> None:
        if self.parallelism < 1:
            raise DeclarationError(f"copy_parallelism must be at least 1, not {self.parallelism}")
        if self.progress_interval <= 0:
            raise DeclarationError(f"the copy progress interval must be positive, not {self.progress_interval}")


class ExportedSnapshot(NamedTuple):
    """A snapshot exported for copies: its name to import, and its visibility."""

    name: str
    visibility: CopySnapshot


@contextlib.contextmanager
def exported_snapshot(conn: psycopg.Connection[Any]) -> Iterator[ExportedSnapshot]:
    """Export a snapshot of now from ``conn`` (an autocommit connection), alive while the block runs.

    Its visibility is read in the same ``REPEATABLE READ`` transaction, so it is that snapshot's.
    """
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SET LOCAL idle_in_transaction_session_timeout = 0")  # idle while the copies run
        row = conn.execute("SELECT pg_export_snapshot(), pg_current_snapshot()::text").fetchone()
        assert row is not None
        yield ExportedSnapshot(str(row[0]), CopySnapshot.parse(row[1]))


#: Heap blocks of a table (of its largest partition) and its rows estimate (summed over partitions).
_SIZE_QUERY = """
SELECT max(pg_relation_size(c.oid)) / current_setting('block_size')::int8, sum(greatest(c.reltuples, 0))::int8
FROM unnest(coalesce(
    (SELECT array_agg(relid) FROM pg_partition_tree(%(table)s::oid::regclass) WHERE isleaf),
    ARRAY[%(table)s::oid::regclass])) AS leaf
JOIN pg_class c ON c.oid = leaf
"""


def _plan(conn: psycopg.Connection[Any], tables: list[SourceTable], parallelism: int) -> tuple[
        list[CopyRange], dict[str, int]]:
    """The ranges to copy, largest first, and each table's row estimate (``pg_class.reltuples``).

    A partitioned table's ranges are block ranges of every partition at once (a ctid is a
    position in its partition): they are sized by its largest partition, and its estimate is
    the sum of its partitions'.
    """
    ranges: list[CopyRange] = []
    estimates: dict[str, int] = {}
    for table in tables:
        row = conn.execute(
            _SIZE_QUERY, {"table": table.oid},
        ).fetchone()
        if row is None or row[0] is None:
            raise SourceError(f"member {table.member!r}: table {table.qualified_name!r} was dropped")
        blocks, estimate = int(row[0]), int(row[1])
        ranges += split_ranges(table, blocks, parallelism)
        estimates[table.member] = estimate
    ranges.sort(key=lambda item: item.blocks, reverse=True)
    return ranges, estimates


def _kept(outputs: list[RangeOutput]) -> list[RangeOutput]:
    """The ranges whose files become the copy: those with rows (their empty files are deleted), or
    the first range when the table is empty (its file carries the schema)."""
    kept = [output for output in outputs if output.rows] or outputs[:1]
    for output in outputs:
        if output not in kept:
            for uri in output.files:
                filesystem, path = storage.filesystem(uri)
                filesystem.delete_file(path)
    return kept


def copy_tables(
    conn: psycopg.Connection[Any],
    group: RefreshGroup,
    tables: list[SourceTable],
    capture_dir: str,
    options: CopyOptions,
    snapshot_name: str,
    snapshot: CopySnapshot | None = None,
) -> dict[str, BootstrapCopy]:
    """Copy ``tables`` at one exported snapshot.

    Args:
        conn: an autocommit connection to the source database; the copies connect like it.
        group: the refresh group.
        tables: the tables to copy.
        capture_dir: the run's ``_capture`` directory URI; files go to ``<member>/copy-*.parquet``.
        options: parallelism and progress reporting.
        snapshot_name: the exported snapshot to import (the slot's on a first run).
        snapshot: its visibility, recorded with each copy when extraction filters by it.

    Returns:
        The copies by member name.
    """
    parallelism = options.parallelism
    began = time.monotonic()
    directories = {table.member: join(capture_dir, table.member) for table in tables}
    for directory in directories.values():
        delete_files(directory, f"{COPY_PREFIX}-")  # an earlier, unfinished attempt's
    ranges, estimates = _plan(conn, tables, parallelism)
    progress = {
        table.member: TableProgress(table.member, table.qualified_name, estimates[table.member],
                                    sum(1 for r in ranges if r.table.member == table.member))
        for table in tables
    }
    outputs = run_copies(
        source_conninfo(conn), snapshot_name, ranges, directories, progress, group=group.name,
        parallelism=parallelism, progress_interval=options.progress_interval, on_progress=options.on_progress,
    )
    copies = {}
    for table in tables:
        mine = _kept(sorted((o for o in outputs if o.range.table.member == table.member),
                            key=lambda o: o.range.index))
        copies[table.member] = BootstrapCopy(
            tuple(file for o in mine for file in o.files), sum(o.rows for o in mine), table.columns,
            sum(o.bytes for o in mine), snapshot,
        )
    logger.info(
        "group=%s: bootstrap copied %s in %.2f s (copy_parallelism=%d)", group.name,
        ", ".join(f"{member}={copy.rows} rows" for member, copy in copies.items()), time.monotonic() - began,
        parallelism,
    )
    return copies


def _copies_gone(group: RefreshGroup, stored: RunRecord) -> SlotError:
    """The error of a pinned run whose copies must be taken again: taken now, after W, they
    would hold transactions of the next run."""
    return SlotError(
        f"group {group.name!r}: run {stored.run_key!r} pinned W={stored.watermark} but its bootstrap copies are gone "
        f"(or were recorded by an older release); start a new run (streambed runs supersede --group {group.name} "
        f"{stored.run_key})"
    )


def _first_copies(
    conn: psycopg.Connection[Any], group: RefreshGroup, tables: dict[str, SourceTable], capture_dir: str,
    stored: RunRecord | None, options: CopyOptions, wait_timeout: float,
) -> dict[str, BootstrapCopy]:
    """The copies of a group's first run or of a resync, taken at a new slot's consistent point;
    reused when the slot is still where they were taken (a retry)."""
    marker = read_marker(capture_dir)
    position = slot_position(conn, group)
    if position is not None:
        if marker is not None and marker.consistent_point == position and set(marker.copies) == set(tables):
            logger.info("group=%s: reusing the bootstrap copies at %s", group.name, position)
            return marker.copies
        if stored is not None:
            raise _copies_gone(group, stored)
        logger.warning("group=%s: dropping slot %s at %s to copy every table again", group.name, slot_name(group),
                       position)
        drop_slot(conn, group)  # this run copies every table: nothing decoded from the old slot is needed
    elif stored is not None:
        raise SlotError(f"group {group.name!r}: the slot vanished after run {stored.run_key!r} pinned "
                        f"W={stored.watermark}; supersede that run, then {REMEDY}")
    check_slot_capacity(conn, group)
    with create_slot_with_snapshot(conn, group, wait_timeout) as created:
        copies = copy_tables(conn, group, list(tables.values()), capture_dir, options, created.snapshot_name)
    write_marker(capture_dir, created.consistent_point, copies)
    return copies


def _added_copies(
    conn: psycopg.Connection[Any], group: RefreshGroup, tables: list[SourceTable], capture_dir: str,
    stored: RunRecord | None, options: CopyOptions, wait_timeout: float,
) -> dict[str, BootstrapCopy]:
    """Copies of mirrors that have no previous cut (added to an existing group), at one exported
    snapshot recorded with each copy: extraction drops their changes that the copy holds. The
    snapshot is taken once the transactions running after the publication changed have ended."""
    if not tables:
        return {}
    marker = read_marker(capture_dir)
    if marker is not None and {t.member for t in tables} <= set(marker.copies):
        return {t.member: marker.copies[t.member] for t in tables}
    if stored is not None:
        raise _copies_gone(group, stored)
    wait_for_running(conn, what=f"group {group.name!r}: copying added members {sorted(t.member for t in tables)}",
                     timeout=wait_timeout)
    with exported_snapshot(conn) as exported:
        copies = copy_tables(conn, group, tables, capture_dir, options, exported.name, exported.visibility)
    write_marker(capture_dir, None, copies)
    return copies


def copies_for_run(
    conn: psycopg.Connection[Any], group: RefreshGroup, tables: dict[str, SourceTable], capture_dir: str,
    stored: RunRecord | None, last: CutRecord | None, resync: bool, options: CopyOptions, wait_timeout: float,
    resynced: Collection[str] = (),
) -> dict[str, BootstrapCopy]:
    """The bootstrap copies this run needs: every table on the first run and on a resync of the
    group, else those of added members and of ``resynced`` ones (copied the same way).

    Raises:
        SlotError: the slot is missing or lost, or the run pinned W and its copies are gone.
        CaptureError: added members' copy waited too long for other transactions to end.
    """
    if last is None or resync:
        return _first_copies(conn, group, tables, capture_dir, stored, options, wait_timeout)
    if check_slot(conn, group).confirmed_flush < last.watermark:
        advance_slot(conn, group, last.watermark)  # an earlier run published but did not advance
    added = [table for member, table in tables.items() if member not in last.members or member in resynced]
    return _added_copies(conn, group, added, capture_dir, stored, options, wait_timeout)
