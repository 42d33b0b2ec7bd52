"""The whole refresh in the production shape: executors on namespaced hosts, everything on S3.

A group with mirrors, a derived SQL member and a PySpark member refreshes under a live writer on
a standalone master with two workers (:class:`NamespacedSparkCluster`), its tables in SeaweedFS's
REST catalog and its staging on a bucket of its own. The driver runs here (spark-submit in client
mode, the Airflow task group, or a Spark Connect server) and gets the store's credentials from the
catalog's properties (the Connect server from its own environment); the executors have only the
workers' environment. Every cut is checked exact: the bank invariant, and both derived members
agreeing with the mirrors of the same cut.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from pyarrow import fs

from airflow_provider_streambed import local
from airflow_provider_streambed.catalog import LEDGER_URI_PROPERTY, STAGING_URI_PROPERTY
from airflow_provider_streambed.examples.bank import Writer, load_bank, move_money
from airflow_provider_streambed.exceptions import RefreshError, is_final
from airflow_provider_streambed.local import RunResult, StepTimes, refresh_once
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.refresh import run_local_spark_submit
from airflow_provider_streambed.refresh.spark.connect import run_on_connect
from airflow_provider_streambed.refresh.spark.connect_server import ConnectServer
from airflow_provider_streambed.refresh.spark.submit import LOCAL_CONF
from airflow_provider_streambed.staging import JobSpec, read_json, read_member_manifest
from airflow_provider_streambed.testing.postgres import free_port
from airflow_provider_streambed.testing.seaweed import REGION, ThrowawaySeaweed
from airflow_provider_streambed.testing.spark_cluster import NamespacedSparkCluster
from tests.integration.airflow import conftest as airflow_fixtures
from tests.integration.cluster.conftest import storage_credentials
from tests.integration.cluster.derived_bank import bank_group, check_cuts
from tests.integration.cluster.lost_worker import WorkerKiller

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

#: The Airflow metadata database of tests/integration/airflow (a session fixture, found by name).
airflow_db = airflow_fixtures.airflow_db
IN_PROCESS_MERGE = "spark.streambed.mirror.inProcessMerge"
MIRRORS = ("accounts", "transfers")


@pytest.fixture
def staging_uri(bridge_seaweed: ThrowawaySeaweed) -> str:
    """The group's staging location, in a bucket of its own on the cluster's object store."""
    bucket = f"staging-{uuid.uuid4().hex[:8]}"
    fs.S3FileSystem(access_key=bridge_seaweed.access_key, secret_key=bridge_seaweed.secret_key, region=REGION,
                    endpoint_override=bridge_seaweed.s3_endpoint, scheme="http",
                    allow_bucket_creation=True).create_dir(bucket)
    return f"s3://{bucket}/lake"


@pytest.fixture
def properties(bridge_seaweed: ThrowawaySeaweed, staging_uri: str, tmp_path: Path) -> dict[str, str]:
    """The catalog's properties: SeaweedFS's REST catalog and S3, staging on S3, the ledger here."""
    return {**bridge_seaweed.catalog_properties(), LEDGER_URI_PROPERTY: f"sqlite:///{tmp_path / 'ledger.db'}",
            STAGING_URI_PROPERTY: staging_uri}


@dataclass(frozen=True)
class Launch:
    """One Spark application ``refresh_once`` started: its job spec, and the mirrors it had to merge
    (not staged by the in-process merge when it started)."""

    spec: JobSpec
    mirrors: tuple[str, ...]


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> list[Launch]:
    """Every Spark application ``refresh_once`` starts (spark-submit or Spark Connect), in order."""
    started: list[Launch] = []

    def record(spec: JobSpec) -> None:
        mirrors = tuple(name for name in MIRRORS if read_member_manifest(spec.staging_root, name) is None)
        started.append(Launch(spec, mirrors))

    def submit(spec_uri: str, **options: Any) -> None:
        data = read_json(spec_uri)
        assert data is not None
        record(JobSpec.from_dict(data))
        run_local_spark_submit(spec_uri, **options)

    def connect(spec: JobSpec, url: str, *arguments: Any, **options: Any) -> Any:
        record(spec)
        return run_on_connect(spec, url, *arguments, **options)

    monkeypatch.setattr(local, "run_local_spark_submit", submit)
    monkeypatch.setattr(local, "run_on_connect", connect)
    return started


def check_on_s3(launches: list[Launch], staging_uri: str) -> None:
    """Every application read its spec, changelogs and the previous cut's files on S3, and no local copy."""
    for launch in launches:
        spec = launch.spec
        files = [uri for uris in (*spec.previous_files.values(), *spec.previous_deletes.values()) for uri in uris]
        assert spec.staging_root.startswith(f"{staging_uri}/"), spec.staging_root
        assert spec.capture_manifest.startswith(f"{staging_uri}/"), spec.capture_manifest
        assert (bool(files) or spec.cut_number == 1) and all(uri.startswith("s3://") for uri in files), files
        assert not spec.copies, spec.copies  # Spark reads the previous cut in place


