"""A user's Spark with Iceberg's runtime reads every cut exactly as ``CutReader`` does (issue 47).

Real PostgreSQL, the real capture step and the job in-process on the default ``local[2]`` session
publish eight cuts of two merge-on-read mirrors into a catalog on PostgreSQL (pyiceberg's
``SqlCatalog`` tables are the schema of Iceberg's JDBC catalog): a keyed table with updates,
deletes and key changes, an added column, a rename, then a column dropped and the key widened
from ``int`` to ``bigint``; a keyless one with duplicates and NULLs. Merges keep the older files,
so the last cut reads files of four schemas less their position deletes.

Iceberg has no Spark runtime for the default pyspark (4.2), so the reads run in a subprocess of the
pyspark-4.1 env (:func:`~airflow_provider_streambed.testing.spark_envs.spark_env_python`, the
session's ``iceberg_runtime_python``; :mod:`tests.integration.publish.runtime_reader`): by tag
with ``VERSION AS OF``, and ``Cut.to_spark`` with and without the session's Iceberg catalog. The
catalog's database is reached as the trusted local role: no password is set anywhere. A cut held
while it expired has lost its tags: ``Cut.to_spark`` reads it by the snapshot scan.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import os
import random
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession

from airflow_provider_streambed import Mirror, RefreshGroup
from airflow_provider_streambed.catalog import open_with_ledger, warehouse_of
from airflow_provider_streambed.declarations import CutRetention
from airflow_provider_streambed.ledger import cut_tag
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish import publish_cut
from airflow_provider_streambed.read import Cut, CutReader
from airflow_provider_streambed.read.iceberg_runtime import jdbc_catalog_conf, untagged_members
from airflow_provider_streambed.read.snapshot_files import plan_snapshot_files
from airflow_provider_streambed.retention.maintenance import apply_retention
from airflow_provider_streambed.testing.spark import local_spark_session
from tests.integration.publish.helpers import bank_tables, make_group, pin_and_stage
from tests.integration.refresh.cuts import cuts_of
from tests.integration.refresh.workloads import SCHEMA, workload

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

ROOT = Path(__file__).resolve().parents[3]
#: Never compacted: the last cut holds every file since the first, under each schema.
GROUP = RefreshGroup("runtime", "src", "cat", "rt", (Mirror("public.accounts", compact_deleted_ratio=100.0),
                                                     Mirror("public.events", compact_deleted_ratio=100.0)))
#: The paths the reader writes (:mod:`tests.integration.publish.runtime_reader`).
PATHS = ("scan", "tag", "found", "named")


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """The default local[2] session, for the refresh job (left running: other modules may share it)."""
    yield local_spark_session("streambed-runtime-reader-tests")


def publish_cuts(spark: SparkSession, tmp_path: Path, dsn: str, catalog_uri: str) -> list[Cut]:
    """Eight cuts: the random workload's runs 0-6 (a column added in 4, renamed in 6), then run 7
    drops that column, widens ``accounts.id`` to ``bigint`` and adds duplicates to ``events``."""
    rng = random.Random(47)
    with cuts_of(spark, tmp_path, dsn, catalog_uri, GROUP, SCHEMA) as cuts:
        for run in range(8):
            if 0 < run < 7:
                workload(dsn, rng, run)
            if run == 7:
                cuts.conn.execute("UPDATE accounts SET balance = balance + 2 WHERE id % 4 = 1")  # old columns
                cuts.conn.execute("ALTER TABLE accounts DROP COLUMN note, ALTER COLUMN id TYPE bigint")
                cuts.conn.execute("INSERT INTO accounts VALUES (5000000000, 'wide', 5)")  # a key past int
                cuts.conn.execute("DELETE FROM accounts WHERE id % 4 = 2")
                cuts.conn.execute("INSERT INTO events SELECT kind, n FROM events WHERE kind = 'k1'")  # duplicates
            cuts.publish(f"r{run}")
        return CutReader(cuts.catalog, GROUP.name).list()


def bag(table: pa.Table) -> Counter[tuple[Any, ...]]:
    """The rows of ``table`` as a multiset."""
    return Counter(tuple(row.values()) for row in table.to_pylist())


def types(table: pa.Table) -> list[tuple[str, pa.DataType]]:
    """Column names and types, Arrow's large strings as strings (Spark's Arrow has no large ones)."""
    return [(field.name, pa.string() if pa.types.is_large_string(field.type) else field.type)
            for field in table.schema]


def test_a_spark_with_iceberg_s_runtime_reads_every_cut_like_the_cut_reader(
    spark: SparkSession, tmp_path: Path, pg_dsn: str, postgres_catalog_uri: str, iceberg_runtime_python: Path
) -> None:
    cuts = publish_cuts(spark, tmp_path, pg_dsn, postgres_catalog_uri)
    last = cuts[-1]
    assert [cut.cut_id for cut in cuts] == list(range(1, 9))
    assert last.schema("accounts").names == ["id", "holder", "balance"]  # renamed, dropped
    assert last.schema("accounts").field("id").type == pa.int64() and cuts[0].schema("accounts").field(
        "id").type == pa.int32()
    for name in ("accounts", "events"):  # merged on read since cut 1: its files, less position deletes
        files = plan_snapshot_files(last.table(name), last.member(name).snapshot_id)
        first = plan_snapshot_files(cuts[0].table(name), cuts[0].member(name).snapshot_id)
        assert set(first.data) <= set(files.data) and files.deletes, name
    assert max(bag(last.to_arrow("events")).values()) > 1  # keyless duplicates

    spec = tmp_path / "reader.json"
    output = tmp_path / "read"
    properties = {"uri": postgres_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    spec.write_text(json.dumps({"catalog": properties, "group": GROUP.name, "output": str(output)}))
    environment = {key: value for key, value in os.environ.items() if key != "SPARK_HOME"}
    started = time.perf_counter()
    done = subprocess.run([str(iceberg_runtime_python), "-m", "tests.integration.publish.runtime_reader", str(spec)],
                          cwd=ROOT, env={**environment, "PYSPARK_PYTHON": str(iceberg_runtime_python)},
                          capture_output=True, text=True, timeout=600, check=False)
    print(f"reader: {time.perf_counter() - started:.1f} s")
    assert done.returncode == 0, done.stderr[-5000:]

    assert done.stderr.count("members read by streambed's snapshot scan") == len(cuts)
    assert done.stderr.count("members read through Iceberg's Spark runtime (Spark catalog 'streambed'") == 2 * len(cuts)
    for cut in cuts:
        for name in cut.members:
            expected = cut.to_arrow(name)
            for path in PATHS:
                read = pq.read_table(output / path / str(cut.cut_id) / f"{name}.parquet")
                assert types(read) == types(expected), f"cut {cut.cut_id}, {name}, {path}"
                assert bag(read) == bag(expected), f"cut {cut.cut_id}, {name}, {path}"


def test_a_held_cut_that_expired_is_read_by_the_snapshot_scan(
    spark: SparkSession, sqlite_props: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    catalog, ledger = open_with_ledger(sqlite_props)
    assert isinstance(catalog, SqlCatalog)
    group = dataclasses.replace(make_group(), retention=CutRetention(
        keep_last=1, keep_newer_than=dt.timedelta(0), delete_files_after=dt.timedelta(hours=1)))
    reader = CutReader(catalog, group)

    def publish(version: int) -> None:
        manifests = pin_and_stage(ledger, warehouse_of(catalog), group.name, f"run{version}", Lsn(1000 * version),
                                  bank_tables(version))
        publish_cut(catalog, ledger, group, f"run{version}", manifests)

    publish(1)
    held = reader.get(1)
    publish(2)
    apply_retention(catalog, ledger, group)
    assert [cut.cut_id for cut in reader.list()] == [2]
    assert untagged_members(catalog, held.members, cut_tag(group.name, 1)) == ["accounts", "totals"]
    assert untagged_members(catalog, reader.get(2).members, cut_tag(group.name, 2)) == []

    conf = jdbc_catalog_conf(sqlite_props)  # a catalog that serves it; its classes are never loaded here
    caplog.set_level(logging.INFO, logger="airflow_provider_streambed.read.spark_cut")
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        frames = held.to_spark(spark)
    finally:
        for key in conf:
            spark.conf.unset(key)
    assert "tag bank-cut-1 is gone from ['accounts', 'totals'] (the cut expired" in caplog.text
    for name, frame in frames.items():
        assert bag(frame.toArrow()) == bag(held.to_arrow(name)), name
