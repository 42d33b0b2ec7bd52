"""One capture step of a run: source checks, bootstrap copies, pinned W, changelog, manifest.

:func:`capture_run` is idempotent per run key: the first call pins W in the ledger before it
extracts; a retry reuses that W, and returns the manifest without extracting again when it
exists for that W. It never advances the slot past a published cut (the caller does, after
publish, with :func:`~airflow_provider_streambed.capture.slot.advance_slot`).

On a quiet source the WAL does not move, so W can equal the last cut's W: the run is then
*unchanged* (:class:`~airflow_provider_streambed.ledger.runs.UnchangedRun`): recorded in the
ledger, nothing extracted, nothing to refresh or publish.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import pq

from airflow_provider_streambed.capture.bootstrap import copies_for_run
from airflow_provider_streambed.capture.bootstrap_marker import BootstrapCopy
from airflow_provider_streambed.capture.changelog import CHANGES_PREFIX
from airflow_provider_streambed.capture.extract import ExtractResult, extract_changes
from airflow_provider_streambed.capture.holdback import HoldbackReport, probe_holdback
from airflow_provider_streambed.capture.names import slot_name
from airflow_provider_streambed.capture.partition_readings import (
    PartitionReadings,
    check_partitions_held,
    read_partitions,
)
from airflow_provider_streambed.capture.resyncs import (
    LastCutMirror,
    check_policy,
    column_aliases,
    renamed_columns,
    reshaped,
    resync_reasons,
)
from airflow_provider_streambed.capture.run_records import CaptureResult, CaptureSettings
from airflow_provider_streambed.capture.setup import ensure_source
from airflow_provider_streambed.capture.slot import REMEDY, check_slot, slot_position, warn_retention
from airflow_provider_streambed.capture.source import SourceTable
from airflow_provider_streambed.capture.watermark import current_insert_lsn, pin_watermark
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import (
    DeclarationError,
    InvalidWatermarkError,
    SlotError,
    SourceError,
    WatermarkError,
)
from airflow_provider_streambed.ledger import CutRecord, Ledger, RunRecord, RunState
from airflow_provider_streambed.ledger.runs import UnchangedRun
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.member_declarations import Mirror
from airflow_provider_streambed.staging import (
    CAPTURE_DIR,
    CaptureManifest,
    TableCapture,
    capture_manifest_uri,
    delete_files,
    join,
    read_json,
    staging_root,
    write_json,
)

logger = logging.getLogger(__name__)


def _autocommit(conn: psycopg.Connection[Any], group: RefreshGroup) -> None:
    if conn.autocommit:
        return
    if conn.info.transaction_status != pq.TransactionStatus.IDLE:
        raise SourceError(f"group {group.name!r}: the source connection has an open transaction; commit it first")
    conn.autocommit = True


def _existing_result(root: str, stored: RunRecord) -> CaptureResult | None:
    uri = capture_manifest_uri(root)
    data = read_json(uri)
    if data is None:
        return None
    manifest = CaptureManifest.from_dict(data)
    if manifest.watermark != stored.watermark:
        return None
    logger.info("group=%s run=%s W=%s: capture already done", manifest.group, manifest.run_key, manifest.watermark)
    bootstrap = any(table.bootstrap for table in manifest.tables)
    return CaptureResult(manifest.watermark, uri, manifest, HoldbackReport(), bootstrap)


def _check_continues(group: RefreshGroup, start: Lsn, last: CutRecord, stored: RunRecord | None) -> None:
    """Check that the slot starts at the last cut's W, so its changes continue that cut.

    Raises:
        SlotError: the slot starts after it (re-created by hand or by a resync that has not
            published, or advanced by hand): the changes in between are not in it. A run pinned
            below the slot is left to the pin, which fails it finally.
    """
    if start <= last.watermark or (stored is not None and stored.watermark < start):
        return
    pinned = " (supersede this run first: it pinned W)" if stored is not None else ""
    raise SlotError(
        f"group {group.name!r}: slot {slot_name(group)!r} starts at {start}, after the last cut's W={last.watermark} "
        f"(it was re-created or advanced by hand), so {REMEDY}{pinned}"
    )


def _finish_unchanged(
    ledger: Ledger, group: RefreshGroup, run_key: str, last: CutRecord, copies: dict[str, BootstrapCopy]
) -> UnchangedRun:
    """Record a run whose W equals the last cut's W as ``unchanged``.

    Raises:
        InvalidWatermarkError: members were added since the last cut; they need a cut at a newer W.
    """
    if copies:
        raise InvalidWatermarkError(
            f"group {group.name!r}, run {run_key!r}: members {sorted(copies)} were copied (added or resynced), but "
            f"the source's WAL has not moved since cut {last.cut_id} (W={last.watermark}) and a new cut needs a newer "
            "W; the first run after any write to the source publishes them (ask again for a resync you asked for)"
        )
    ledger.set_run_state(group.name, run_key, RunState.UNCHANGED, only_from=RunState.PINNED, cut_id=last.cut_id)
    record = ledger.get_run(group.name, run_key)
    assert record is not None
    unchanged = UnchangedRun.of(record)
    logger.info("group=%s run=%s W=%s: %s; nothing to capture", group.name, run_key, last.watermark,
                unchanged.message())
    return unchanged


def _resyncs(
    group: RefreshGroup, tables: dict[str, SourceTable], last: CutRecord | None, settings: CaptureSettings,
    previous: Mapping[str, LastCutMirror],
) -> dict[str, str]:
    """Per mirror with a previous cut that this run copies again, why (a resync of the group
    copies every one)."""
    for name in settings.resync_members:
        if not isinstance(group.member(name), Mirror):
            raise DeclarationError(f"group {group.name!r}: resync_members names {name!r}, which is not a mirror")
    if last is None:
        return {}
    if settings.resync:
        return {member: "resync of the group" for member in tables if member in last.members}
    reasons = resync_reasons({m: t for m, t in tables.items() if m in last.members}, previous, settings.resync_members)
    check_policy(group.name, group.on_schema_change, reasons, tables)
    for member, why in reasons.items():
        logger.warning("group=%s member=%s: copied again in this run's cut (a resync of the member): %s", group.name,
                       member, why)
    return reasons


def _table_captures(
    tables: dict[str, SourceTable], copies: dict[str, BootstrapCopy], extracted: ExtractResult,
    resynced: Mapping[str, str], previous: Mapping[str, LastCutMirror], partitions: PartitionReadings,
) -> tuple[TableCapture, ...]:
    """Per member: its extracted changelog files, its bootstrap copy (if any), why it was resynced,
    how its columns changed since the last cut (renamed, older names, reshaped), and whether its
    changes carried their old rows (:meth:`.PartitionReadings.old_rows_held`)."""
    captures = []
    for member, table in tables.items():
        copy = copies.get(member)
        last = previous.get(member)
        captures.append(TableCapture(
            member=member,
            source_table=table.qualified_name,
            columns=extracted.columns[member],
            key_columns=table.key_columns,
            filled_columns=table.filled_columns,
            keyless=table.keyless,
            files=extracted.files[member],
            changes=extracted.changes[member],
            old_images=extracted.old_images.get(member, False) and partitions.old_rows_held(member, table, last),
            field_ids=last.field_ids if last is not None else {},
            copy_files=copy.files if copy else (),
            copied_rows=copy.rows if copy else 0,
            resynced=resynced.get(member, ""),
            storage=table.storage,
            leaves=partitions.recorded(member, table),
            attnums=dict(zip(table.columns, table.attnums, strict=False)),
            renamed=renamed_columns(table, last) if last is not None else {},
            aliases=column_aliases(table, last) if last is not None else {},
            reshaped=last is not None and reshaped(table, last),
        ))
    return tuple(captures)


def capture_run(
    conn: psycopg.Connection[Any],
    group: RefreshGroup,
    ledger: Ledger,
    run_key: str,
    warehouse: str,
    settings: CaptureSettings | None = None,
    previous: Mapping[str, LastCutMirror] | None = None,
) -> CaptureResult | UnchangedRun:
    """Capture the changes of one run up to its pinned W and write its changelog and manifest.

    Args:
        conn: a connection to the source database; switched to autocommit, session settings pinned.
        group: the refresh group.
        ledger: the run ledger (its tables are created if missing).
        run_key: the run key; a retry with it reuses W and a finished capture.
        warehouse: warehouse URI; files go under the run's staging root.
        settings: how the capture runs (:class:`CaptureSettings`; its defaults when ``None``).
        previous: each mirror as the group's last cut has it: a mirror whose table changed
            in a way no change record carries is copied again (:mod:`.resyncs`) or, under the
            group's ``on_schema_change="fail"``, refused. ``None``: not compared here (the
            refresh plan's guard refuses such a change then).

    Returns:
        The capture, or :class:`UnchangedRun` when W equals the last cut's W (no WAL since it).

    Raises:
        SourceError: the source cannot serve the group (SlotError for slot trouble, CaptureError
            when the slot creation or the publication DDL waited too long).
        WatermarkError: a flush timeout, or the run already published; InvalidWatermarkError
            (final) for a W that can never make a cut.
        DecodeError: the change stream could not be decoded.
        SchemaChangeError: (final) a table changed that way under ``on_schema_change="fail"``.
        MemberNotFoundError, DeclarationError: ``resync_members`` names no mirror of the group.
    """
    settings = settings or CaptureSettings()
    _autocommit(conn, group)
    ledger.create()
    root = staging_root(warehouse, group.name, run_key)
    capture_dir = join(root, CAPTURE_DIR)
    stored = ledger.get_run(group.name, run_key)
    if stored is not None and (cut := ledger.cut_for_run(group.name, run_key)) is not None:
        raise WatermarkError(
            f"group {group.name!r}, run {run_key!r}: already published as cut {cut.cut_id} (W={cut.watermark}); "
            "a published run is not captured again"
        )
    if stored is not None and stored.state == RunState.UNCHANGED:
        return UnchangedRun.of(stored)
    if stored is not None and (done := _existing_result(root, stored)) is not None:
        return done
    last = ledger.last_cut(group.name)
    published = [m.qualified_table for m in group.mirrors if last is not None and m.name in last.members]
    tables = ensure_source(conn, group, create_slot=False, wait_timeout=settings.slot_create_timeout_seconds,
                           published=() if settings.resync else published)
    described = current_insert_lsn(conn)  # the tables were described before this WAL position
    resynced = _resyncs(group, tables, last, settings, previous or {})
    copies = copies_for_run(conn, group, tables, capture_dir, stored, last, settings.resync, settings.copy,
                            settings.slot_create_timeout_seconds, resynced)
    status = check_slot(conn, group)
    warn_retention(group, status, settings.wal_retention_warn_bytes)
    start = status.confirmed_flush
    if last is not None and not settings.resync:
        _check_continues(group, start, last, stored)
    holdback = probe_holdback(conn, group.name, settings.holdback_warn_seconds)
    watermark = pin_watermark(
        conn, ledger, group, run_key, explicit_watermark=settings.explicit_watermark,
        flush_timeout_seconds=settings.flush_timeout_seconds, floor=start, dag_run=settings.dag_run,
    )
    check_partitions_held(conn, group, tables)
    if not holdback.probe_failed:
        ledger.record_holdback(group.name, run_key, holdback.count, holdback.oldest_age_seconds)
    if watermark < start:
        raise InvalidWatermarkError(
            f"group {group.name!r}, run {run_key!r}: W={watermark} is behind the slot at {start}"
        )
    if last is not None and watermark == last.watermark:
        return _finish_unchanged(ledger, group, run_key, last, copies)
    partitions = read_partitions(conn, group, tables, previous or {}, fresh=described <= watermark)
    delete_files(capture_dir, f"{CHANGES_PREFIX}-")  # an earlier attempt's changelogs (bootstrap copies stay)
    copied_at = {member: copy.snapshot for member, copy in copies.items() if copy.snapshot is not None}
    extracted = extract_changes(conn, group, tables, capture_dir, start, watermark, copied_at=copied_at)
    if (position := slot_position(conn, group)) != start:
        raise SlotError(
            f"group {group.name!r}, run {run_key!r}: slot {slot_name(group)!r} moved from {start} to {position} while "
            "the changes were read (dropped and re-created by a concurrent resync?), so they may be incomplete; "
            "retry the run"
        )
    if extracted.newest_commit_at is not None:
        ledger.record_newest_commit(group.name, run_key, extracted.newest_commit_at)
    captures = _table_captures(tables, copies, extracted, resynced, previous or {}, partitions)
    manifest = CaptureManifest(group.name, run_key, watermark, start, extracted.transactions, captures)
    uri = capture_manifest_uri(root)
    write_json(uri, manifest.to_dict())
    logger.info(
        "group=%s run=%s W=%s: captured transactions=%d changes=%d bootstrap=%s", group.name, run_key, watermark,
        manifest.transactions, sum(c.changes for c in captures), bool(copies),
    )
    return CaptureResult(watermark, uri, manifest, holdback, bool(copies))
