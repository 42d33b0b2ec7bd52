"""``refresh_once``, ``streambed refresh`` and ``streambed resync``: the three steps in-process, on real services."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import psycopg
import pytest

from airflow_provider_streambed.cli import main
from airflow_provider_streambed.examples.bank import load_bank, move_money
from airflow_provider_streambed.exceptions import SlotError
from airflow_provider_streambed.local import StepTimes, refresh_once
from airflow_provider_streambed.read import CutReader
from tests.integration.airflow.bank import check_cut
from tests.integration.airflow.test_resync import drop_slot

pytestmark = pytest.mark.slow
DAGS = Path(__file__).resolve().parents[3] / "dags"


def test_refresh_once_then_the_cli_then_resync_after_the_slot_was_dropped(
    pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``refresh_once`` (timed), then ``streambed refresh``; the slot is dropped, a run refuses to
    go on, and ``streambed resync`` publishes a consistent cut through Spark while the older cuts
    stay readable; the next ``refresh_once`` is incremental again."""
    sys.path.insert(0, str(DAGS))
    from example_bank import bank

    load_bank(pg_dsn)
    properties = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    rng = random.Random(1)
    with psycopg.connect(pg_dsn) as conn:
        journal = {move_money(conn, rng) for _ in range(30)}
    times = StepTimes()
    first = refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties, times=times)
    assert first.outcome == "published" and first.cut.cut_id == 1
    assert min(times.capture, times.refresh, times.publish) > 0
    rng = random.Random(2)
    with psycopg.connect(pg_dsn) as conn:
        journal |= {move_money(conn, rng) for _ in range(20)}

    monkeypatch.setenv("STREAMBED_SOURCE_DSN", pg_dsn)
    group_option = ["--group", f"{DAGS / 'example_bank.py'}:bank", "--catalog-uri", sqlite_catalog_uri,
                    "--warehouse", properties["warehouse"]]
    code = main(["refresh", *group_option])
    assert code == 0, capsys.readouterr().out
    assert "published cut 2" in capsys.readouterr().out
    reader = CutReader(properties, bank)
    cuts = reader.list()
    assert [cut.cut_id for cut in cuts] == [1, 2]
    assert cuts[1].watermark > cuts[0].watermark
    assert check_cut(cuts[1], journal) == journal

    drop_slot(pg_dsn, bank)
    rng = random.Random(5)
    with psycopg.connect(pg_dsn) as conn:
        journal |= {move_money(conn, rng) for _ in range(20)}  # decoded by no slot
    with pytest.raises(SlotError, match="streambed resync"):
        refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties)
    code = main(["resync", *group_option])
    assert code == 0, capsys.readouterr().out
    resynced = reader.latest()
    assert resynced.cut_id == cuts[-1].cut_id + 1
    assert check_cut(resynced, journal) == journal  # every committed transfer, the undecoded ones too
    assert check_cut(reader.get(2), journal) < journal  # the older cut still reads

    with psycopg.connect(pg_dsn) as conn:
        journal |= {move_money(conn, rng) for _ in range(10)}
    following = refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties)
    assert following.cut.cut_id == resynced.cut_id + 1
    assert check_cut(reader.latest(), journal) == journal
