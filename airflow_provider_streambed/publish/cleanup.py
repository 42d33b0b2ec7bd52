"""Deleting staged files after a publish: this run's staging and that of abandoned runs.

A published run's data files were moved into its member tables (``<table>/data/<run key>/``),
so its staging root holds only changelogs, specs and manifests. Another run's staging is
abandoned when the ledger says it can never publish (``superseded``, or ``failed`` and replaced),
it published already, it stayed resumable (``pinned``, or ``failed`` and not replaced) longer than
the retention, or it is not in the ledger and is older than the retention. An abandoned,
unpublished run may have moved files into member tables before a failed commit; those
``data/<run key>/`` directories go too. Resumable runs within the retention may still be
running or be retried and are never touched.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping

from pyarrow import fs

from airflow_provider_streambed import storage
from airflow_provider_streambed.ledger import Ledger, RunRecord, RunState
from airflow_provider_streambed.publish.staged import run_data_dir
from airflow_provider_streambed.staging import delete_dir, group_staging_dir, join, staging_root

logger = logging.getLogger(__name__)


def _is_abandoned(run: RunRecord | None, modified: dt.datetime | None, cutoff: dt.datetime) -> bool:
    """Whether a run's staging can go: it can never publish, or it is older than the retention."""
    if run is None:
        return modified is not None and modified < cutoff
    resumable = run.state == RunState.PINNED or (run.state == RunState.FAILED and run.replaced_by is None)
    return not resumable or run.pinned_at < cutoff


def clean_staging(
    ledger: Ledger,
    warehouse: str,
    group: str,
    run_key: str,
    table_locations: Iterable[str],
    retention_hours: float,
    properties: Mapping[str, str] | None = None,
) -> int:
    """Delete this run's staging root and every abandoned run's; returns how many runs were cleaned.

    Args:
        ledger: the run ledger (for the runs' states, one query).
        warehouse: where runs stage (the warehouse, or the catalog's staging location).
        group: the group name.
        run_key: the run just published.
        table_locations: the member tables' locations (for moved files of unpublished runs).
        retention_hours: how long a pinned or unknown run's staging is kept.
        properties: the catalog's properties (they configure an object store holding the tables).
    """
    cleaned = int(delete_dir(staging_root(warehouse, group, run_key)))
    directory = group_staging_dir(warehouse, group)
    filesystem, path = storage.filesystem(directory)
    staged = [
        info
        for info in filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True))
        if info.type == fs.FileType.Directory and not info.base_name.startswith("_") and info.base_name != run_key
    ]
    if not staged:
        return cleaned
    runs = {run.run_key: run for run in ledger.list_runs(group)}
    published = ledger.published_run_keys(group)
    cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(hours=retention_hours)
    locations = list(table_locations)
    for info in staged:
        run = runs.get(info.base_name)
        if not _is_abandoned(run, info.mtime, cutoff):
            continue
        if info.base_name not in published:  # by the cut, not the run's state: its files back cuts
            for location in locations:
                delete_dir(run_data_dir(location, info.base_name), properties)
        delete_dir(join(directory, info.base_name))
        cleaned += 1
        logger.info("group=%s: deleted the staging of abandoned run %s", group, info.base_name)
    return cleaned
