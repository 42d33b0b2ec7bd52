"""A test harness that makes cuts of one group: the real capture step, the job on an in-process
Spark session (``local[2]``), and ``publish_cut`` into a catalog."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import psycopg
from pyspark.sql import SparkSession

from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.capture.run_records import CaptureSettings
from airflow_provider_streambed.capture.slot import advance_slot
from airflow_provider_streambed.catalog import open_catalog
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.ledger import CutRecord, Ledger
from airflow_provider_streambed.publish.cut import publish_cut
from airflow_provider_streambed.refresh import build_job_spec, collect_member_manifests
from airflow_provider_streambed.refresh.spark.job import run_job
from airflow_provider_streambed.staging import JobSpec, MemberManifest
from airflow_provider_streambed.steps import last_cut_mirrors


class Cuts:
    """Runs capture, the job and publish for one group against one source and catalog."""

    def __init__(self, spark: SparkSession, tmp_path: Path, dsn: str, catalog_uri: str, group: RefreshGroup) -> None:
        self.spark = spark
        self.group = group
        self.warehouse = (tmp_path / "warehouse").as_uri()
        self.catalog = open_catalog({"uri": catalog_uri, "warehouse": self.warehouse})
        self.ledger = Ledger(catalog_uri)
        self.ledger.create()
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.staged: dict[str, MemberManifest] = {}  # the manifests of the last cut published

    def stage(self, run_key: str, *, resync: bool = False,
              resync_members: Sequence[str] = ()) -> tuple[JobSpec, dict[str, MemberManifest]]:
        """Capture and compute the run; returns (job spec, staged manifests)."""
        captured = capture_run(self.conn, self.group, self.ledger, run_key, self.warehouse,
                               CaptureSettings(resync=resync, resync_members=tuple(resync_members)),
                               last_cut_mirrors(self.catalog, self.group, self.ledger.last_cut(self.group.name)))
        spec = build_job_spec(self.group, self.catalog, self.ledger, captured.manifest_uri, run_key)
        run_job(self.spark, spec)
        return spec, collect_member_manifests(spec)

    def publish(self, run_key: str, *, resync: bool = False, resync_members: Sequence[str] = ()) -> CutRecord:
        """One whole cut: staged, published, slot advanced."""
        spec, staged = self.stage(run_key, resync=resync, resync_members=resync_members)
        self.staged = staged
        cut = publish_cut(self.catalog, self.ledger, self.group, run_key, staged, carried=tuple(spec.carried))
        advance_slot(self.conn, self.group, cut.watermark)
        return cut


@contextmanager
def cuts_of(spark: SparkSession, tmp_path: Path, dsn: str, catalog_uri: str, group: RefreshGroup,
            schema: str) -> Iterator[Cuts]:
    """A :class:`Cuts` of ``group`` on a source where ``schema`` (SQL) ran first; closed at the end."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(schema)
    cuts = Cuts(spark, tmp_path, dsn, catalog_uri, group)
    try:
        yield cuts
    finally:
        cuts.conn.close()
