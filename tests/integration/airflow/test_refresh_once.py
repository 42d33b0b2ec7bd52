"""``refresh_once`` and ``streambed refresh``: the three steps in-process, on real services."""

from __future__ import annotations

import sys
from pathlib import Path

import psycopg
import pytest

from airflow_provider_streambed.cli import main
from airflow_provider_streambed.examples.bank import load_bank, move_money
from airflow_provider_streambed.local import StepTimes, refresh_once
from airflow_provider_streambed.read import CutReader
from tests.integration.airflow.bank import check_cut

pytestmark = pytest.mark.slow
DAGS = Path(__file__).resolve().parents[3] / "dags"


def test_refresh_once_then_the_cli(pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(DAGS))
    from example_bank import bank

    load_bank(pg_dsn)
    properties = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    journal: list[int] = []
    with psycopg.connect(pg_dsn) as conn:
        import random

        rng = random.Random(1)
        journal += [move_money(conn, rng) for _ in range(30)]
    times = StepTimes()
    first = refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties, times=times)
    assert first.outcome == "published" and first.cut.cut_id == 1
    assert min(times.capture, times.refresh, times.publish) > 0
    with psycopg.connect(pg_dsn) as conn:
        rng = random.Random(2)
        journal += [move_money(conn, rng) for _ in range(20)]

    monkeypatch.setenv("STREAMBED_SOURCE_DSN", pg_dsn)
    code = main(["refresh", "--group", f"{DAGS / 'example_bank.py'}:bank", "--catalog-uri", sqlite_catalog_uri,
                 "--warehouse", properties["warehouse"]])
    assert code == 0, capsys.readouterr().out
    assert "published cut 2" in capsys.readouterr().out
    cuts = CutReader(properties, bank).list()
    assert [cut.cut_id for cut in cuts] == [1, 2]
    assert cuts[1].watermark > cuts[0].watermark
    assert check_cut(cuts[1], set(journal)) == set(journal)
