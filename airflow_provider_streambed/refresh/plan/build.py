"""Planning a refresh: the run's job spec, built from the ledger and catalog, and written for the job.

The spec carries paths, W and names only (never credentials): the previous cut's W and number
from the ledger, each mirror's previous Parquet files as pyiceberg plans them for the cut's
snapshot, and the capture manifest of this run. Submitting the job is :mod:`.submit`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from airflow_provider_streambed.catalog import staging_of
from airflow_provider_streambed.cut_order import check_after_last_cut
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import RefreshError
from airflow_provider_streambed.ledger import CutRecord, Ledger
from airflow_provider_streambed.member_declarations import Mirror, incremental_member
from airflow_provider_streambed.read.snapshot_files import plan_snapshot
from airflow_provider_streambed.refresh.plan.columns import check_mirror_columns
from airflow_provider_streambed.refresh.plan.compaction import SnapshotStorage, choose_compactions
from airflow_provider_streambed.refresh.plan.work import PreviousMember, plan_work
from airflow_provider_streambed.snapshot_properties import DEFINITION_PROPERTY, SHAPE_PROPERTY
from airflow_provider_streambed.staging import (
    JOB_SPEC_PATH,
    CaptureManifest,
    JobSpec,
    join,
    read_json,
    staging_root,
    write_json,
)
from airflow_provider_streambed.staging.inputs import local_copies

logger = logging.getLogger(__name__)


def build_job_spec(
    group: RefreshGroup,
    catalog: Catalog,
    ledger: Ledger,
    capture_manifest_uri: str,
    run_key: str,
    compact: str = "auto",
) -> JobSpec:
    """The job spec of run ``run_key``, based on the group's previous cut.

    ``compact`` says which mirrors due for compaction are rewritten whole
    (:func:`~airflow_provider_streambed.refresh.plan.compaction.choose_compactions`).

    Raises:
        RefreshError: the capture manifest is missing or belongs to another group or run.
        InvalidWatermarkError: the run's W is not after the previous cut's W (final).
        SchemaChangeError: a mirror's source table dropped or renamed a column, or added one with a
            default that its older rows read from the catalog (final; :mod:`.columns`).
    """
    data = read_json(capture_manifest_uri)
    if data is None:
        raise RefreshError(f"group {group.name!r}, run {run_key!r}: no capture manifest at {capture_manifest_uri}")
    manifest = CaptureManifest.from_dict(data)
    if (manifest.group, manifest.run_key) != (group.name, run_key):
        raise RefreshError(
            f"group {group.name!r}, run {run_key!r}: capture manifest belongs to group {manifest.group!r}, "
            f"run {manifest.run_key!r}"
        )
    previous = _previous_cut(group, ledger, run_key)
    if previous is not None:
        check_after_last_cut(group.name, run_key, manifest.watermark, previous.watermark, previous.cut_id)
    tables = {} if previous is None else _previous_tables(catalog, group, previous)
    for capture in manifest.tables:  # a copy is written whole: it takes the source's columns as they are
        if capture.member in tables and not capture.bootstrap:
            check_mirror_columns(group.name, capture, tables[capture.member][0].schema().column_names)
    summaries = {name: _summary(table, snapshot_id) for name, (table, snapshot_id) in tables.items()}
    work = plan_work(group, {table.member: table for table in manifest.tables}, _known(tables, summaries))
    carried = {name: planned.reason for name, planned in work.items() if not planned.compute}
    computed = [name for name, planned in work.items() if planned.compute]
    incremental = tuple(name for name, planned in work.items() if planned.on_previous and incremental_member(
        group.member(name)))
    read_previous = {mirror.name for mirror in group.mirrors if mirror.name not in carried} | {
        source for member in group.members if member.name not in carried
        for source in (group.member(name).name for name in member.sources) if source in carried
    } | set(incremental)
    planned_files = {name: plan_snapshot(table, snapshot_id) for name, (table, snapshot_id) in tables.items()
                     if name in read_previous}
    storage = {name: SnapshotStorage.of(summaries[name], found.sizes.values()) for name, found in planned_files.items()}
    rewrite = choose_compactions(group, storage, computed, compact)
    spec = JobSpec(
        group=group.to_dict(),
        run_key=run_key,
        watermark=manifest.watermark,
        prev_watermark=previous.watermark if previous is not None else None,
        cut_number=previous.cut_id + 1 if previous is not None else 1,
        staging_root=staging_root(staging_of(catalog), group.name, run_key),
        capture_manifest=capture_manifest_uri,
        previous_files={name: found.files.data for name, found in planned_files.items()},
        previous_key_columns=_previous_keys(group, tables),
        carried=carried,
        previous_deletes={name: found.files.deletes for name, found in planned_files.items() if found.files.deletes},
        rewrite=rewrite,
        previous_snapshots={name: snapshot_id for name, (_, snapshot_id) in tables.items()},
        incremental=incremental,
        shapes={name: summaries[name][SHAPE_PROPERTY] for name in incremental if SHAPE_PROPERTY in summaries[name]},
        copies=local_copies(staging_of(catalog), group.name,
                            {name: (*found.files.data, *found.files.deletes) for name, found in planned_files.items()},
                            catalog.properties),
    )
    for planned in work.values():
        logger.info("group=%s W=%s cut=%d: %s %s (%s%s)", group.name, spec.watermark, spec.cut_number,
                    "computing" if planned.compute else "carrying over", planned.member, planned.reason,
                    f"; rewritten whole, {rewrite[planned.member]}" if planned.member in rewrite else "")
    if not spec.computed_members():
        logger.info("group=%s W=%s cut=%d: no member changed; no Spark application is needed", group.name,
                    spec.watermark, spec.cut_number)
    return spec


def _previous_tables(catalog: Catalog, group: RefreshGroup, previous: CutRecord) -> dict[str, tuple[Table, int]]:
    """Per declared member the previous cut has: its table and its snapshot in that cut.

    Members removed from the declaration since are left alone.
    """
    return {
        member.name: (catalog.load_table(cut_member.table_identifier), cut_member.snapshot_id)
        for member in group.members
        if (cut_member := previous.members.get(member.name)) is not None
    }


def _summary(table: Table, snapshot_id: int) -> dict[str, str]:
    """The summary properties of a snapshot (empty when it has none)."""
    snapshot = table.snapshot_by_id(snapshot_id)
    return dict(snapshot.summary.additional_properties) if snapshot is not None and snapshot.summary else {}


def _known(
    tables: Mapping[str, tuple[Table, int]], summaries: Mapping[str, Mapping[str, str]]
) -> dict[str, PreviousMember]:
    """What the previous cut's snapshots were made from: the definition digest and the columns."""
    return {
        name: PreviousMember(summaries[name].get(DEFINITION_PROPERTY), tuple(f.name for f in table.schema().fields))
        for name, (table, _) in tables.items()
    }


