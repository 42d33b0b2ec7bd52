"""Deleting staged files after a publish: this run's staging and that of abandoned runs.

A published run's data files were moved into its member tables (``<table>/data/<run key>/``),
so its staging root holds only changelogs, specs and manifests. Another run's staging is
abandoned when the ledger says it can never publish (``superseded``), it published already, it
stayed ``pinned`` longer than the retention, or it is not in the ledger and is older than the
retention. An abandoned, unpublished run may have moved files into member tables before a
failed commit; those ``data/<run key>/`` directories go too. Pinned runs within the retention
may still be running and are never touched.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable

from pyarrow import fs
from sqlalchemy import Engine, select

from airflow_provider_streambed.ledger import RunState, runs_table
from airflow_provider_streambed.publish.tables import run_data_dir
from airflow_provider_streambed.staging import group_staging_dir, join, staging_root

logger = logging.getLogger(__name__)


def delete_dir(uri: str) -> bool:
    """Delete the directory ``uri`` and its contents; ``False`` if it did not exist."""
    filesystem, path = fs.FileSystem.from_uri(uri)
    if filesystem.get_file_info(path).type == fs.FileType.NotFound:
        return False
    filesystem.delete_dir(path)
    return True


def _run_states(engine: Engine, group: str) -> dict[str, tuple[RunState, dt.datetime]]:
    query = select(runs_table.c.run_key, runs_table.c.state, runs_table.c.pinned_at).where(
        runs_table.c.group_name == group
    )
    with engine.connect() as connection:
        rows = connection.execute(query).all()
    return {
        row.run_key: (RunState(row.state), row.pinned_at.replace(tzinfo=row.pinned_at.tzinfo or dt.UTC))
        for row in rows
    }


def _is_abandoned(
    state: tuple[RunState, dt.datetime] | None, modified: dt.datetime | None, cutoff: dt.datetime
) -> bool:
    if state is None:
        return modified is not None and modified < cutoff
    run_state, pinned_at = state
    return run_state != RunState.PINNED or pinned_at < cutoff


def clean_staging(
    engine: Engine,
    warehouse: str,
    group: str,
    run_key: str,
    table_locations: Iterable[str],
    retention_hours: float,
) -> int:
    """Delete this run's staging root and every abandoned run's; returns how many runs were cleaned.

    Args:
        engine: the catalog database (for the ledger's run states, one query).
        warehouse: the warehouse URI.
        group: the group name.
        run_key: the run just published.
        table_locations: the member tables' locations (for moved files of unpublished runs).
        retention_hours: how long a pinned or unknown run's staging is kept.
    """
    cleaned = int(delete_dir(staging_root(warehouse, group, run_key)))
    directory = group_staging_dir(warehouse, group)
    filesystem, path = fs.FileSystem.from_uri(directory)
    runs = [
        info
        for info in filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True))
        if info.type == fs.FileType.Directory and not info.base_name.startswith("_") and info.base_name != run_key
    ]
    if not runs:
        return cleaned
    states = _run_states(engine, group)
    cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(hours=retention_hours)
    locations = list(table_locations)
    for info in runs:
        state = states.get(info.base_name)
        if not _is_abandoned(state, info.mtime, cutoff):
            continue
        if state is None or state[0] != RunState.PUBLISHED:
            for location in locations:
                delete_dir(run_data_dir(location, info.base_name))
        delete_dir(join(directory, info.base_name))
        cleaned += 1
        logger.info("group=%s: deleted the staging of abandoned run %s", group, info.base_name)
    return cleaned
