"""Each dependency down in turn: one clear error naming it, nothing published, and the run succeeds
when retried after the repair (issue 15, item 5).

The source and the catalog database run on private clusters that the test stops and starts; the
warehouse fills up on a tiny tmpfs (or, without the right to mount one, turns read-only); the
Spark master is a port nobody listens on.
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_provider_streambed import steps as steps_module
from airflow_provider_streambed.examples.bank import load_bank, move_money
from airflow_provider_streambed.exceptions import (
    CatalogUnavailableError,
    SourceUnavailableError,
    SparkUnavailableError,
    WarehouseError,
)
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.local import refresh_once
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.testing.postgres import ThrowawayCluster, free_port
from tests.integration.airflow.bank import check_cut

pytestmark = pytest.mark.slow
DAGS = Path(__file__).resolve().parents[3] / "dags"


@pytest.fixture(scope="module")
def bank_group() -> Any:
    sys.path.insert(0, str(DAGS))
    from example_bank import bank

    return bank


@pytest.fixture
def source() -> Iterator[ThrowawayCluster]:
    with ThrowawayCluster() as cluster:
        yield cluster


def transfers(dsn: str, rng: random.Random, count: int = 10) -> set[int]:
    with psycopg.connect(dsn) as conn:
        return {move_money(conn, rng) for _ in range(count)}


def test_source_catalog_and_spark_down_each_name_themselves_and_the_retry_publishes(
    source: ThrowawayCluster, tmp_path: Path, bank_group: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = source.dsn(source.create_database("bank"))
    with ThrowawayCluster() as catalog_db:
        catalog_uri = f"postgresql+psycopg://streambed@127.0.0.1:{catalog_db.port}/{catalog_db.create_database('lake')}"
        props = {"uri": catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
        load_bank(dsn)
        rng = random.Random(5)
        journal = transfers(dsn, rng)
        assert refresh_once(bank_group, source_dsn=dsn, catalog_properties=props).cut.cut_id == 1
        journal |= transfers(dsn, rng)
        ledger = Ledger(catalog_uri)

        source.pause()  # down at the pin
        with pytest.raises(SourceUnavailableError, match=rf"source database \(127.0.0.1:{source.port}/bank\)"):
            refresh_once(bank_group, source_dsn=dsn, catalog_properties=props, run_key="r2")
        source.resume()
        assert ledger.get_run("bank", "r2") is None  # nothing pinned

        catalog_db.pause()  # down at the capture
        with pytest.raises(CatalogUnavailableError, match=rf"catalog database \(postgresql at 127.0.0.1:"
                                                          rf"{catalog_db.port}/lake\)"):
            refresh_once(bank_group, source_dsn=dsn, catalog_properties=props, run_key="r2")
        catalog_db.resume()
        assert ledger.get_run("bank", "r2") is None

        with pytest.raises(SparkUnavailableError, match=r"Spark master spark://127.0.0.1:\d+ cannot be reached"):
            refresh_once(bank_group, source_dsn=dsn, catalog_properties=props, run_key="r2",
                         master=f"spark://127.0.0.1:{free_port()}")
        pinned = ledger.get_run("bank", "r2")
        assert pinned is not None and len(ledger.list_cuts("bank")) == 1

        real_publish = steps_module.publish_cut

        def catalog_dies_then_publish(*args: Any, **kwargs: Any) -> Any:
            catalog_db.pause()  # down at the publish, after capture and refresh
            return real_publish(*args, **kwargs)

        monkeypatch.setattr(steps_module, "publish_cut", catalog_dies_then_publish)
        with pytest.raises(CatalogUnavailableError):
            refresh_once(bank_group, source_dsn=dsn, catalog_properties=props, run_key="r2")
        monkeypatch.setattr(steps_module, "publish_cut", real_publish)
        catalog_db.resume()

        retried = refresh_once(bank_group, source_dsn=dsn, catalog_properties=props, run_key="r2")
        assert retried.cut.cut_id == 2 and retried.cut.watermark == pinned.watermark
        assert check_cut(CutReader(props, bank_group).latest(), journal) == journal


@contextlib.contextmanager
def unwritable(directory: Path) -> Iterator[str]:
    """Make ``directory`` refuse writes while the block runs; yields how (``full`` or ``read-only``).

    As root: a 16 MB tmpfs mounted on it, then filled (root ignores permissions). Otherwise: mode 0555.
    """
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            yield "read-only"
        finally:
            directory.chmod(0o755)
        return
    filler = directory / "filler"
    with open(filler, "wb") as stream, contextlib.suppress(OSError):
        while True:
            stream.write(b"\0" * (1 << 16))
            stream.flush()
    try:
        yield "full"
    finally:
        filler.unlink()


@pytest.fixture
def small_warehouse(tmp_path: Path) -> Iterator[Path]:
    """A directory on a 16 MB tmpfs when this process may mount one (as root), else a plain one."""
    directory = tmp_path / "small"
    directory.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(directory)], capture_output=True, check=False,
    ).returncode == 0
    if os.geteuid() == 0 and not mounted:
        pytest.skip("running as root without the right to mount a tmpfs: a full disk cannot be simulated here")
    yield directory
    if mounted:
        subprocess.run(["umount", "--lazy", str(directory)], check=True)


def test_a_full_or_read_only_warehouse_names_itself_and_the_retry_publishes(
    source: ThrowawayCluster, small_warehouse: Path, sqlite_catalog_uri: str, bank_group: Any
) -> None:
    dsn = source.dsn(source.create_database("bank"))
    props = {"uri": sqlite_catalog_uri, "warehouse": small_warehouse.as_uri()}
    load_bank(dsn)
    rng = random.Random(6)
    journal = transfers(dsn, rng)
    assert refresh_once(bank_group, source_dsn=dsn, catalog_properties=props).cut.cut_id == 1
    journal |= transfers(dsn, rng)
    with unwritable(small_warehouse) as how:
        message = "No space left on device" if how == "full" else "Permission denied"
        with pytest.raises(WarehouseError, match=rf"warehouse {small_warehouse.as_uri()} refuses writes: {message}"):
            refresh_once(bank_group, source_dsn=dsn, catalog_properties=props, run_key="r2")
    assert len(Ledger(sqlite_catalog_uri).list_cuts("bank")) == 1
    retried = refresh_once(bank_group, source_dsn=dsn, catalog_properties=props, run_key="r2")
    assert retried.cut.cut_id == 2
    assert check_cut(CutReader(props, bank_group).latest(), journal) == journal
