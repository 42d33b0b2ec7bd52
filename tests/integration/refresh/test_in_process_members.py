"""An incremental SQL member the worker updates (:mod:`.sql_delta_local`) is computed in the refresh
task, with its mirror: a run of such a group starts no Spark application.

``refresh_once`` with real PostgreSQL, spark-submit and a SQLite catalog; Spark's event logs count
the applications started, and PostgreSQL's own aggregates are the reference. The second run is
under ``REPLICA IDENTITY FULL``: the member takes the rows its source lost from the position
deletes' ``row`` column instead of the mirror's older files.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_provider_streambed import Mirror, RefreshGroup, SqlMember
from airflow_provider_streambed.local import refresh_once
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.refresh.derived import sources
from airflow_provider_streambed.refresh.derived.sources import INCREMENTAL_CONF
from airflow_provider_streambed.testing.spark import EventLogs
from tests.integration.refresh.deletes import delete_files_with_images

pytestmark = pytest.mark.slow
STATS = ("SELECT grp, COUNT(*) AS n, COUNT(v) AS counted, SUM(v) AS total, COUNT(k) AS nk, SUM(k) AS sk, "
         "AVG(k) AS mk FROM facts GROUP BY grp")
GROUP = RefreshGroup("counted", "src", "cat", "counted", (
    Mirror("public.facts", compact_deleted_ratio=100.0),  # no compaction: it writes the mirror whole
    SqlMember("grp_stats", STATS, sources=["facts"], incremental=True),
))
UPDATED_HERE = "member=grp_stats W={}: its aggregates updated from the changes of facts in this process"


def _write(dsn: str, rng: random.Random, first_id: int) -> None:
    """Moves between groups (NULL among them), NULL values, deletes and inserts."""
    with psycopg.connect(dsn) as conn:
        for _ in range(30):
            conn.execute("UPDATE facts SET grp = %s, v = %s WHERE id = %s",
                         (rng.choice([1, 2, 3, None]), rng.choice([Decimal("1.25"), None]), rng.randrange(1, 200)))
        conn.execute("DELETE FROM facts WHERE id IN (SELECT id FROM facts ORDER BY id LIMIT 5)")
        conn.execute("INSERT INTO facts SELECT i, i %% 4, (i %% 9) * 1.5, NULLIF(i %% 5, 0) "
                     "FROM generate_series(%s::int, %s::int) i", (first_id, first_id + 20))


def _postgres_stats(dsn: str) -> dict[Any, tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT grp, COUNT(*), COUNT(v), SUM(v), COUNT(k), SUM(k) FROM facts GROUP BY grp")
        return {grp: (n, counted, total, nk, sk, sk / nk if nk else None) for grp, n, counted, total, nk, sk in rows}


def _cut_stats(reader: CutReader, cut_id: int) -> dict[Any, tuple[Any, ...]]:
    return {row["grp"]: (row["n"], row["counted"], row["total"], row["nk"], row["sk"], row["mk"])
            for row in reader.get(cut_id).to_arrow("grp_stats").to_pylist()}


def test_a_group_of_a_mirror_and_a_member_the_worker_updates_starts_no_spark(
    pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger=sources.__name__)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE facts (id int PRIMARY KEY, grp int, v numeric(12,2), k int)")
        conn.execute("INSERT INTO facts SELECT i, i % 3, (i % 7) * 0.5, NULLIF(i % 4, 0) "
                     "FROM generate_series(1, 200) i")
    event_logs = EventLogs(tmp_path / "spark-events")
    properties = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    options: dict[str, Any] = {"source_dsn": pg_dsn, "catalog_properties": properties, "spark_conf": event_logs.conf()}
    reader = CutReader(properties, GROUP)
    rng = random.Random(34)

    refresh_once(GROUP, **options)
    assert event_logs.applications() == 1  # the member's first cut: Spark computes it, and records its shape
    for run in range(2):
        if run == 1:
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                conn.execute("ALTER TABLE facts REPLICA IDENTITY FULL")
        _write(pg_dsn, rng, 1000 + 100 * run)
        result = refresh_once(GROUP, **options)
        assert event_logs.applications() == 1, "a run of the mirror and the member updated in the worker started Spark"
        assert UPDATED_HERE.format(result.cut.watermark) in caplog.text
        assert _cut_stats(reader, result.cut.cut_id) == _postgres_stats(pg_dsn)
        assert ("removed rows taken from 1 delete files' rows" in caplog.text) == (run == 1)
    assert delete_files_with_images(reader.get(result.cut.cut_id), "facts") == Counter({False: 1, True: 1})

    _write(pg_dsn, rng, 2000)
    options["spark_conf"] = {**options["spark_conf"], INCREMENTAL_CONF: "false"}  # a full refresh
    result = refresh_once(GROUP, **options)
    assert event_logs.applications() == 2, "a full refresh computes the member whole, by Spark"
    assert _cut_stats(reader, result.cut.cut_id) == _postgres_stats(pg_dsn)
