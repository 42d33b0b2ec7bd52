"""The bank group under a writer, refreshed by ``refresh_once`` through Spark with the REST catalog's
properties alone (SeaweedFS, and Nessie: ``rest_properties``): tables on S3, staging and Spark's
copies of the previous cut on a local disk."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from pyiceberg.catalog import load_catalog

from airflow_provider_streambed.capture.names import slot_name
from airflow_provider_streambed.declarations import CutRetention
from airflow_provider_streambed.examples.bank import Writer, load_bank
from airflow_provider_streambed.exceptions import CatalogCapabilityError
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.local import refresh_once
from airflow_provider_streambed.publish.reconcile import CutMark
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.staging.inputs import INPUTS_DIR
from airflow_provider_streambed.testing.spark import local_spark_session
from tests.integration.airflow.bank import check_cut

pytestmark = pytest.mark.slow
DAGS = Path(__file__).resolve().parents[3] / "dags"


def test_the_bank_group_through_the_rest_catalog_on_s3(
    pg_dsn: str, rest_properties: dict[str, str], spark_connect_url: str, tmp_path: Path
) -> None:
    sys.path.insert(0, str(DAGS))
    from example_bank import bank

    load_bank(pg_dsn)
    staging = tmp_path / "staging"
    properties = {**rest_properties, "streambed.ledger-uri": f"sqlite:///{tmp_path / 'ledger.db'}",
                  "streambed.staging-uri": staging.as_uri()}
    writer = Writer(pg_dsn)
    writer.start()
    try:
        for number in range(1, 6):
            result = refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties,
                                  spark_remote=spark_connect_url)
            assert result.outcome == "published" and result.cut.cut_id == number
            reader = load_catalog("reader", **rest_properties)  # any REST client sees every member at this cut
            tables = [reader.load_table((bank.namespace, member.name)) for member in bank.members]
            assert {CutMark.of(table).cut_id for table in tables} == {number}
    finally:
        journal = writer.stop()
    last = refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties, spark_remote=spark_connect_url)
    cuts = CutReader(properties, bank).list()
    assert [cut.cut_id for cut in cuts] == list(range(1, 7)) and last.cut.cut_id == 6
    held = set()
    for cut in cuts:
        ids = check_cut(cut, journal)
        assert held <= ids  # cuts only grow
        held = ids
    assert held == journal  # the last cut, taken after the writer stopped, holds every transfer
    for member in cuts[-1].members.values():
        location = load_catalog("reader", **rest_properties).load_table(member.table_identifier).location()
        assert location.startswith("s3://") and member.metadata_location.startswith(f"{location}/metadata/")
    frames = cuts[-1].to_spark(local_spark_session("streambed-rest-reader"), (tmp_path / "reader").as_uri())
    for name in ("accounts", "transfers"):  # Spark applies the mirrors' position deletes to its copies
        assert sorted(map(tuple, frames[name].collect())) == sorted(
            tuple(row.values()) for row in cuts[-1].to_arrow(name).to_pylist())
    copies = list((staging / "_streambed" / bank.name / INPUTS_DIR).rglob("*.parquet"))
    assert copies, "Spark read the previous cut from local copies"


def test_a_group_the_catalog_cannot_publish_is_refused_before_its_run_pins_anything(
    pg_dsn: str, rest_properties: dict[str, str], tmp_path: Path
) -> None:
    sys.path.insert(0, str(DAGS))
    from example_bank import bank

    load_bank(pg_dsn)
    kept = replace(bank, retention=CutRetention(keep_last=3))  # cut retention: SQL catalogs only so far
    properties = {**rest_properties, "streambed.ledger-uri": f"sqlite:///{tmp_path / 'ledger.db'}",
                  "streambed.staging-uri": (tmp_path / "staging").as_uri()}
    with pytest.raises(CatalogCapabilityError, match=r"group 'bank': catalog .* is a REST catalog, and cut retention"):
        refresh_once(kept, source_dsn=pg_dsn, catalog_properties=properties, spark_remote="sc://127.0.0.1:1")
    assert Ledger(properties["streambed.ledger-uri"]).list_runs("bank") == []  # no W pinned
    with psycopg.connect(pg_dsn) as conn:  # no slot created, nothing captured
        assert conn.execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s",
                            (slot_name(bank),)).fetchone() == (0,)
    assert not (tmp_path / "staging").exists()
