"""Publish killed between the metadata write and the pointer commit: an exception, and a real SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import Connection

from airflow_provider_streambed.catalog import warehouse_of
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish import publish_cut
from tests.integration.publish.helpers import bank_tables, make_group, pin_and_stage

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
TABLES = ("accounts", "totals")


def _state(catalog: SqlCatalog) -> dict[str, tuple[str, frozenset[str]]]:
    """Per member table: its pointer and the files in its metadata directory."""
    warehouse = Path(warehouse_of(catalog).removeprefix("file://"))
    return {
        table: (catalog.load_table(f"ns.{table}").metadata_location,
                frozenset(p.name for p in (warehouse / "ns" / table / "metadata").iterdir()))
        for table in TABLES
    }


def _referenced(catalog: SqlCatalog, table: str) -> set[str]:
    """Metadata directory entries the table references (metadata files, manifest lists, manifests)."""
    loaded = catalog.load_table(f"ns.{table}")
    names = {loaded.metadata_location, *(e.metadata_file for e in loaded.metadata.metadata_log)}
    for snapshot in loaded.snapshots():
        names.add(snapshot.manifest_list)
        names.update(m.manifest_path for m in snapshot.manifests(loaded.io))
    return {name.rsplit("/", 1)[1] for name in names}


def _first_cut(catalog: SqlCatalog, ledger: Ledger) -> None:
    warehouse = warehouse_of(catalog)
    publish_cut(catalog, ledger, make_group(), "run1",
                pin_and_stage(ledger, warehouse, "bank", "run1", Lsn(1000), bank_tables(1)))


def test_an_error_inside_the_transaction_rolls_back_every_pointer(catalog: SqlCatalog, ledger: Ledger) -> None:
    _first_cut(catalog, ledger)
    manifests = pin_and_stage(ledger, warehouse_of(catalog), "bank", "run2", Lsn(2000), bank_tables(2))
    before = _state(catalog)

    def fail(connection: Connection) -> None:
        raise RuntimeError("injected fault after the pointer updates")

    with pytest.raises(RuntimeError, match="injected fault"):
        publish_cut(catalog, ledger, make_group(), "run2", manifests, before_commit=fail)
    assert _state(catalog) == before  # no pointer moved, the attempt's metadata files are gone
    assert ledger.cut_for_run("bank", "run2") is None
    record = publish_cut(catalog, ledger, make_group(), "run2", manifests)
    assert record.cut_id == 2
    assert catalog.load_table("ns.totals").scan().to_arrow().column("version").to_pylist() == [2]


def test_a_publish_killed_before_the_commit_leaves_nothing_and_the_retry_cleans_up(
    catalog_props: dict[str, str], catalog: SqlCatalog, ledger: Ledger, tmp_path: Path
) -> None:
    _first_cut(catalog, ledger)
    manifests = pin_and_stage(ledger, warehouse_of(catalog), "bank", "run2", Lsn(2000), bank_tables(2))
    before = _state(catalog)
    ready = tmp_path / "ready"
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.publish.publish_worker", json.dumps(catalog_props), "run2",
         str(ready)],
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert worker.poll() is None, "the publishing process ended before reaching the commit"
            assert time.monotonic() < deadline, "the publishing process never reached the commit"
            time.sleep(0.05)
        os.kill(worker.pid, signal.SIGKILL)
    finally:
        worker.wait(30)
    assert worker.returncode == -signal.SIGKILL
    after_kill = _state(catalog)
    for table in TABLES:
        assert after_kill[table][0] == before[table][0]  # no pointer moved
        assert after_kill[table][1] > before[table][1]  # the dead attempt's metadata files are there
    assert ledger.cut_for_run("bank", "run2") is None and len(ledger.list_cuts("bank")) == 1

    record = publish_cut(catalog, ledger, make_group(), "run2", manifests)
    assert record.cut_id == 2
    for table in TABLES:
        files = _state(catalog)[table][1]
        assert set(files) == _referenced(catalog, table), f"orphaned metadata files left in {table}"