def cluster_conf(cluster: NamespacedSparkCluster, **extra: str) -> dict[str, str]:
    """The refresh's Spark configuration on the cluster: what a driver here must set, nothing of S3."""
    return {**cluster.driver_conf(), **extra}


def test_a_group_refreshes_on_the_cluster_reading_and_writing_s3_in_place(
    pg_dsn: str, spark_cluster: NamespacedSparkCluster, properties: dict[str, str], staging_uri: str,
    launches: list[Launch], tmp_path: Path,
) -> None:
    """Three cuts on the cluster, two under the writer: the second has the executors merge the mirrors
    from the previous cut's files on S3, the others merge them in-process; every cut exact, the
    last holding every transfer, all run data on S3."""
    group = bank_group("bank_cluster")
    load_bank(pg_dsn)
    seconds: list[str] = []

    def run(**conf: str) -> RunResult:
        times = StepTimes()
        result = refresh_once(group, source_dsn=pg_dsn, catalog_properties=properties, master=spark_cluster.master,
                              spark_conf=cluster_conf(spark_cluster, **conf), times=times)
        seconds.append(f"{times.capture:.1f}/{times.refresh:.1f}/{times.publish:.1f}")
        assert result.outcome == "published"
        return result

    writer = Writer(pg_dsn)
    writer.start()
    try:
        assert run().cut.cut_id == 1
        assert run(**{IN_PROCESS_MERGE: "false"}).cut.cut_id == 2
    finally:
        journal = writer.stop()
    assert run().cut.cut_id == 3
    print(f"3 cuts on the cluster, capture/refresh/publish s: {', '.join(seconds)}; {len(journal)} transfers")

    assert check_cuts(properties, group, journal, 3) == journal and len(journal) > 20
    assert len(launches) == 3  # the derived members need Spark at every run
    assert launches[1].mirrors == MIRRORS  # the executors merged the mirrors of cut 2
    assert launches[2].mirrors == ()  # cut 3's were merged in-process, before the application
    check_on_s3(launches, staging_uri)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ledger.db"]  # no run data on this disk


def test_a_worker_lost_mid_job_never_publishes_a_wrong_cut(
    pg_dsn: str, spark_cluster: NamespacedSparkCluster, properties: dict[str, str], staging_uri: str,
    launches: list[Launch],
) -> None:
    """A worker dies once its executor runs tasks of cut 2's application (which merges the mirrors):
    the run completes on the other worker or fails retryably, and a retry of the same run
    publishes; every cut exact."""
    group = bank_group("bank_lost_worker")
    load_bank(pg_dsn)
    with psycopg.connect(pg_dsn) as conn:
        rng = random.Random(5)
        journal = {move_money(conn, rng) for _ in range(20)}
    first = refresh_once(group, source_dsn=pg_dsn, catalog_properties=properties, master=spark_cluster.master,
                         spark_conf=cluster_conf(spark_cluster))
    assert first.cut.cut_id == 1
    ui_port = free_port()
    conf = cluster_conf(spark_cluster, **{IN_PROCESS_MERGE: "false", "spark.ui.enabled": "true",
                                          "spark.ui.port": str(ui_port)})
    killer = WorkerKiller(spark_cluster, 0, ui_port)
    writer = Writer(pg_dsn)
    writer.start()
    outcome: RunResult | RefreshError
    try:
        killer.start()
        try:
            outcome = refresh_once(group, source_dsn=pg_dsn, catalog_properties=properties, run_key="lost-worker",
                                   master=spark_cluster.master, spark_conf=conf)
        except RefreshError as error:
            outcome = error
    finally:
        killer.stopping.set()
        killer.join()
        journal |= writer.stop()
        spark_cluster.restart_worker(0)  # a replacement host: a retry and the next tests have both workers
    assert killer.seen, "the executor on worker 0 never ran a task: the kill did not happen"
    assert killer.lost, "the driver did not count the executor lost: it had finished when the worker died"
    said = outcome.message() if isinstance(outcome, RunResult) else f"failed retryably: {outcome}"
    print(f"worker 0 killed at executor figures {killer.seen}; the run {said}")
    if isinstance(outcome, RefreshError):
        assert not is_final(outcome), f"a lost worker failed the run for good: {outcome}"
        assert CutReader(properties, group).latest().cut_id == 1  # nothing published
        outcome = refresh_once(group, source_dsn=pg_dsn, catalog_properties=properties, run_key="lost-worker",
                               master=spark_cluster.master, spark_conf=conf)
    assert outcome.outcome == "published" and outcome.cut.cut_id == 2
    check_cuts(properties, group, journal, 2)
    assert launches[1].mirrors == MIRRORS  # the application that lost a worker merged the mirrors
    check_on_s3(launches, staging_uri)


