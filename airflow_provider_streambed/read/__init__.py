"""The reading side: published cuts and every engine's read of a member snapshot.

Runs wherever a cut is read: a notebook, the Airflow worker (publish's checks, the Streambed
page), and the Spark driver and executors (the refresh job reads the previous cut through
:mod:`.spark_snapshot`). :class:`CutReader` and :class:`Cut` (:mod:`.cuts`) are the public
face. A member snapshot is planned into data and position-delete files once
(:mod:`.snapshot_files`) and read as Arrow (:mod:`.arrow_snapshot`) or in Spark
(:mod:`.spark_snapshot`), its deleted positions applied within each file's scan; the rows a
position delete names are read by :mod:`.position_deletes`. ``Cut.to_spark`` (:mod:`.spark_cut`)
reads through Iceberg's Spark runtime instead when the session has an Iceberg catalog for the
group's (:mod:`.iceberg_runtime`: which catalog serves it, a member read by its cut's tag).
:mod:`.feed` is the change feed: what changed in every member between two cuts.
"""

from __future__ import annotations

from airflow_provider_streambed.read.cuts import (
    Cut,
    CutReader,
    GroupStatus,
    duckdb_s3_secret,
    load_duckdb_iceberg,
    snapshot_rows,
)

__all__ = ["Cut", "CutReader", "GroupStatus", "duckdb_s3_secret", "load_duckdb_iceberg", "snapshot_rows"]
