"""A group staged on the object store: the capture writes its changelogs there, the in-process merge
and Spark (through S3A) read the previous cut in place, publish copies within the store, and the
worker's disk holds no run data. REST catalog and S3 on SeaweedFS; Spark by spark-submit."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
from pyarrow import fs

from airflow_provider_streambed import local
from airflow_provider_streambed.examples.bank import Writer, load_bank
from airflow_provider_streambed.local import refresh_once
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.refresh import run_local_spark_submit
from airflow_provider_streambed.staging import JobSpec, read_json
from airflow_provider_streambed.testing.jars import s3a_folder, spark_classpath_conf
from airflow_provider_streambed.testing.seaweed import REGION, ThrowawaySeaweed
from tests.integration.airflow.bank import check_cut

pytestmark = [pytest.mark.slow, pytest.mark.cluster]  # S3A in Spark: the production shape
DAGS = Path(__file__).resolve().parents[3] / "dags"
#: pyspark 4.2.0 carries Hadoop 3.5.0 (pyspark/jars/hadoop-client-api-3.5.0.jar).
S3A = spark_classpath_conf(s3a_folder("3.5.0"))


@pytest.fixture
def staging_uri(seaweed: ThrowawaySeaweed) -> str:
    """A staging location in a bucket of its own (SeaweedFS's table bucket takes Iceberg paths only)."""
    bucket = f"staging-{uuid.uuid4().hex[:8]}"
    fs.S3FileSystem(access_key=seaweed.access_key, secret_key=seaweed.secret_key, region=REGION,
                    endpoint_override=seaweed.s3_endpoint, allow_bucket_creation=True).create_dir(bucket)
    return f"s3://{bucket}/lake"


@pytest.mark.parametrize("rest_server", ["seaweed"])
def test_a_group_staged_on_s3_reads_and_writes_the_store_in_place(
    pg_dsn: str, rest_properties: dict[str, str], staging_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    sys.path.insert(0, str(DAGS))
    from example_bank import bank

    load_bank(pg_dsn)
    properties = {**rest_properties, "streambed.ledger-uri": f"sqlite:///{tmp_path / 'ledger.db'}",
                  "streambed.staging-uri": staging_uri}
    specs: list[JobSpec] = []

    def submit(spec_uri: str, **options: object) -> None:  # the real spark-submit, its spec kept for the checks
        data = read_json(spec_uri)
        assert data is not None
        specs.append(JobSpec.from_dict(data))
        run_local_spark_submit(spec_uri, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(local, "run_local_spark_submit", submit)
    writer = Writer(pg_dsn)
    writer.start()
    try:
        for number, in_process in enumerate(("true", "true", "false"), start=1):  # the last: Spark merges
            result = refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties, master="local[2]",
                                  spark_conf={**S3A, "spark.streambed.mirror.inProcessMerge": in_process})
            assert result.outcome == "published" and result.cut is not None and result.cut.cut_id == number
    finally:
        journal = writer.stop()
    refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties, master="local[2]", spark_conf=S3A)
    held: set[int] = set()
    for cut in CutReader(properties, bank).list():
        ids = check_cut(cut, journal)
        assert held <= ids
        held = ids
    assert held == journal
    assert len(specs) == 4  # balances is computed by Spark at every run; the mirrors once (in-process off)
    for spec in specs:
        files = [uri for uris in (*spec.previous_files.values(), *spec.previous_deletes.values()) for uri in uris]
        assert spec.staging_root.startswith(f"{staging_uri}/") and spec.capture_manifest.startswith("s3://")
        assert (bool(files) or spec.cut_number == 1) and all(uri.startswith("s3://") for uri in files)
        assert not spec.copies  # Spark reads the previous cut in place
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ledger.db"]  # no run data on this disk
