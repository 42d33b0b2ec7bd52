"""A bootstrap copy's client memory is bounded by its batches, not by the table (peak RSS of a real copy)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import json, resource, sys
    import adbc_driver_postgresql.dbapi  # loaded before the baseline: a fixed cost, not the copy's
    import psycopg
    from airflow_provider_streambed.capture import copy
    from airflow_provider_streambed.capture.bootstrap import CopyOptions
    from airflow_provider_streambed.capture.run import capture_run
    from airflow_provider_streambed.capture.run_records import CaptureSettings
    from airflow_provider_streambed.declarations import RefreshGroup
    from airflow_provider_streambed.ledger import Ledger
    from airflow_provider_streambed.member_declarations import Mirror

    copy.BATCH_BYTES = 1 << 20  # 1 MiB batches, 2 connections: far below the table's size
    copy.MIN_RANGE_BLOCKS = 1024
    dsn, ledger_uri, warehouse = sys.argv[1:]
    group = RefreshGroup("mem", "src", "cat", "mem", [Mirror("public.wide_rows")])
    ledger = Ledger(ledger_uri)
    ledger.create()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT 1")
        baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = capture_run(conn, group, ledger, "r1", warehouse, CaptureSettings(copy=CopyOptions(parallelism=2)))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"baseline_kib": baseline, "peak_kib": peak, "rows": result.manifest.tables[0].copied_rows}))
""")


def test_copy_memory_stays_bounded_for_a_table_far_larger_than_its_batches(
    source: psycopg.Connection[Any], pg_dsn: str, tmp_path: Path
) -> None:
    source.execute("CREATE TABLE wide_rows AS SELECT g::int8 AS id, repeat(md5(g::text), 4) AS body "
                   "FROM generate_series(1, 2000000) g")
    source.execute("ALTER TABLE wide_rows ADD PRIMARY KEY (id)")
    table_mib = source.execute("SELECT pg_table_size('wide_rows') / 1048576").fetchone()[0]  # type: ignore[index]
    script = tmp_path / "measure_copy.py"  # not copy.py: it would shadow the standard library
    script.write_text(SCRIPT)
    ran = subprocess.run([sys.executable, str(script), pg_dsn, f"sqlite:///{tmp_path / 'ledger.db'}",
                          (tmp_path / "wh").as_uri()], capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    figures = json.loads(ran.stdout.strip().splitlines()[-1])
    growth_mib = (figures["peak_kib"] - figures["baseline_kib"]) / 1024
    assert figures["rows"] == 2_000_000
    assert table_mib > 300
    assert growth_mib < table_mib / 3, f"peak RSS grew {growth_mib:.0f} MiB copying a {table_mib} MiB table"
