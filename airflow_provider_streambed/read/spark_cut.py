"""A cut's members as Spark DataFrames: through Iceberg's Spark runtime when the session has a
catalog for the group's, else by streambed's own snapshot scan.

Runs in the Spark driver (``Cut.to_spark``). Both paths give each member's rows at the cut, its
position deletes applied: Iceberg's runtime reads the member by the cut's tag
(:mod:`.iceberg_runtime`) and applies them inside its scan; the snapshot scan
(:class:`~.spark_snapshot.SnapshotScan`) reads the Parquet files pyiceberg plans for the cut's
snapshot and anti-joins them, and needs no Iceberg jar. A cut that expired under the group's
retention while a reader held it has lost its tags; it is read by the snapshot scan (from the
metadata files the cut wrote, while its files stay for ``delete_files_after``).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping
from pathlib import Path

from pyiceberg.catalog import Catalog
from pyiceberg.table import StaticTable
from pyspark.sql import DataFrame, SparkSession

from airflow_provider_streambed import storage
from airflow_provider_streambed.compat.spark import arrow_frame
from airflow_provider_streambed.ledger import CutMember, cut_tag
from airflow_provider_streambed.read.iceberg_runtime import read_tagged, serving_catalog, untagged_members
from airflow_provider_streambed.read.snapshot_files import plan_snapshot_files, snapshot_columns
from airflow_provider_streambed.read.spark_snapshot import SnapshotScan
from airflow_provider_streambed.staging import SnapshotFiles
from airflow_provider_streambed.staging.inputs import local_copies

logger = logging.getLogger(__name__)


def cut_frames(spark: SparkSession, catalog: Catalog, group: str, cut_id: int, members: Mapping[str, CutMember],
               copies_dir: str | None = None, catalog_name: str | None = None) -> dict[str, DataFrame]:
    """Each member of cut ``cut_id`` of ``group`` as a DataFrame of its rows at the cut: through
    Iceberg's runtime when a catalog of the session serves ``catalog`` and every member's table
    still has the cut's tag at its snapshot, else by the snapshot scan.

    Args:
        spark: the session.
        catalog: the group's catalog.
        group: the group name.
        cut_id: the cut.
        members: the cut's members.
        copies_dir: for the snapshot scan, where files on an object store are copied first.
        catalog_name: the session's Iceberg catalog to read through (default: the one that
            serves ``catalog``, if any: :func:`~.iceberg_runtime.serving_catalog`).

    Raises:
        ConfigurationError: ``catalog_name`` is not an Iceberg catalog of the session that can
            read ``catalog``'s tables.
    """
    runtime = serving_catalog(spark, catalog, catalog_name)
    tag = cut_tag(group, cut_id)
    untagged = untagged_members(catalog, members, tag) if runtime is not None else []
    if runtime is not None and not untagged:
        logger.info("group=%s cut=%s: members read through Iceberg's Spark runtime (Spark catalog %r, tag %s)",
                    group, cut_id, runtime, tag)
        return {name: read_tagged(spark, runtime, tuple(member.table_identifier.split(".")), tag)
                for name, member in members.items()}
    if untagged:
        logger.info("group=%s cut=%s: members read by streambed's snapshot scan: tag %s is gone from %s (the cut "
                    "expired; its files stay for the retention's delete_files_after)", group, cut_id, tag, untagged)
    else:
        logger.info("group=%s cut=%s: members read by streambed's snapshot scan (no Iceberg catalog of the session "
                    "serves catalog %r)", group, cut_id, catalog.name)
    return scanned_frames(spark, catalog, group, members, copies_dir)


def scanned_frames(spark: SparkSession, catalog: Catalog, group: str, members: Mapping[str, CutMember],
                   copies_dir: str | None) -> dict[str, DataFrame]:
    """Each member's rows at its snapshot by the snapshot scan (files on an object store copied
    under ``copies_dir`` first, default a new temporary directory)."""
    frames = {}
    for name, member in members.items():
        table = StaticTable.from_metadata(member.metadata_location, properties=catalog.properties)
        files = plan_snapshot_files(table, member.snapshot_id)
        if any(storage.scheme_of(uri) not in storage.LOCAL_SCHEMES for uri in files.data):
            copies_dir = copies_dir or Path(tempfile.mkdtemp(prefix="streambed-cut-")).as_uri()
            copied = local_copies(copies_dir, group, {name: (*files.data, *files.deletes)}, catalog.properties)
            files = SnapshotFiles(files.data, files.deletes, tuple(copied.items()))
        if files.data:  # the files of a table whose schema evolved may hold older ones
            columns = snapshot_columns(table, member.snapshot_id) if len(table.schemas()) > 1 else None
            frames[name] = SnapshotScan(spark, files, columns).rows()
        else:
            frames[name] = arrow_frame(spark, table.scan(snapshot_id=member.snapshot_id).to_arrow())
    return frames
