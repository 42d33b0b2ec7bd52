"""Reading cuts: atomic visibility under concurrent publishes, pinned cuts, DuckDB and Spark views."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import duckdb
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession

from airflow_provider_streambed.catalog import open_catalog, warehouse_of
from airflow_provider_streambed.exceptions import CutNotFoundError
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish import publish_cut
from airflow_provider_streambed.read import Cut, CutReader
from airflow_provider_streambed.testing.spark import local_spark_session
from tests.integration.publish.helpers import bank_tables, make_group, pin_and_stage

pytestmark = pytest.mark.slow


def _publish(catalog: SqlCatalog, ledger: Ledger, version: int) -> None:
    manifests = pin_and_stage(ledger, warehouse_of(catalog), "bank", f"run{version}", Lsn(1000 * version),
                              bank_tables(version))
    publish_cut(catalog, ledger, make_group(), f"run{version}", manifests)


def _check_invariant(cut: Cut) -> None:
    accounts, totals = cut.to_arrow("accounts"), cut.to_arrow("totals")
    assert set(accounts.column("version").to_pylist()) == {cut.cut_id}, "accounts not at the cut"
    assert totals.column("version").to_pylist() == [cut.cut_id], "totals not at the cut"
    assert sum(accounts.column("balance").to_pylist()) == totals.column("total")[0].as_py()


def test_readers_never_see_members_of_different_cuts(
    catalog_props: dict[str, str], catalog: SqlCatalog, ledger: Ledger
) -> None:
    _publish(catalog, ledger, 1)
    stop, seen, failures = threading.Event(), set(), []

    def reader() -> None:
        cuts = CutReader(catalog_props, "bank")
        while not stop.is_set():
            try:
                cut = cuts.latest()
                _check_invariant(cut)
                seen.add(cut.cut_id)
            except Exception as error:  # collected for the assertion below
                failures.append(error)
                return

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for version in range(2, 7):
            _publish(catalog, ledger, version)
    finally:
        stop.set()
        thread.join(60)
    assert failures == []
    assert len(seen) >= 2, f"the reader saw too few cuts to prove anything: {seen}"
    # the pointers agree with the last cut too
    assert catalog.load_table("ns.totals").scan().to_arrow().column("version").to_pylist() == [6]


def test_a_held_cut_keeps_its_snapshots_and_lookups_by_lsn(catalog: SqlCatalog, ledger: Ledger) -> None:
    _publish(catalog, ledger, 1)
    reader = CutReader(catalog, make_group())
    held = reader.latest()
    rows = held.to_arrow("accounts")
    for version in (2, 3):
        _publish(catalog, ledger, version)
    assert held.to_arrow("accounts").equals(rows)
    _check_invariant(held)
    assert reader.latest().cut_id == 3 and reader.latest().prev_watermark == Lsn(2000)
    assert reader.as_of_lsn(Lsn(2500)).cut_id == 2 and reader.get(1) == held
    with pytest.raises(CutNotFoundError, match="no cut at or before LSN 0/64"):
        reader.as_of_lsn(Lsn(100))
    assert held.row_counts() == {"accounts": 5, "totals": 1}
    assert held.verify() == []


@pytest.fixture
def two_cuts(sqlite_props: dict[str, str]) -> SqlCatalog:
    """An SQLite catalog with cuts 1 and 2 of the bank group published."""
    catalog = open_catalog(sqlite_props)
    assert isinstance(catalog, SqlCatalog)
    ledger = Ledger(catalog.engine)
    ledger.create()
    for version in (1, 2):
        _publish(catalog, ledger, version)
    return catalog


def test_duckdb_reads_a_cut_like_pyiceberg(two_cuts: SqlCatalog) -> None:
    reader = CutReader(two_cuts, "bank")
    for cut in (reader.get(1), reader.latest()):
        con = cut.to_duckdb(duckdb.connect())
        for member in ("accounts", "totals"):
            expected = cut.to_arrow(member)
            got = con.execute(f"select * from {member}").arrow()
            got = got.read_all() if hasattr(got, "read_all") else got
            assert sorted(got.to_pylist(), key=str) == sorted(expected.to_pylist(), key=str)


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """A local[2] Spark session (left running: other modules may share it)."""
    yield local_spark_session("streambed-publish-tests")


def test_spark_temp_views_read_a_cut(two_cuts: SqlCatalog, spark: SparkSession) -> None:
    cut = CutReader(two_cuts, "bank").get(1)
    cut.to_spark(spark)
    row = spark.sql("select sum(a.balance) as s, max(t.total) as t from accounts a cross join totals t").first()
    assert row is not None and row["s"] == row["t"] == cut.to_arrow("totals").column("total")[0].as_py()
