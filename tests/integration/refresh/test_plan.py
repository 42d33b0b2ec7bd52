"""build_job_spec against a real pyiceberg SQL catalog and the run ledger."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from airflow_provider_streambed.catalog import open_catalog
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import InvalidWatermarkError, RefreshError
from airflow_provider_streambed.ledger import CutMember, Ledger
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.member_declarations import Mirror, SqlMember
from airflow_provider_streambed.refresh import build_job_spec, write_job_spec
from airflow_provider_streambed.staging import CaptureManifest, JobSpec, capture_manifest_uri, read_json, write_json

pytestmark = pytest.mark.slow

GROUP = RefreshGroup(
    "plan", "src", "cat", "ns", (Mirror("public.orders"), SqlMember("n", "SELECT count(*) FROM orders", ("orders",)))
)


def _capture(warehouse: str, run_key: str, watermark: str) -> str:
    uri = capture_manifest_uri(f"{warehouse}/_streambed/plan/{run_key}")
    write_json(uri, CaptureManifest("plan", run_key, Lsn.parse(watermark), Lsn(0), 0, ()).to_dict())
    return uri


def test_build_job_spec_from_previous_cut(tmp_path: Path, sqlite_catalog_uri: str) -> None:
    warehouse = (tmp_path / "warehouse").as_uri()
    catalog = open_catalog({"uri": sqlite_catalog_uri, "warehouse": warehouse})
    ledger = Ledger(catalog.engine)  # type: ignore[attr-defined]  # SqlCatalog has an engine
    ledger.create()

    first = build_job_spec(GROUP, catalog, ledger, _capture(warehouse, "r1", "0/100"), "r1")
    assert (first.prev_watermark, first.cut_number, first.previous_files) == (None, 1, {})
    assert first.staging_root == f"{warehouse}/_streambed/plan/r1"

    catalog.create_namespace("ns")
    table = catalog.create_table("ns.orders", pa.schema([pa.field("id", pa.int64())]))
    table.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    snapshot = table.refresh().current_snapshot()
    assert snapshot is not None
    with ledger.begin() as connection:
        member = CutMember("orders", "ns.orders", snapshot.snapshot_id, table.metadata_location)
        ledger.record_cut(connection, "plan", "r1", Lsn.parse("0/100"), {"orders": member})

    second = build_job_spec(GROUP, catalog, ledger, _capture(warehouse, "r2", "0/200"), "r2")
    assert (second.prev_watermark, second.cut_number) == (Lsn.parse("0/100"), 2)
    files = second.previous_files["orders"]
    assert len(files) == 1 and files[0].endswith(".parquet")
    assert JobSpec.from_dict(read_json(write_job_spec(second)) or {}) == second

    again = build_job_spec(GROUP, catalog, ledger, _capture(warehouse, "r1", "0/100"), "r1")
    assert (again.prev_watermark, again.cut_number) == (None, 1), "a published run plans on the cut before it"

    with pytest.raises(InvalidWatermarkError, match=r"group 'plan', run 'r3': W=0/50 is not after cut 1's W=0/100"):
        build_job_spec(GROUP, catalog, ledger, _capture(warehouse, "r3", "0/50"), "r3")
    with pytest.raises(RefreshError, match=r"capture manifest belongs to group 'plan', run 'r2'"):
        build_job_spec(GROUP, catalog, ledger, _capture(warehouse, "r2", "0/300"), "r4")