def _previous_keys(group: RefreshGroup, tables: Mapping[str, tuple[Table, int]]) -> dict[str, tuple[str, ...]]:
    """Per mirror in the previous cut, its key (the table's identifier fields, in column order)."""
    keys = {}
    for name, (table, _) in tables.items():
        schema = table.schema()
        identifier = schema.identifier_field_names()
        if identifier and isinstance(group.member(name), Mirror):
            keys[name] = tuple(field.name for field in schema.fields if field.name in identifier)
    return keys


def _previous_cut(group: RefreshGroup, ledger: Ledger, run_key: str) -> CutRecord | None:
    """The cut this run builds on (for a run already published: the cut before its own)."""
    own = ledger.cut_for_run(group.name, run_key)
    if own is None:
        return ledger.last_cut(group.name)
    return ledger.cut_before(group.name, own.cut_id)


def write_job_spec(spec: JobSpec) -> str:
    """Write ``spec`` to ``<staging root>/_job/spec.json`` (unless it holds it already) and return its URI.

    Tasks of one run (a task per member) all write the same spec; one that finds it in place
    leaves the file alone.
    """
    uri = join(spec.staging_root, JOB_SPEC_PATH)
    if read_json(uri) != spec.to_dict():
        write_json(uri, spec.to_dict())
    return uri