@pytest.fixture
def cluster_connections(
    airflow_db: None, pg_dsn: str, spark_cluster: NamespacedSparkCluster, properties: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``bank_pg``, ``lakehouse`` (an ``iceberg`` connection: the REST catalog, S3 staging) and
    ``spark_cluster`` (the cluster's master, client mode) as ``AIRFLOW_CONN_*`` variables."""
    source = conninfo_to_dict(pg_dsn)
    monkeypatch.setenv("AIRFLOW_CONN_BANK_PG", json.dumps({
        "conn_type": "postgres", "host": source["host"], "port": int(str(source["port"])),
        "login": source["user"], "schema": source["dbname"],
    }))
    monkeypatch.setenv("AIRFLOW_CONN_LAKEHOUSE", json.dumps({"conn_type": "iceberg", "extra": properties}))
    master = spark_cluster.master.removeprefix("spark://").split(":")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps({
        "conn_type": "spark", "host": f"spark://{master[0]}", "port": int(master[1]),
        "extra": {"deploy-mode": "client"},
    }))


def test_an_airflow_task_group_refreshes_on_the_cluster(
    cluster_connections: None, pg_dsn: str, spark_cluster: NamespacedSparkCluster, properties: dict[str, str],
    tmp_path: Path,
) -> None:
    """One ``dag.test()`` run of ``StreambedRefreshGroup`` whose Spark connection is the cluster's master."""
    from airflow.sdk import DAG

    from airflow_provider_streambed.task_group import StreambedRefreshGroup

    group = bank_group("bank_airflow")
    load_bank(pg_dsn)
    options = airflow_fixtures.spark_kwargs()["spark_options"]
    with DAG("bank_on_the_cluster", schedule=None, start_date=airflow_fixtures.START) as dag:
        StreambedRefreshGroup(group, spark_conn_id="spark_cluster",
                              spark_conf={**LOCAL_CONF, **cluster_conf(spark_cluster)}, spark_options=options)
    airflow_fixtures.sync_dags(dag)
    writer = Writer(pg_dsn)
    writer.start()
    try:
        dag_run = dag.test(logical_date=airflow_fixtures.START)
    finally:
        journal = writer.stop()
    assert dag_run.state == "success", [(ti.task_id, ti.state) for ti in dag_run.get_task_instances()]
    check_cuts(properties, group, journal, 1)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ledger.db"]  # the run's data went to S3


@pytest.fixture
def connect_server(spark_cluster: NamespacedSparkCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server on the cluster side: the cluster's master, the driver on the bridge
    address, the store's credentials in its environment; yields its URL."""
    server = ConnectServer(port=free_port(), master=spark_cluster.master, state_dir=tmp_path_factory.mktemp("connect"),
                           conf=cluster_conf(spark_cluster), environment=storage_credentials())
    with server.running() as url:
        yield url


def test_a_spark_connect_server_on_the_cluster_publishes_exact_cuts(
    pg_dsn: str, connect_server: str, properties: dict[str, str], staging_uri: str, launches: list[Launch],
) -> None:
    """Two cuts through ``refresh_once(spark_remote=...)``, the second merging the mirrors on the executors."""
    group = bank_group("bank_connect")
    load_bank(pg_dsn)

    def run(**conf: str) -> RunResult:
        return refresh_once(group, source_dsn=pg_dsn, catalog_properties=properties, spark_remote=connect_server,
                            spark_conf=conf)

    writer = Writer(pg_dsn)
    writer.start()
    try:
        assert run().cut.cut_id == 1
    finally:
        journal = writer.stop()
    assert run(**{IN_PROCESS_MERGE: "false"}).cut.cut_id == 2
    assert check_cuts(properties, group, journal, 2) == journal
    assert len(launches) == 2 and launches[1].mirrors == MIRRORS  # cut 2's mirrors merged on the executors
    check_on_s3(launches, staging_uri)

